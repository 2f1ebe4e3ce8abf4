package jsonrpc

import "testing"

// BenchmarkDecodeCall reads a tools/call of each revision, as every MCP
// call judged is read.
func BenchmarkDecodeCall(b *testing.B) {
	for _, c := range []struct{ name, body string }{{"2025-11-25", call}, {"2026-07-28", call2026}} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (&Codec{}).DecodeAnswer(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
