package judge

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/validate"
)

// FuzzValidatorAnswer feeds the answer reader arbitrary replies: it never
// panics, an answer is only ever allowed or denied when "allowed" says so,
// and a denial's logged messages hold nothing but the pointer and the
// validator's name.
func FuzzValidatorAnswer(f *testing.F) {
	f.Add(200, `{"allowed":true}`)
	f.Add(200, `{"allowed":false,"reasons":[{"pointer":"/a~1b","message":"no"}]}`)
	f.Add(200, `{"allowed":false,"reasons":[{"pointer":"/a~2","message":"secret 123"},{"pointer":"\u0000","message":"`+strings.Repeat("é", 600)+`"}]}`)
	f.Add(500, `{"allowed":true}`)
	f.Add(200, `{"allowed":null}`)
	f.Add(200, `[true]`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		a, result := readAnswer(status, []byte(body))
		switch result {
		case ResultAllowed, ResultError:
			return
		case ResultDenied:
		default:
			t.Fatalf("result %q", result)
		}
		fs := denial("orders", a)
		if len(fs) == 0 || len(fs) > maxReasons {
			t.Fatalf("%d findings", len(fs))
		}
		for _, f := range fs {
			if f.Code != validate.RuleViolation || f.Keyword != "validator:orders" || !isPointer(f.Pointer) {
				t.Fatalf("finding %+v", f)
			}
			if f.Message != "arguments"+f.Pointer+": denied by validator orders" {
				t.Fatalf("logged message %q", f.Message)
			}
			if len(f.Detail) > maxReasonMessage+len("…") {
				t.Fatalf("detail of %d bytes", len(f.Detail))
			}
		}
	})
}
