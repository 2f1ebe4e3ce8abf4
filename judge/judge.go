// Package judge is the one entry point that decides whether tool calls may
// run: the local checks of package validate (name, schema, provenance, CEL
// rules over the call, its answer, the conversation and the request's
// context) and then the operator's own validators, called over HTTP for
// each call that passed every local check.
//
// Every surface that judges calls (the chat, messages and responses
// routes, and any other API or protocol) builds one Judge per request and
// calls Batch for each answer, or Call for a lone call.
package judge

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/toolgate/toolgate/validate"
)

// Judge judges the calls of one request. It is safe for concurrent use
// once built; its fields must not change after the first call.
type Judge struct {
	// Local is the request's context for the local checks: effective
	// catalog, evidence, history and context values.
	Local *validate.Context
	// Validators are the operator's webhooks of the request's config
	// generation; nil calls none.
	Validators *Validators
	// RequestID and CatalogVersion label the validators' requests.
	RequestID      string
	CatalogVersion string
	// Server is set when the calls go to an MCP server: validators know
	// its tools as the catalog names them, "server/tool", in their tools
	// list and in the call they receive, so a model API's tool of the
	// same name is not mistaken for it.
	Server string
	// Extra runs a surface's own local checks on each call's report after
	// validate's, before any validator: a validator only ever sees a call
	// that every local check passed. nil adds none.
	Extra func(c validate.ToolCall, v *validate.CallReport)

	historyOnce sync.Once
	historyJSON json.RawMessage
}

// Call judges one call alone, as the only call of its answer.
func (j *Judge) Call(ctx context.Context, c validate.ToolCall) validate.CallReport {
	return j.Batch(ctx, []validate.ToolCall{c}, []int{0})[0]
}

// Batch judges the calls at positions at of one answer's calls; each sees
// the others as its siblings (the rules' `calls`). It returns one report
// per position in at. Validators run concurrently for every call that
// passed its local checks, and their findings are appended in config
// order. It never takes longer than ctx and the slowest validator's
// timeout allow.
func (j *Judge) Batch(ctx context.Context, batch []validate.ToolCall, at []int) []validate.CallReport {
	out := make([]validate.CallReport, len(at))
	spans := j.startSpans(ctx, batch, at)
	defer spans.end(out)
	for k, i := range at {
		out[k] = validate.CheckIn(batch, i, j.Local)
		if j.Extra != nil {
			j.Extra(batch[i], &out[k])
		}
	}
	if j.Validators.empty() {
		return out
	}
	type job struct {
		k    int
		spec int
	}
	var jobs []job
	for k, i := range at {
		v := &out[k]
		if v.Tool == nil || !v.Valid() || batch[i].Kind == validate.Other {
			continue
		}
		for s, spec := range j.Validators.specs {
			if spec.Calls && spec.Judges(j.toolName(v.Tool.Name)) {
				jobs = append(jobs, job{k: k, spec: s})
			}
		}
	}
	if len(jobs) == 0 {
		return out
	}
	found := make([][]validate.Finding, len(jobs))
	var wg sync.WaitGroup
	for n, jb := range jobs {
		c := batch[at[jb.k]]
		c.Name = j.toolName(out[jb.k].Tool.Name)
		wg.Go(func() {
			found[n] = j.Validators.call(spans.ctx(ctx, jb.k), jb.spec, j.payload(c))
		})
	}
	wg.Wait()
	for n, jb := range jobs {
		out[jb.k].Findings = append(out[jb.k].Findings, found[n]...)
	}
	return out
}

// toolName is how validators know a resolved tool.
func (j *Judge) toolName(tool string) string {
	if j.Server != "" {
		return j.Server + "/" + tool
	}
	return tool
}

// request is the body a validator receives.
type request struct {
	RequestID       string            `json:"request_id"`
	CatalogVersion  string            `json:"catalog_version"`
	Call            requestCall       `json:"call"`
	History         json.RawMessage   `json:"history"`
	HistoryComplete bool              `json:"history_complete"`
	Context         map[string]string `json:"context"`
}

type requestCall struct {
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// payload encodes the validator request for c. The history is encoded once
// per request: every call of every answer carries the same one.
func (j *Judge) payload(c validate.ToolCall) []byte {
	j.historyOnce.Do(func() {
		entries := j.Local.History.Entries()
		if entries == nil {
			entries = []validate.HistoryEntry{}
		}
		b, err := json.Marshal(entries)
		if err != nil {
			// Entries hold decoded JSON and strings only.
			b = []byte("[]")
		}
		j.historyJSON = b
	})
	ctxValues := j.Local.Values
	if ctxValues == nil {
		ctxValues = map[string]string{}
	}
	args := json.RawMessage(c.Args)
	if c.Kind == validate.Custom || !json.Valid(args) {
		// A custom tool's input is free text, sent as a JSON string.
		// Function calls that passed the local checks carry a JSON
		// object, so for them this only guards the encoding.
		args, _ = json.Marshal(string(c.Args))
	}
	body, err := json.Marshal(request{
		RequestID:       j.RequestID,
		CatalogVersion:  j.CatalogVersion,
		Call:            requestCall{ID: c.ID, Tool: c.Name, Arguments: args},
		History:         j.historyJSON,
		HistoryComplete: j.Local.HistoryComplete(),
		Context:         ctxValues,
	})
	if err != nil {
		return nil
	}
	return body
}
