package validate_test

import (
	"testing"

	"github.com/toolgate/toolgate/validate"
)

func TestCorpusSeen(t *testing.T) {
	tests := []struct {
		name  string
		texts []string
		token string
		want  bool
	}{
		// Whole-token matching.
		{"alone", []string{"ord_1"}, "ord_1", true},
		{"at start", []string{"ord_1 is late"}, "ord_1", true},
		{"at end", []string{"look at ord_1"}, "ord_1", true},
		{"in the middle", []string{"look at ord_1 today"}, "ord_1", true},
		{"longer token after", []string{"look at ord_12"}, "ord_1", false},
		{"longer token before", []string{"look at xord_1"}, "ord_1", false},
		{"longer on both sides", []string{"xord_12"}, "ord_1", false},
		{"hyphen continues a token", []string{"ord_1-b"}, "ord_1", false},
		{"underscore continues a token", []string{"ord_1_b"}, "ord_1", false},
		{"later whole occurrence counts", []string{"ord_12 and ord_1"}, "ord_1", true},
		{"overlapping occurrences", []string{"aaa aa"}, "aa", true},
		{"overlapping only inside", []string{"aaa"}, "aa", false},
		{"absent", []string{"nothing here"}, "ord_1", false},
		{"empty token", []string{"anything"}, "", false},
		{"empty corpus", nil, "ord_1", false},
		{"case differs", []string{"ORD_1"}, "ord_1", false},

		// Punctuation and quotes are boundaries.
		{"period", []string{"order ord_1."}, "ord_1", true},
		{"comma", []string{"ord_1,ord_2"}, "ord_2", true},
		{"parentheses", []string{"(ord_1)"}, "ord_1", true},
		{"colon", []string{"id:ord_1"}, "ord_1", true},
		{"slash", []string{"/orders/ord_1/items"}, "ord_1", true},
		{"double quotes", []string{`"ord_1"`}, "ord_1", true},
		{"single quotes", []string{`'ord_1'`}, "ord_1", true},
		{"backticks", []string{"`ord_1`"}, "ord_1", true},
		{"newline", []string{"a\nord_1\nb"}, "ord_1", true},
		{"tab", []string{"a\tord_1"}, "ord_1", true},
		{"at sign", []string{"mail me@example.com"}, "me@example.com", true},

		// JSON text from tool results.
		{"JSON string value", []string{`{"id":"ord_1","total":250}`}, "ord_1", true},
		{"JSON number value", []string{`{"id":"ord_1","total":250}`}, "250", true},
		{"JSON number inside a longer one", []string{`{"total":2500}`}, "250", false},
		{"JSON array element", []string{`["cus_a","cus_b"]`}, "cus_b", true},
		{"JSON key vouches too", []string{`{"ord_1":{}}`}, "ord_1", true},

		// Unicode: letters of any script continue a token; other symbols do not.
		{"accented word whole", []string{"un café, merci"}, "café", true},
		{"accented word prefix", []string{"un café"}, "caf", false},
		{"letter before", []string{"äord_1"}, "ord_1", false},
		{"letter after", []string{"ord_1é"}, "ord_1", false},
		{"combining mark after", []string{"cafe\u0301"}, "cafe", false},
		{"cyrillic letters", []string{"заказ ord_1"}, "ord_1", true},
		{"cyrillic token", []string{"клиент Иван."}, "Иван", true},
		{"cyrillic token inside a longer word", []string{"Иванов"}, "Иван", false},
		{"curly quotes", []string{"the order “ord_1” please"}, "ord_1", true},
		{"guillemets", []string{"«ord_1»"}, "ord_1", true},
		{"em dash", []string{"ord_1—shipped"}, "ord_1", true},
		{"no-break space", []string{"order\u00a0ord_1\u00a0today"}, "ord_1", true},
		{"CJK brackets", []string{"注文「ord_1」です"}, "ord_1", true},
		{"ideographic full stop", []string{"ord_1。"}, "ord_1", true},
		{"emoji", []string{"📦ord_1📦"}, "ord_1", true},

		// Tokens that are themselves punctuation need no boundary on that side.
		{"token starting with punctuation", []string{"x(ord_1"}, "(ord_1", true},
		{"token ending with punctuation", []string{"ord_1)x"}, "ord_1)", true},
		{"token with inner space", []string{"say New York, now"}, "New York", true},
		{"token with inner space inside a word", []string{"say New Yorker"}, "New York", false},

		// Several texts are joined so that none runs into the next.
		{"texts do not merge", []string{"ord", "_1"}, "ord_1", false},
		{"token in second text", []string{"hello", "ord_1"}, "ord_1", true},
		{"token at the end of the first text", []string{"ord_1", "ord_2"}, "ord_1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validate.NewCorpus(tc.texts)
			if got := c.Seen(tc.token); got != tc.want {
				t.Errorf("Seen(%q) in %q = %v, want %v", tc.token, tc.texts, got, tc.want)
			}
		})
	}
}

// TestCorpusSeenJSONEscapes: tool results are often JSON written by an
// encoder that escapes non-ASCII or special characters (Python's json.dumps
// escapes every non-ASCII letter). The value the tool returned is still the
// decoded one, so it must vouch for that value.
func TestCorpusSeenJSONEscapes(t *testing.T) {
	tests := []struct {
		name  string
		texts []string
		token string
		want  bool
	}{
		{"unicode escape", []string{`{"customer":"Jos\u00e9 Garc\u00eda"}`}, "José García", true},
		{"escaped slash", []string{`{"path":"a\/b"}`}, "a/b", true},
		{"escaped quote", []string{`{"title":"the \"big\" one"}`}, `the "big" one`, true},
		{"escaped backslash", []string{`{"dir":"C:\\data"}`}, `C:\data`, true},
		{"nested array", []string{`{"rows":[{"id":"\u00f8rd_1"}]}`}, "ørd_1", true},
		{"decoded value keeps word boundaries", []string{`{"id":"ord_12"}`}, "ord_1", false},
		{"not JSON stays raw", []string{`Jos\u00e9`}, "José", false},
		{"raw text of the JSON still counts", []string{`{"id":"ord_1"}`}, "ord_1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validate.NewCorpus(tc.texts)
			if got := c.Seen(tc.token); got != tc.want {
				t.Errorf("Seen(%q) in %q = %v, want %v", tc.token, tc.texts, got, tc.want)
			}
		})
	}
}

func TestCorpusNil(t *testing.T) {
	var c *validate.Corpus
	if c.Seen("x") {
		t.Error("a nil corpus vouches for nothing")
	}
}

func TestCorpusIsEvidence(t *testing.T) {
	var _ validate.Evidence = validate.NewCorpus(nil)
}
