package gemini

import "testing"

// BenchmarkDecodeRequest reads the recorded requests: camelCase with an
// OpenAPI schema, snake_case with a JSON Schema and history sent as
// function_call / function_response.
func BenchmarkDecodeRequest(b *testing.B) {
	for _, name := range []string{
		"generate_thought_and_call_gemini-2.5-flash.request.json",
		"generate_snake_case_declaration_gemini-2.5-flash.request.json",
		"array_single_element_unsigned_call_gemini-2.5-flash.request.json",
	} {
		body := readSample(b, "recorded/"+name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := newCodec().DecodeRequest("/v1beta/models/m:generateContent", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
