package judge

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// ResultQuestion is what a validator with on: [results] is sent about one
// tool result (docs/results.md).
type ResultQuestion struct {
	RequestID      string `json:"request_id"`
	CatalogVersion string `json:"catalog_version"`
	Result         struct {
		ID         string `json:"id"`
		Tool       string `json:"tool"`
		Text       string `json:"text"`
		Structured any    `json:"structured,omitempty"`
		IsError    bool   `json:"is_error"`
	} `json:"result"`
	Args    any               `json:"args,omitempty"`
	Context map[string]string `json:"context,omitempty"`
}

// HasResultValidators reports whether any validator is asked about results.
func (v *Validators) HasResultValidators() bool {
	if v.empty() {
		return false
	}
	for _, s := range v.specs {
		if s.Results {
			return true
		}
	}
	return false
}

// AskResult asks every validator that judges results of tool about one
// result, in config order, and returns the first refusal's message ("" when
// all allowed) and the validator's name. A validator that cannot answer refuses unless its
// failure_policy is ignore, as for calls.
func (v *Validators) AskResult(ctx context.Context, tool string, q *ResultQuestion) (why, validator string) {
	if v.empty() {
		return "", ""
	}
	body, err := json.Marshal(q)
	if err != nil {
		body = nil
	}
	for _, spec := range v.specs {
		if !spec.Results || !spec.Judges(tool) {
			continue
		}
		start := time.Now()
		ctx, sp := validatorSpan(ctx, spec.Name)
		ans, result := v.ask(ctx, spec, body)
		v.observe(ctx, spec.Name, result, time.Since(start))
		endValidatorSpan(sp, result)
		switch {
		case result == ResultAllowed:
			continue
		case result == ResultDenied:
			return "denied by validator " + spec.Name + reasonsOf(ans), spec.Name
		case !spec.FailOpen:
			return "validator " + spec.Name + " gave no answer (" + result + ")", spec.Name
		}
	}
	return "", ""
}

// reasonsOf joins a denial's reasons, bounded like a call's.
func reasonsOf(a *validatorReply) string {
	var parts []string
	for _, r := range a.Reasons {
		if len(parts) == maxReasons {
			break
		}
		if m := clipReason(strings.TrimSpace(r.Message)); m != "" {
			parts = append(parts, m)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}
