package proxy

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

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
