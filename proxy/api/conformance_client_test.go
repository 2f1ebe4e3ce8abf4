package api_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

// The error shapes of the APIs, as their SDKs read them.

// openAIEnvelope reads {"error":{"message","type","code","param"}}.
func openAIEnvelope(body []byte) (string, bool) {
	var e struct {
		Error *struct {
			Message *string         `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == nil || e.Error.Type == "" || e.Error.Param == nil {
		return "", false
	}
	return *e.Error.Message, true
}

// anthropicEnvelope reads {"type":"error","error":{"type","message"}}.
func anthropicEnvelope(body []byte) (string, bool) {
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string  `json:"type"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error == nil || e.Error.Type == "" || e.Error.Message == nil {
		return "", false
	}
	return *e.Error.Message, true
}

// geminiEnvelope reads Google's {"error":{"code","message","status"}}.
func geminiEnvelope(body []byte) (string, bool) {
	var e struct {
		Error *struct {
			Code    int     `json:"code"`
			Message *string `json:"message"`
			Status  string  `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Code < 400 || e.Error.Status == "" || e.Error.Message == nil {
		return "", false
	}
	return *e.Error.Message, true
}

// event is one SSE event with its data decoded.
type event struct {
	name string
	data map[string]json.RawMessage
	raw  []byte
}

// events reads a stream's SSE events with data; data that is not a JSON
// object fails the test unless it is [DONE].
func events(t *testing.T, stream []byte) []event {
	t.Helper()
	var out []event
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	for rd.Next() {
		ev := rd.Event()
		if len(ev.Data) == 0 {
			continue
		}
		e := event{name: string(ev.Event), raw: bytes.Clone(ev.Raw)}
		if string(ev.Data) != "[DONE]" && json.Unmarshal(ev.Data, &e.data) != nil {
			t.Errorf("an event that is not a JSON object: %q", ev.Raw)
		}
		out = append(out, e)
	}
	if rd.Err() != nil {
		t.Errorf("client stream unreadable: %v", rd.Err())
	}
	return out
}

func (e event) str(key string) string {
	var s string
	_ = json.Unmarshal(e.data[key], &s)
	return s
}

// chatClient: every chunk is an object, and [DONE] comes once, last.
func chatClient(t *testing.T, stream []byte) {
	evs := events(t, stream)
	for i, e := range evs {
		if e.data == nil && i != len(evs)-1 {
			t.Errorf("[DONE] before the end, at event %d of %d", i, len(evs))
		}
	}
}

// messagesClient: message_start once and first, content blocks started
// once each in index order, nothing after message_stop.
func messagesClient(t *testing.T, stream []byte) {
	next := 0
	for i, e := range events(t, stream) {
		switch typ := e.str("type"); {
		case (typ == "message_start") != (i == 0):
			t.Errorf("event %d is %s", i, typ)
		case typ == "content_block_start":
			var idx int
			if json.Unmarshal(e.data["index"], &idx) != nil || idx != next {
				t.Errorf("content block %s started where %d was next", e.data["index"], next)
			}
			next++
		case typ == "message_stop" || typ == "error":
			next = -1 << 30 // nothing may start after it
		}
	}
}

// responsesClient: sequence_number counts every event from 0, and
// response.created comes at most once (none when the client got nothing
// before an error event).
func responsesClient(t *testing.T, stream []byte) {
	created := 0
	for i, e := range events(t, stream) {
		var seq int
		if json.Unmarshal(e.data["sequence_number"], &seq) != nil || seq != i {
			t.Errorf("event %d (%s) numbered %s", i, e.str("type"), e.data["sequence_number"])
		}
		if e.str("type") == "response.created" {
			created++
		}
	}
	if created > 1 {
		t.Errorf("response.created %d times", created)
	}
}

// geminiSSEClient: every event is a GenerateContentResponse or an error
// object, and an error is the last.
func geminiSSEClient(t *testing.T, stream []byte) {
	evs := events(t, stream)
	for i, e := range evs {
		if e.data["error"] != nil && i != len(evs)-1 {
			t.Errorf("an error at event %d of %d", i, len(evs))
		}
	}
}

// geminiArrayClient: the bytes are one JSON array of objects, closed, or
// cut right after an element (the upstream's closing bracket follows a
// relayed error).
func geminiArrayClient(t *testing.T, stream []byte) {
	var elems []map[string]json.RawMessage
	if json.Unmarshal(stream, &elems) != nil && json.Unmarshal(append(bytes.Clone(stream), ']'), &elems) != nil {
		t.Errorf("not one JSON array of objects: %q", stream)
	}
	for i, e := range elems {
		if e["error"] != nil && i != len(elems)-1 {
			t.Errorf("an error at element %d of %d", i, len(elems))
		}
	}
}
