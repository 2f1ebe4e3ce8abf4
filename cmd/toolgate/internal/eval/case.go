// Package eval measures the decision recovery strategy against a real model
// and picks recovery.confidence_threshold from the measurements.
//
// Every case is one invented tool call in a conversation. It is sent, as a
// Chat Completions request, to toolgate itself, started in-process the way
// serve starts it, whose upstream is a front: the front answers the first
// call with the case's invented call and passes toolgate's re-query to the
// config's first upstream. So the re-query, the checks its answer passes
// and the verdict are serve's own; only the threshold is forced to 0, so
// the model's decision and confidence are recorded whatever they are.
// Thresholds are then swept over the recorded decisions: a case counts as
// substituted at threshold T exactly when serve would have substituted it
// with recovery.confidence_threshold = T.
package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/validate"
)

// ExpectEscalate is the expected label of a case no real tool can serve.
const ExpectEscalate = "escalate"

// Case is one line of a cases file.
type Case struct {
	// ID names the case in results and reports; unique within a file.
	ID string `json:"id"`
	// Kind groups cases in the report's breakdown (verb_synonym, plural…).
	Kind string `json:"kind"`
	// Messages are the conversation up to the bad call, as Chat Completions
	// messages. They become the original request's messages.
	Messages []json.RawMessage `json:"messages"`
	// Tools are the OpenAI function tools the request offers; when absent
	// the config catalog's tools are offered.
	Tools []json.RawMessage `json:"tools,omitempty"`
	// BadCall is the invented call, replayed as the assistant's turn.
	BadCall BadCall `json:"bad_call"`
	// Expected is the real tool a correct recovery substitutes, or
	// ExpectEscalate. Empty means not labelled yet.
	Expected string `json:"expected"`
	// Note is free text for the people labelling cases; eval ignores it.
	Note string `json:"note,omitempty"`
}

// BadCall is the tool call the model invented.
type BadCall struct {
	Name string `json:"name"`
	// Arguments is normally a JSON object. A JSON string stands for the raw
	// argument text, for calls whose arguments were not valid JSON.
	Arguments json.RawMessage `json:"arguments"`
}

// ReadCases reads a JSONL cases file. Blank lines are skipped. Unknown
// fields are refused, because a misspelt "expected" would otherwise read as
// an unlabelled case. Every problem is reported, with its line.
func ReadCases(r io.Reader) ([]Case, error) {
	var out []Case
	var probs []string
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var c Case
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			probs = append(probs, fmt.Sprintf("line %d: %v", line, err))
			continue
		}
		switch prev, dup := seen[c.ID]; {
		case strings.TrimSpace(c.ID) == "":
			probs = append(probs, fmt.Sprintf("line %d: the case has no id", line))
			continue
		case dup:
			probs = append(probs, fmt.Sprintf("line %d: id %q is already used on line %d", line, c.ID, prev))
			continue
		}
		seen[c.ID] = line
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		return nil, listError("cases", probs)
	}
	return out, nil
}

