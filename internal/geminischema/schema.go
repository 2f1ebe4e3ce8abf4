// Package geminischema translates the Gemini API's OpenAPI-style Schema
// (the `parameters` of a function declaration) into the JSON Schema 2020-12
// it means, so that one validator judges Gemini tools like every other.
//
// The Gemini form differs from JSON Schema in a few keywords only: type
// names are upper case (OBJECT, STRING…) or, as proto JSON may write an
// enum, numbers (6 is OBJECT); `nullable` says that null is also
// accepted; `example` holds one example; limits may be written as strings
// (proto JSON's int64 and double); `enum` is a list of strings, so a value
// may be written as a string or as what it spells; `propertyOrdering` only
// orders generation; keywords may be written under their proto names
// (`any_of`, `min_items`…); and Vertex AI adds `defs`, `ref` and
// `additionalProperties`. Everything else (properties, items, required,
// pattern, format…) means what it means in JSON Schema and is copied as
// written, numbers byte for byte.
package geminischema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// maxDepth bounds how deeply nested a schema may be.
const maxDepth = 64

// ErrSchema reports a Gemini schema that cannot be translated.
var ErrSchema = errors.New("geminischema: not a Gemini Schema")

// types maps the Gemini type names, in any letter case, to JSON Schema's.
var types = map[string]string{
	"string": "string", "number": "number", "integer": "integer",
	"boolean": "boolean", "array": "array", "object": "object", "null": "null",
}

// typeNumbers are the Type enum's values by number, as proto JSON may
// write an enum (the legacy Go SDK asks for enum-encoding=int and sends
// "type": 6). Zero is TYPE_UNSPECIFIED.
var typeNumbers = []string{"", "string", "number", "integer", "boolean", "array", "object", "null"}

// snakeKeys are the keywords the API also accepts under their proto
// names, and the JSON names they mean.
var snakeKeys = map[string]string{
	"any_of": "anyOf", "min_items": "minItems", "max_items": "maxItems",
	"min_length": "minLength", "max_length": "maxLength",
	"min_properties": "minProperties", "max_properties": "maxProperties",
	"property_ordering": "propertyOrdering", "additional_properties": "additionalProperties",
}

// numberKeys are the bounds proto JSON may write as strings (a double).
var numberKeys = map[string]bool{"minimum": true, "maximum": true}

// countKeys are the limits proto JSON may write as strings.
var countKeys = map[string]bool{
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"minProperties": true, "maxProperties": true,
}

// ToJSONSchema translates one Gemini Schema object.
func ToJSONSchema(raw []byte) ([]byte, error) {
	out, err := translate(raw, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func schemaErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSchema, fmt.Sprintf(format, args...))
}

func translate(raw []byte, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, schemaErr("nested deeper than %d", maxDepth)
	}
	in, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, schemaErr("a schema must be an object")
	}
	in, err = jsonNames(in)
	if err != nil {
		return nil, err
	}
	out := make(jsonx.Object, 0, len(in))
	nullable := false
	for _, f := range in {
		if name, v, ok, err := reference(f, depth); ok || err != nil {
			if err != nil {
				return nil, err
			}
			out = out.Set(name, v)
			continue
		}
		v, keep, err := field(f, depth, &nullable)
		if err != nil {
			return nil, err
		}
		if !keep {
			continue
		}
		if f.Key == "example" {
			out = out.Set("examples", v)
			continue
		}
		out = out.Set(f.Key, v)
	}
	if e := out.Get("enum"); e != nil {
		out = out.Set("enum", enumForms(e))
	}
	if nullable {
		out = allowNull(out)
	}
	return out.Bytes(), nil
}

// jsonNames renames the keywords written under their proto names; a
// keyword written both ways is refused, as the API refuses it.
func jsonNames(in jsonx.Object) (jsonx.Object, error) {
	var out jsonx.Object
	for i, f := range in {
		name, ok := snakeKeys[f.Key]
		if !ok {
			continue
		}
		if in.Has(name) {
			return nil, schemaErr("%s is written both as %s and as %s", name, f.Key, name)
		}
		if out == nil {
			out = append(jsonx.Object(nil), in...)
		}
		out[i].Key = name
	}
	if out == nil {
		return in, nil
	}
	return out, nil
}

