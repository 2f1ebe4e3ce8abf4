// Prints, as one JSON array, tool parameter schemas made by the generators
// agents use, each with calls the test sends through toolgate: one valid,
// and invalid ones with the pointer and keywords toolgate must report. The
// schemas are the generators' own output at the pinned versions; only the
// calls are written here.
import { z as z3 } from "zod";
import { zodToJsonSchema } from "zod-to-json-schema";
import { z as z4 } from "zod4";
// zod 3.25 ships the Zod 4 API as zod/v4; it is the instance the ai
// package's own zod/v4 import sees, so its zodSchema must get this one.
import { z as z4in3 } from "zod/v4";
import { Type } from "@sinclair/typebox";
import * as v from "valibot";
import { toJsonSchema as valibotToJsonSchema } from "@valibot/to-json-schema";
import { zodFunction } from "openai/helpers/zod";
import { zodSchema, jsonSchema } from "ai";

const versions = {};
for (const pkg of ["zod", "zod-to-json-schema", "zod4", "@sinclair/typebox", "valibot", "@valibot/to-json-schema", "openai", "ai"]) {
  const { default: meta } = await import(`./node_modules/${pkg}/package.json`, { with: { type: "json" } });
  versions[pkg] = meta.version;
}

// contact is one model every generator writes: an email, a bounded
// integer, an enum, an array, a uuid and a nested object with a pattern.
const contactValid = {
  email: "ana@example.com",
  age: 30,
  role: "admin",
  tags: ["vip"],
  id: "3f2c1b9e-8d4a-4c6b-9e1f-2a7b5c8d0e4f",
  address: { zip: "12345" },
};
const contactInvalid = [
  { patch: { email: "ana.example.com" }, pointer: "/email", keywords: ["format", "pattern"] },
  { patch: { age: -1 }, pointer: "/age", keywords: ["minimum"] },
  { patch: { age: 1.5 }, pointer: "/age", keywords: ["type", "multipleOf"] },
  { patch: { role: "root" }, pointer: "/role", keywords: ["enum", "const"] },
  { patch: { tags: ["a", "b", "c", "d"] }, pointer: "/tags", keywords: ["maxItems"] },
  { patch: { id: "3f2c1b9e-8d4a" }, pointer: "/id", keywords: ["format", "pattern"] },
  { patch: { address: { zip: "1234" } }, pointer: "/address/zip", keywords: ["pattern"] },
];

const zip = "^\\d{5}$";

function zodContact(z) {
  return z.object({
    email: z.string().email(),
    age: z.number().int().min(0).max(130),
    role: z.enum(["admin", "member"]),
    tags: z.array(z.string()).max(3),
    id: z.string().uuid(),
    address: z.object({ zip: z.string().regex(new RegExp(zip)) }),
  });
}

const typeboxContact = Type.Object({
  email: Type.String({ format: "email" }),
  age: Type.Integer({ minimum: 0, maximum: 130 }),
  role: Type.Union([Type.Literal("admin"), Type.Literal("member")]),
  tags: Type.Array(Type.String(), { maxItems: 3 }),
  id: Type.String({ format: "uuid" }),
  address: Type.Object({ zip: Type.String({ pattern: zip }) }),
});

const valibotContact = v.object({
  email: v.pipe(v.string(), v.email()),
  age: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(130)),
  role: v.picklist(["admin", "member"]),
  tags: v.pipe(v.array(v.string()), v.maxLength(3)),
  id: v.pipe(v.string(), v.uuid()),
  address: v.object({ zip: v.pipe(v.string(), v.regex(new RegExp(zip))) }),
});