// WriteCases writes cases as JSONL, one case a line.
func WriteCases(w io.Writer, cases []Case) error {
	for i := range cases {
		c := cases[i]
		if c.Messages == nil {
			// Written as [] so a person sees where the conversation goes.
			c.Messages = []json.RawMessage{}
		}
		b, err := jsonx.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// listError joins problems into one error, the first few in full.
func listError(what string, probs []string) error {
	const shown = 20
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in the %s:", len(probs), what)
	for i, p := range probs {
		if i == shown {
			fmt.Fprintf(&b, "\n  … and %d more", len(probs)-shown)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	return errors.New(b.String())
}

// prepared is a case turned into what toolgate is sent and replays: the
// original request's body, and the bad call as the upstream's answer. req,
// resp and eff are how toolgate reads them, for the checks of prepare.
type prepared struct {
	testCase Case
	body     []byte
	answer   []byte
	req      *neutral.Request
	resp     *neutral.Answer
	eff      *catalog.Effective
	// key identifies everything that shapes the re-query; a stored result
	// is reused only when its key matches (see Result.Key).
	key string
}

// callID is the id of the replayed call: derived from the case id so that
// re-queries are identical from run to run.
func callID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "call_eval_" + hex.EncodeToString(sum[:8])
}

// prepare checks one case against the snapshot and builds its request. The
// checks catch labelling mistakes before any money is spent: an expected
// tool that recovery could never choose, or a bad call that is not bad.
func prepare(snap *catalog.Snapshot, rs *runSetup, c Case) (*prepared, error) {
	if len(c.Messages) == 0 {
		return nil, errors.New("no messages: the model needs the conversation (cases from --from-sink without an intent must be completed by hand)")
	}
	if strings.TrimSpace(c.BadCall.Name) == "" {
		return nil, errors.New("bad_call.name is empty")
	}
	if c.Expected == "" {
		return nil, errors.New(`not labelled: set "expected" to the right tool's name or "escalate"`)
	}
	tools := c.Tools
	if len(tools) == 0 {
		tools = rs.catalogTools
		if len(tools) == 0 {
			return nil, errors.New("the case offers no tools and the config catalog is empty")
		}
	}
	body := jsonx.Object{
		{Key: "model", Value: jsonx.String(rs.model)},
		{Key: "messages", Value: jsonx.AppendArray(nil, asBytes(c.Messages))},
		{Key: "tools", Value: jsonx.AppendArray(nil, asBytes(tools))},
	}.Bytes()
	cd := openaichat.API{}.NewCodec()
	req, err := cd.DecodeRequest("", body)
	if err != nil {
		return nil, fmt.Errorf("messages or tools: %w", err)
	}
	args, err := argumentText(c.BadCall.Arguments)
	if err != nil {
		return nil, err
	}
	answer := syntheticAnswer(c.ID, rs.model, c.BadCall.Name, args)
	resp, err := cd.DecodeAnswer(answer)
	if err != nil || len(resp.Choices) != 1 || len(resp.Choices[0].Calls) != 1 {
		return nil, fmt.Errorf("bad_call cannot be replayed: %v", err)
	}
	eff := snap.Effective(req.Offered, req.Choice, true)
	if eff.Len() == 0 {
		return nil, errors.New("no tool is callable in this case")
	}
	v := validate.Check(resp.Choices[0].Calls[0], &validate.Context{Effective: eff, Evidence: validate.NewCorpus(req.Vouching)})
	if v.Worst() != validate.ClassName {
		return nil, fmt.Errorf("bad_call %q names a tool of this case, so there is nothing to recover", c.BadCall.Name)
	}
	if c.Expected != ExpectEscalate {
		t, st, stripped := eff.Lookup(c.Expected)
		switch {
		case st != catalog.Found || stripped:
			return nil, fmt.Errorf("expected tool %q is not a tool of this case", c.Expected)
		case !t.Substitutable || t.Policy == catalog.PolicyConfirm:
			// Recovery never lands on such a tool without a person, so the
			// only answer it can give here is an escalation.
			return nil, fmt.Errorf("expected tool %q is not substitutable (confirm policy or substitutable: false); expect %q instead", c.Expected, ExpectEscalate)
		}
	}
	h := sha256.New()
	// v2: measured through toolgate itself, whose checks (validators among
	// them) a v1 result did not pass.
	for _, part := range [][]byte{[]byte("eval/v2"), []byte(snap.Version), []byte(rs.settings.Prompt),
		[]byte(strconv.Itoa(rs.settings.Shortlist)), body, answer} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write(part)
	}
	return &prepared{testCase: c, body: body, answer: answer, req: req, resp: resp, eff: eff, key: hex.EncodeToString(h.Sum(nil))[:24]}, nil
}

func asBytes(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// argumentText is the argument text the model is taken to have sent.
func argumentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if s, ok := jsonx.Unquote(raw); ok {
		return s, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", fmt.Errorf("bad_call.arguments: %w", err)
	}
	return b.String(), nil
}

// syntheticAnswer is a chat completion whose only content is the bad call,
// as if the upstream had answered it. The codec's re-query replays it.
func syntheticAnswer(id, model, name, args string) []byte {
	fn := jsonx.Object{{Key: "name", Value: jsonx.String(name)}, {Key: "arguments", Value: jsonx.String(args)}}
	call := jsonx.Object{
		{Key: "id", Value: jsonx.String(callID(id))},
		{Key: "type", Value: jsonx.String("function")},
		{Key: "function", Value: fn.Bytes()},
	}
	msg := jsonx.Object{
		{Key: "role", Value: jsonx.String("assistant")},
		{Key: "content", Value: []byte("null")},
		{Key: "tool_calls", Value: jsonx.AppendArray(nil, [][]byte{call.Bytes()})},
	}
	choice := jsonx.Object{
		{Key: "index", Value: []byte("0")},
		{Key: "message", Value: msg.Bytes()},
		{Key: "finish_reason", Value: jsonx.String("tool_calls")},
	}
	return jsonx.Object{
		{Key: "id", Value: jsonx.String("chatcmpl-eval")},
		{Key: "object", Value: jsonx.String("chat.completion")},
		{Key: "model", Value: jsonx.String(model)},
		{Key: "choices", Value: jsonx.AppendArray(nil, [][]byte{choice.Bytes()})},
	}.Bytes()
}

// catalogTools renders the config catalog as OpenAI function tools, in name
// order, for cases that do not bring their own.
func catalogTools(snap *catalog.Snapshot) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(snap.Names))
	for _, n := range snap.Names {
		t := snap.Tools[n]
		if t == nil {
			continue
		}
		params := []byte(t.Parameters)
		if len(params) == 0 {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		fn := jsonx.Object{
			{Key: "name", Value: jsonx.String(t.Name)},
			{Key: "description", Value: jsonx.String(t.Description)},
			{Key: "parameters", Value: params},
		}
		out = append(out, jsonx.Object{{Key: "type", Value: jsonx.String("function")}, {Key: "function", Value: fn.Bytes()}}.Bytes())
	}
	return out
}
