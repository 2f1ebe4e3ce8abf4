package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/signature"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/validate"
)

// Validator results, the result label of toolgate_validator_requests_total.
const (
	ResultAllowed = "allowed"
	ResultDenied  = "denied"
	ResultError   = "error"
	ResultTimeout = "timeout"
)

// Bounds on what a validator may send back: its answer is read whole
// before the call is decided, and its reasons reach the model.
const (
	maxAnswerBytes   = 64 << 10
	maxReasons       = 16
	maxReasonMessage = 1024
)

// Observer records one validator call: its result and how long it took.
// ctx is the call's, for a trace exemplar.
type Observer func(ctx context.Context, validator, result string, d time.Duration)

// Validators calls the validators of one config generation. It is built
// with the snapshot it belongs to and swapped with it on reload.
type Validators struct {
	specs   []*catalog.ValidatorSpec
	client  *http.Client
	observe Observer
}

// NewValidators prepares the calls of specs. observe may be nil.
func NewValidators(specs []*catalog.ValidatorSpec, observe Observer) *Validators {
	if observe == nil {
		observe = func(context.Context, string, string, time.Duration) {}
	}
	tr := &http.Transport{
		// Validator bodies carry context values and tool results; they go
		// straight to the configured URL, never through an environment
		// proxy.
		Proxy:               nil,
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Validators{
		specs:   specs,
		observe: observe,
		client: &http.Client{
			Transport: tr,
			// A redirect would send the body somewhere the operator did
			// not configure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Close releases idle connections once no request uses v any more.
func (v *Validators) Close() {
	if v != nil {
		v.client.CloseIdleConnections()
	}
}

func (v *Validators) empty() bool { return v == nil || len(v.specs) == 0 }

// validatorReply is what a validator replies.
type validatorReply struct {
	Allowed *bool `json:"allowed"`
	Reasons []struct {
		Pointer string `json:"pointer"`
		Message string `json:"message"`
	} `json:"reasons"`
}

// call asks validator s about one call and turns its answer into findings.
func (v *Validators) call(ctx context.Context, s int, body []byte) []validate.Finding {
	spec := v.specs[s]
	start := time.Now()
	ctx, sp := validatorSpan(ctx, spec.Name)
	ans, result := v.ask(ctx, spec, body)
	v.observe(ctx, spec.Name, result, time.Since(start))
	endValidatorSpan(sp, result)
	switch result {
	case ResultAllowed:
		return nil
	case ResultDenied:
		return denial(spec.Name, ans)
	}
	if spec.FailOpen {
		return nil
	}
	msg := "validator " + spec.Name + " gave no answer (" + result + "), so the call was not executed"
	return []validate.Finding{validate.RuleBroken("", validatorKeyword(spec.Name), msg, msg+"; call the tool again")}
}

// ask makes the HTTP exchange and classifies it.
func (v *Validators) ask(ctx context.Context, spec *catalog.ValidatorSpec, body []byte) (*validatorReply, string) {
	if body == nil {
		return nil, ResultError
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, spec.URL, bytes.NewReader(body))
	if err != nil {
		return nil, ResultError
	}
	req.Header.Set("Content-Type", "application/json")
	telemetry.Inject(ctx, req.Header)
	if len(spec.Secret) > 0 {
		req.Header.Set(signature.Header, signature.Sign(spec.Secret, body))
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, failure(ctx)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, failure(ctx)
	}
	return readAnswer(resp.StatusCode, data)
}

// readAnswer classifies a validator's reply. Only a 2xx JSON object with a
// boolean "allowed" is an answer; anything else is an error, never a guess.
func readAnswer(status int, data []byte) (*validatorReply, string) {
	if status < 200 || status > 299 || len(data) > maxAnswerBytes {
		return nil, ResultError
	}
	var a validatorReply
	if json.Unmarshal(data, &a) != nil || a.Allowed == nil {
		return nil, ResultError
	}
	if *a.Allowed {
		return &a, ResultAllowed
	}
	return &a, ResultDenied
}

// failure classifies a transport failure: a deadline (the validator's
// timeout or the recovery deadline) is a timeout, anything else an error.
func failure(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ResultTimeout
	}
	return ResultError
}

// denial turns a refusal into rule_violation findings, one per reason. The
// validator's messages may quote values from the operator's systems, so
// they go to the model (Detail) and the client's escalation (Reason) only;
// what logs and sinks see (Message) names the pointer and the validator
// and nothing else.
func denial(name string, a *validatorReply) []validate.Finding {
	kw := validatorKeyword(name)
	var out []validate.Finding
	for _, r := range a.Reasons {
		if len(out) == maxReasons {
			break
		}
		ptr := r.Pointer
		if !isPointer(ptr) {
			ptr = ""
		}
		reason := clipReason(strings.TrimSpace(r.Message))
		detail := reason
		if detail == "" {
			detail = "the call was refused by validator " + name
		}
		out = append(out, validate.RuleBroken(ptr, kw, argumentsAt(ptr)+": denied by validator "+name, detail).WithReason(reason))
	}
	if len(out) == 0 {
		msg := "arguments: denied by validator " + name
		out = append(out, validate.RuleBroken("", kw, msg, "the call was refused by validator "+name))
	}
	return out
}

func validatorKeyword(name string) string { return "validator:" + name }

func argumentsAt(ptr string) string { return "arguments" + ptr }

// isPointer reports an RFC 6901 pointer; anything else is dropped rather
// than logged, since it came from outside.
func isPointer(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' || len(p) > 512 || !utf8.ValidString(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c < 0x20 || c == 0x7f:
			return false
		case c == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')):
			return false
		}
	}
	return true
}

// clipReason bounds a reason at maxReasonMessage bytes on a rune boundary.
func clipReason(s string) string {
	if len(s) <= maxReasonMessage {
		return s
	}
	s = s[:maxReasonMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
