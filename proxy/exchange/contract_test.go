package exchange

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/anthropic"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/gemini"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/responses"
	"github.com/toolgate/toolgate/proxy/sse"
)

// apis are the four model APIs as the server mounts them.
var apis = map[string]api.API{
	"chat":      openaichat.API{},
	"messages":  anthropic.API{},
	"responses": responses.API{},
	"gemini":    gemini.API{},
}

// The APIs whose streams are SSE only answer the parts of the codec
// contract Gemini needed with what the pipeline does for any API: the
// same route for a re-query, no notes, every key checked, an SSE comment
// as keepalive, and no completion without a terminal event.
func TestSSECodecsContractDefaults(t *testing.T) {
	for _, name := range []string{"chat", "messages", "responses"} {
		cd := apis[name].NewCodec()
		if st, rd, ok := cd.NewFramedStream(http.Header{"Content-Type": {"application/json"}}, strings.NewReader("[]")); ok || st != nil || rd != nil {
			t.Errorf("%s: NewFramedStream took a non-SSE answer", name)
		}
		if p, q := cd.FollowUpRoute("/v1/chat/completions", "a=1&stream=true"); p != "/v1/chat/completions" || q != "a=1&stream=true" {
			t.Errorf("%s: FollowUpRoute = %q, %q", name, p, q)
		}
		if n := cd.Notes(&neutral.Turn{Stop: neutral.StopOther}); n != nil {
			t.Errorf("%s: Notes = %q", name, n)
		}
		if !cd.FoldedKey([]byte(`{"x":{"Tool_Calls":[]}}`)) || cd.FoldedKey([]byte(`{"x":{"tool_calls":[]}}`)) {
			t.Errorf("%s: FoldedKey does not check every key against the protocol keys", name)
		}
		st := cd.NewStream()
		if !bytes.Equal(st.Keepalive(), api.KeepaliveComment) || st.Complete() {
			t.Errorf("%s: stream keepalive %q complete %v", name, st.Keepalive(), st.Complete())
		}
	}
}

// Every codec refuses, in DecodeAnswer and Feed, what the pipeline refuses
// as an answer the agent could read another way: bytes that are not UTF-8
// and a key folding onto a protocol key, each with its own error, before
// any other. The pipeline makes no check of its own.
func TestCodecsRefuseUnreadableAnswers(t *testing.T) {
	folded := map[string]string{
		"chat":      `{"choices":[{"message":{"Tool_Calls":[]}}]}`,
		"messages":  `{"content":[],"Content":[]}`,
		"responses": `{"output":[],"Output":[]}`,
		"gemini":    `{"candidates":[],"Candidates":[]}`,
	}
	for name, doc := range folded {
		cd := apis[name].NewCodec()
		for _, c := range []struct {
			body string
			want error
		}{
			{doc, api.ErrFoldedKey},
			{strings.Replace(doc, "[]", "[\"\xff\"]", 1), api.ErrNotUTF8},
			{"{\"a\":\"\xff\"", api.ErrNotUTF8},
		} {
			if _, err := cd.DecodeAnswer([]byte(c.body)); !errors.Is(err, c.want) {
				t.Errorf("%s: DecodeAnswer(%q) = %v, want %v", name, c.body, err, c.want)
			}
		}
		// Not JSON, and still refused for what it holds first, where the
		// codec checks every key (Gemini reads keys where it reads them).
		if _, err := cd.DecodeAnswer([]byte(doc[:len(doc)-1])); name != "gemini" && !errors.Is(err, api.ErrFoldedKey) {
			t.Errorf("%s: DecodeAnswer of a cut answer = %v, want %v", name, err, api.ErrFoldedKey)
		}
		ev := sse.Event{Data: []byte(doc)}
		ev.Raw = sse.AppendEvent(nil, "", ev.Data)
		if _, err := cd.NewStream().Feed(&ev); !errors.Is(err, api.ErrFoldedKey) {
			t.Errorf("%s: Feed(%s) = %v, want %v", name, doc, err, api.ErrFoldedKey)
		}
	}
}

// answerError keeps the two refusals apart from an unreadable answer.
func TestAnswerError(t *testing.T) {
	other := errors.New("bad shape")
	for _, c := range []struct {
		in, want error
	}{
		{fmt.Errorf("x: %w", api.ErrNotUTF8), pipeline.ErrNotUTF8},
		{fmt.Errorf("x: %w", api.ErrFoldedKey), pipeline.ErrFoldedKey},
		{other, pipeline.ErrUnreadable},
	} {
		got := answerError(c.in)
		if !errors.Is(got, c.want) || c.want == pipeline.ErrUnreadable && !errors.Is(got, other) {
			t.Errorf("answerError(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