// enumForms lists each enum value in both forms it may take. The API's
// enum is a list of strings, so a number or boolean listed in it is the
// same value as its digits; and the model answers an INTEGER enum of
// "1" and "2" with the number 1. JSON Schema compares values with their
// types, so each value is listed as written and in its other form; the
// type keyword still decides which of the two a call may use.
func enumForms(raw []byte) []byte {
	vals, err := jsonx.ParseArray(raw)
	if err != nil {
		return raw
	}
	out := append([][]byte(nil), vals...)
	seen := make(map[string]bool, 2*len(vals))
	for _, v := range vals {
		seen[string(v)] = true
	}
	for _, v := range vals {
		var alt []byte
		if s, ok := jsonx.Unquote(v); ok {
			if isScalarLiteral(s) {
				alt = []byte(s)
			}
		} else if len(v) > 0 && v[0] != '{' && v[0] != '[' && !jsonx.IsNull(v) {
			alt = jsonx.String(string(v))
		}
		if alt != nil && !seen[string(alt)] {
			seen[string(alt)] = true
			out = append(out, alt)
		}
	}
	return jsonx.AppendArray(nil, out)
}

// isScalarLiteral reports a string that is the JSON text of a number or a
// boolean.
func isScalarLiteral(s string) bool {
	if s == "true" || s == "false" {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && json.Valid([]byte(s)) && s != "" && (s[0] == '-' || ('0' <= s[0] && s[0] <= '9'))
}

// field translates one keyword; keep is false for keywords JSON Schema
// has no use for.
func field(f jsonx.Field, depth int, nullable *bool) (v []byte, keep bool, err error) {
	switch {
	case f.Key == "type":
		if n, ok := jsonx.Int(f.Value); ok {
			if n < 0 || n >= int64(len(typeNumbers)) {
				return nil, false, schemaErr("unknown type %d", n)
			}
			if n == 0 {
				return nil, false, nil
			}
			return jsonx.String(typeNumbers[n]), true, nil
		}
		name, ok := jsonx.Unquote(f.Value)
		if !ok {
			return nil, false, schemaErr("type must be a name or a number")
		}
		if name == "" || strings.EqualFold(name, "TYPE_UNSPECIFIED") {
			return nil, false, nil
		}
		t, ok := types[strings.ToLower(name)]
		if !ok {
			return nil, false, schemaErr("unknown type %q", name)
		}
		return jsonx.String(t), true, nil
	case f.Key == "nullable":
		switch string(f.Value) {
		case "true":
			*nullable = true
		case "false", "null":
		default:
			return nil, false, schemaErr("nullable must be a boolean")
		}
		return nil, false, nil
	case f.Key == "propertyOrdering":
		// Orders generation only; no value is valid or invalid by it.
		return nil, false, nil
	case f.Key == "example":
		return jsonx.AppendArray(nil, [][]byte{f.Value}), true, nil
	case f.Key == "items":
		v, err := translate(f.Value, depth+1)
		return v, true, err
	case f.Key == "anyOf":
		v, err := translateList(f.Value, depth)
		return v, true, err
	case f.Key == "properties":
		v, err := translateMap(f.Value, depth)
		return v, true, err
	case f.Key == "additionalProperties":
		// Vertex AI's form: a boolean, or a schema in this same form.
		if jsonx.IsNull(f.Value) || string(f.Value) == "true" || string(f.Value) == "false" {
			return f.Value, !jsonx.IsNull(f.Value), nil
		}
		v, err := translate(f.Value, depth+1)
		return v, true, err
	case countKeys[f.Key]:
		v, err := count(f.Key, f.Value)
		return v, v != nil, err
	case numberKeys[f.Key]:
		v, err := number(f.Key, f.Value)
		return v, v != nil, err
	}
	return f.Value, true, nil
}

// reference translates Vertex AI's references: "defs" holds named schemas
// in this form and "ref" names one as "#/defs/Name"; in JSON Schema they
// are $defs and $ref "#/$defs/Name". ok is false for other keywords.
func reference(f jsonx.Field, depth int) (name string, v []byte, ok bool, err error) {
	switch f.Key {
	case "defs":
		v, err := translateMap(f.Value, depth)
		return "$defs", v, true, err
	case "ref":
		r, isString := jsonx.Unquote(f.Value)
		if !isString {
			return "", nil, false, schemaErr("ref must be a string")
		}
		if rest, found := strings.CutPrefix(r, "#/defs/"); found {
			r = "#/$defs/" + rest
		}
		return "$ref", jsonx.String(r), true, nil
	}
	return "", nil, false, nil
}

// translateList translates an array of schemas.
func translateList(raw []byte, depth int) ([]byte, error) {
	elems, err := jsonx.ParseArray(raw)
	if err != nil {
		return nil, schemaErr("anyOf must be an array of schemas")
	}
	out := make([][]byte, len(elems))
	for i, e := range elems {
		if out[i], err = translate(e, depth+1); err != nil {
			return nil, err
		}
	}
	return jsonx.AppendArray(nil, out), nil
}

// translateMap translates an object whose values are schemas.
func translateMap(raw []byte, depth int) ([]byte, error) {
	obj, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, schemaErr("properties must be an object of schemas")
	}
	out := make(jsonx.Object, 0, len(obj))
	for _, f := range obj {
		v, err := translate(f.Value, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, jsonx.Field{Key: f.Key, Value: v})
	}
	return out.Bytes(), nil
}

