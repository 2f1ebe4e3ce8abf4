"""Records Pydantic v2 model_json_schema() outputs as toolgate test fixtures.

Run from this folder: python3 gen_schemas.py. Each model becomes
<name>.json: {"generator", "schema", "valid", "invalid": [{"args", "pointer",
"keywords"}]}, where valid and invalid calls are the test's, the schema is
Pydantic's own. EmailStr needs the email-validator package (2.x; the recorded
invite.json was made with email-validator 2.2.0); without it that model is left
out and the script says so.
"""

import enum
import json
import sys
from typing import Annotated, Literal, Optional, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field, constr


class Priority(str, enum.Enum):
    low = "low"
    high = "high"


class Address(BaseModel):
    street: str
    zip_code: constr(pattern=r"^\d{5}(-\d{4})?$")
    country: Literal["US", "CA"] = "US"


class CreateTicket(BaseModel):
    # The default Rust engine has no lookahead; schemas written for the
    # Python engine carry such patterns to every client.
    model_config = ConfigDict(regex_engine="python-re")

    title: Annotated[str, Field(min_length=3, max_length=80)]
    priority: Priority
    assignee: Optional[str] = None
    ship_to: Address
    count: Annotated[int, Field(ge=1, le=10)] = 1
    sku: constr(pattern=r"^(?!TEST)[A-Z]{3}-\d{3}$")


class Card(BaseModel):
    kind: Literal["card"]
    last4: constr(pattern=r"^\d{4}$")


class Bank(BaseModel):
    kind: Literal["bank"]
    iban: Annotated[str, Field(pattern=r"^[A-Z]{2}\d{2}[A-Z0-9]{10,30}$")]


class Pay(BaseModel):
    amount_cents: Annotated[int, Field(gt=0)]
    method: Annotated[Union[Card, Bank], Field(discriminator="kind")]
    note: Optional[Annotated[str, Field(max_length=20)]] = None


MODELS = {
    "create_ticket": (
        CreateTicket,
        {"title": "Broken door", "priority": "high", "ship_to": {"street": "1 Main St", "zip_code": "12345-6789"}, "sku": "ABC-123"},
        [
            ({"title": "Broken door", "priority": "urgent", "ship_to": {"street": "1 Main St", "zip_code": "12345"}, "sku": "ABC-123"}, "/priority", ["enum"]),
            ({"title": "Broken door", "priority": "low", "ship_to": {"street": "1 Main St", "zip_code": "1234"}, "sku": "ABC-123"}, "/ship_to/zip_code", ["pattern"]),
            ({"title": "Broken door", "priority": "low", "ship_to": {"street": "1 Main St", "zip_code": "12345"}, "sku": "TEST-123"}, "/sku", ["pattern"]),
            ({"title": "Broken door", "priority": "low", "ship_to": {"street": "1 Main St", "zip_code": "12345", "country": "MX"}, "sku": "ABC-123"}, "/ship_to/country", ["enum"]),
            ({"title": "Broken door", "priority": "low", "ship_to": {"street": "1 Main St", "zip_code": "12345"}, "sku": "ABC-123", "count": 11}, "/count", ["maximum"]),
        ],
    ),
    "pay": (
        Pay,
        {"amount_cents": 500, "method": {"kind": "bank", "iban": "DE89370400440532013000"}},
        [
            ({"amount_cents": 500, "method": {"kind": "card", "last4": "12a4"}}, "/method/last4", ["pattern"]),
            ({"amount_cents": 0, "method": {"kind": "card", "last4": "1234"}}, "/amount_cents", ["exclusiveMinimum"]),
            ({"amount_cents": 5, "method": {"kind": "card", "last4": "1234"}, "note": "x" * 21}, "/note", ["maxLength"]),
        ],
    ),
}

try:
    import email_validator  # noqa: F401
    from pydantic import EmailStr

    class Invite(BaseModel):
        email: EmailStr
        role: Literal["admin", "member"]

    MODELS["invite"] = (
        Invite,
        {"email": "ana@example.com", "role": "member"},
        [({"email": "ana.example.com", "role": "member"}, "/email", ["format"])],
    )
except ImportError:
    print("email-validator is not installed: the EmailStr model is not recorded", file=sys.stderr)


def main():
    for name, (model, valid, invalid) in MODELS.items():
        model.model_validate(valid)
        for args, _, _ in invalid:
            try:
                model.model_validate(args)
            except pydantic.ValidationError:
                pass
            else:
                raise SystemExit(f"{name}: {args} is valid for pydantic too")
        out = {
            "generator": f"pydantic {pydantic.VERSION}",
            "schema": model.model_json_schema(),
            "valid": valid,
            "invalid": [{"args": a, "pointer": p, "keywords": k} for a, p, k in invalid],
        }
        with open(f"{name}.json", "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
