package test

// The strict rules the mock upstreams enforce, written apart from
// toolgate's own check so that the two can disagree: from the providers'
// documents (OpenAI: platform.openai.com/docs/guides/structured-outputs
// #supported-schemas; Anthropic: platform.claude.com/docs/en/build-with-
// claude/structured-outputs#json-schema-limitations; Gemini:
// ai.google.dev/gemini-api/docs/structured-output#json-schema-support),
// plus one refusal toolgate cannot foresee (refusedKeyword).

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
)

// eachSchema calls fn on every schema object under s, depth first, until
// fn returns a reason.
func eachSchema(s any, fn func(obj map[string]any) string) string {
	obj, ok := s.(map[string]any)
	if !ok {
		return ""
	}
	if why := fn(obj); why != "" {
		return why
	}
	var subs []any
	for _, key := range []string{"properties", "$defs", "definitions"} {
		if m, ok := obj[key].(map[string]any); ok {
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				subs = append(subs, m[n])
			}
		}
	}
	subs = append(subs, obj["items"])
	for _, key := range []string{"anyOf", "allOf", "oneOf"} {
		if l, ok := obj[key].([]any); ok {
			subs = append(subs, l...)
		}
	}
	for _, sub := range subs {
		if why := eachSchema(sub, fn); why != "" {
			return why
		}
	}
	return ""
}

func decodeSchema(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var s any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return s
}

func isObjectSchema(obj map[string]any) bool {
	_, props := obj["properties"]
	return props || obj["type"] == "object"
}

func forbidden(obj map[string]any, words ...string) string {
	for _, w := range words {
		if _, ok := obj[w]; ok {
			return w
		}
	}
	return ""
}

func openAIStrictRules(t *testing.T, raw json.RawMessage) string {
	return eachSchema(decodeSchema(t, raw), func(obj map[string]any) string {
		if obj["description"] == refusedKeyword {
			return "this schema is not supported"
		}
		if w := forbidden(obj, "allOf", "oneOf", "not", "if", "then", "else", "patternProperties", "propertyNames",
			"minProperties", "maxProperties", "uniqueItems", "contains", "default"); w != "" {
			return fmt.Sprintf("'%s' is not permitted.", w)
		}
		if !isObjectSchema(obj) {
			return ""
		}
		if obj["additionalProperties"] != false {
			return "'additionalProperties' is required to be supplied and to be false."
		}
		req := map[string]bool{}
		if l, ok := obj["required"].([]any); ok {
			for _, r := range l {
				req[fmt.Sprint(r)] = true
			}
		}
		props, _ := obj["properties"].(map[string]any)
		for n := range props {
			if !req[n] {
				return "'required' is required to be supplied and to be an array including every key in properties. Missing '" + n + "'."
			}
		}
		return ""
	})
}

func anthropicStrictRules(t *testing.T, raw json.RawMessage) string {
	return eachSchema(decodeSchema(t, raw), func(obj map[string]any) string {
		if obj["description"] == refusedKeyword {
			return "this schema is not supported with strict mode"
		}
		if w := forbidden(obj, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
			"minLength", "maxLength", "maxItems", "uniqueItems", "oneOf", "not"); w != "" {
			return fmt.Sprintf("'%s' is not supported with strict mode", w)
		}
		if isObjectSchema(obj) && obj["additionalProperties"] != false {
			return "for strict tools, 'additionalProperties' must be explicitly set to false"
		}
		return ""
	})
}

func geminiStrictRules(t *testing.T, raw json.RawMessage) string {
	return eachSchema(decodeSchema(t, raw), func(obj map[string]any) string {
		if obj["description"] == refusedKeyword {
			return "schema not supported"
		}
		if w := forbidden(obj, "minLength", "maxLength", "pattern", "const", "oneOf", "allOf", "not", "default",
			"uniqueItems", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"); w != "" {
			return fmt.Sprintf("schema keyword '%s' is not supported", w)
		}
		return ""
	})
}