// count reads a non-negative integer limit, written as a number or, as
// proto JSON writes int64, as a decimal string.
func count(key string, raw []byte) ([]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	if s, ok := jsonx.Unquote(raw); ok {
		if n, err := strconv.ParseUint(s, 10, 63); err == nil {
			return strconv.AppendUint(nil, n, 10), nil
		}
		return nil, schemaErr("%s must be a non-negative integer", key)
	}
	if n, ok := jsonx.Int(raw); ok && n >= 0 {
		return raw, nil
	}
	return nil, schemaErr("%s must be a non-negative integer", key)
}

// number reads a bound, written as a number or, as proto JSON may write
// a double, as a decimal string.
func number(key string, raw []byte) ([]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	if s, ok := jsonx.Unquote(raw); ok {
		raw = []byte(s)
	}
	if !isScalarLiteral(string(raw)) || raw[0] == 't' || raw[0] == 'f' {
		return nil, schemaErr("%s must be a number", key)
	}
	return raw, nil
}

// allowNull makes a nullable schema accept null: "null" joins the type
// and, where the values are listed, the enum; a schema that is only an
// anyOf gains a null branch. A schema with none of these accepts null
// already.
func allowNull(s jsonx.Object) jsonx.Object {
	if t := s.Get("type"); t != nil {
		s = s.Set("type", jsonx.AppendArray(nil, [][]byte{t, []byte(`"null"`)}))
	}
	if e := s.Get("enum"); e != nil {
		if vals, err := jsonx.ParseArray(e); err == nil && !hasNull(vals) {
			s = s.Set("enum", jsonx.AppendArray(nil, append(append([][]byte(nil), vals...), []byte("null"))))
		}
	}
	if a := s.Get("anyOf"); a != nil && s.Get("type") == nil {
		if branches, err := jsonx.ParseArray(a); err == nil {
			s = s.Set("anyOf", jsonx.AppendArray(nil, append(append([][]byte(nil), branches...), []byte(`{"type":"null"}`))))
		}
	}
	return s
}

func hasNull(vals [][]byte) bool {
	for _, v := range vals {
		if jsonx.IsNull(v) {
			return true
		}
	}
	return false
}

// noArguments is the schema of a declaration that names no parameters:
// the function takes no arguments.
var noArguments = []byte(`{"type":"object","properties":{},"additionalProperties":false}`)

// Declaration is the JSON Schema a function declaration's arguments are
// judged by: parametersJsonSchema as written, else parameters translated
// from the OpenAPI form, else no arguments at all.
func Declaration(parameters, parametersJSONSchema []byte) ([]byte, error) {
	switch {
	case !jsonx.IsNull(parametersJSONSchema):
		return parametersJSONSchema, nil
	case !jsonx.IsNull(parameters):
		return ToJSONSchema(parameters)
	}
	return noArguments, nil
}