// booking carries what Zod 4 turns into ECMA-262 patterns (its email,
// datetime and uuid regexes), a discriminated union and a nullable field.
function zodBooking(z, iso) {
  return z.object({
    guest: z.string().email(),
    when: iso ? z.iso.datetime() : z.string().datetime(),
    ref: z.string().uuid(),
    note: z.string().max(20).nullable(),
    pay: z.discriminatedUnion("kind", [
      z.object({ kind: z.literal("card"), last4: z.string().regex(/^\d{4}$/) }),
      z.object({ kind: z.literal("cash") }),
    ]),
  });
}
const bookingValid = {
  guest: "o'neil+tag@mail.example.co",
  when: "2026-03-01T09:30:00Z",
  ref: "3f2c1b9e-8d4a-4c6b-9e1f-2a7b5c8d0e4f",
  note: null,
  pay: { kind: "card", last4: "4242" },
};
const bookingInvalid = [
  { patch: { guest: ".ana@example.com" }, pointer: "/guest", keywords: ["format", "pattern"] },
  { patch: { when: "2026-13-45T09:30:00Z" }, pointer: "/when", keywords: ["format", "pattern"] },
  { patch: { ref: "not-a-uuid" }, pointer: "/ref", keywords: ["format", "pattern"] },
  { patch: { note: 5 }, pointer: "/note", keywords: ["type"] },
  { patch: { pay: { kind: "card", last4: "42" } }, pointer: "/pay/last4", keywords: ["pattern"] },
];

const cases = [];
function add(name, generator, schema, valid, invalid) {
  cases.push({
    name,
    generator,
    schema: JSON.parse(JSON.stringify(schema)),
    valid,
    invalid: invalid.map((c) => ({ args: { ...valid, ...c.patch }, pointer: c.pointer, keywords: c.keywords })),
  });
}

const zts = `zod ${versions.zod} + zod-to-json-schema ${versions["zod-to-json-schema"]}`;
add("zod3_contact", zts, zodToJsonSchema(zodContact(z3)), contactValid, contactInvalid);
add("zod3_contact_email_pattern", zts, zodToJsonSchema(zodContact(z3), { emailStrategy: "pattern:zod" }), contactValid, contactInvalid);
add("zod3_booking", zts, zodToJsonSchema(zodBooking(z3, false)), bookingValid, bookingInvalid);
add("zod4_contact", `zod ${versions.zod4} toJSONSchema`, z4.toJSONSchema(zodContact(z4)), contactValid, contactInvalid);
add("zod4_booking", `zod ${versions.zod4} toJSONSchema`, z4.toJSONSchema(zodBooking(z4, true)), bookingValid, bookingInvalid);
add("typebox_contact", `@sinclair/typebox ${versions["@sinclair/typebox"]}`, typeboxContact, contactValid, contactInvalid);
add("valibot_contact", `valibot ${versions.valibot} + @valibot/to-json-schema ${versions["@valibot/to-json-schema"]}`,
  valibotToJsonSchema(valibotContact), contactValid, contactInvalid);
add("openai_zodfunction_contact", `openai ${versions.openai} zodFunction (zod ${versions.zod})`,
  zodFunction({ name: "contact", parameters: zodContact(z3) }).function.parameters, contactValid, contactInvalid);
add("openai_zodfunction_booking", `openai ${versions.openai} zodFunction (zod ${versions.zod})`,
  zodFunction({ name: "booking", parameters: zodBooking(z3, false) }).function.parameters, bookingValid, bookingInvalid);
add("ai_zodschema_zod3_contact", `ai ${versions.ai} zodSchema (zod ${versions.zod})`,
  await zodSchema(zodContact(z3)).jsonSchema, contactValid, contactInvalid);
add("zod4_in_zod3_booking", `zod ${versions.zod} zod/v4 toJSONSchema`, z4in3.toJSONSchema(zodBooking(z4in3, true)), bookingValid, bookingInvalid);
add("ai_zodschema_zod4_booking", `ai ${versions.ai} zodSchema (zod ${versions.zod} zod/v4)`,
  await zodSchema(zodBooking(z4in3, true)).jsonSchema, bookingValid, bookingInvalid);
add("ai_jsonschema_typebox_contact", `ai ${versions.ai} jsonSchema`,
  await jsonSchema(JSON.parse(JSON.stringify(typeboxContact))).jsonSchema, contactValid, contactInvalid);

process.stdout.write(JSON.stringify(cases));
