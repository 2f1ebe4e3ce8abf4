package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/sse"
)

// newStream is a stream of the row's codec, with the reader of body.
func (cc *conformanceCase) newStream(t *testing.T, body []byte) (api.Stream, api.EventReader) {
	t.Helper()
	c := cc.codec(t)
	if cc.framed != "" {
		st, rd, ok := c.NewFramedStream(http.Header{"Content-Type": {cc.framed}}, bytes.NewReader(body))
		if !ok {
			t.Fatalf("no framed stream for %s", cc.framed)
		}
		return st, rd
	}
	if _, _, ok := c.NewFramedStream(http.Header{"Content-Type": {"text/event-stream"}}, bytes.NewReader(body)); ok {
		t.Fatal("an SSE answer taken for a framed stream")
	}
	return c.NewStream(), sse.NewReader(bytes.NewReader(body), 1<<20)
}

// play feeds body to a new stream by the pipeline's rules of run.
func (cc *conformanceCase) play(t *testing.T, body []byte, run *apitest.Run) api.Stream {
	t.Helper()
	st, rd := cc.newStream(t, body)
	if err := run.Play(st, rd); err != nil {
		t.Fatalf("stream unreadable: %v\n%s", err, body)
	}
	return st
}

// reread is what a client of the API reads of a whole stream, through a
// codec of its own with nothing held.
func (cc *conformanceCase) reread(t *testing.T, client []byte) (*apitest.Run, []*neutral.Turn) {
	t.Helper()
	run := &apitest.Run{Shadow: true}
	st := cc.play(t, client, run)
	return run, st.Turns()
}

// testStream feeds the recorded stream as the pipeline does, with the
// opening events held or already sent, and encodes what was held with
// each action kind after the cursor: the client's bytes read as the
// action says, and nothing sent is written again.
func (cc *conformanceCase) testStream(t *testing.T) {
	body := read(t, cc.stream)
	for _, openingSent := range []bool{false, true} {
		run := &apitest.Run{OpeningSent: openingSent}
		st := cc.play(t, body, run)
		turns := st.Turns()
		checkNames(t, "streamed", turns[0].Calls, cc.streamCalls)
		sent := run.Sent()
		// A stream without a terminal event (Gemini's) is whole at its end.
		if !run.Holding || !(run.Done || st.Complete()) || sent.Events+sent.Held != len(run.Steps) || sent.Held != len(run.Held) {
			t.Fatalf("opening sent %v: holding %v done %v, %d events, sent %+v", openingSent, run.Holding, run.Done, len(run.Steps), sent)
		}
		kept, err := st.Encode(run.Held, actionsFor(len(turns), neutral.Action{Kind: neutral.Keep}), sent)
		if err != nil || !bytes.Equal(append(bytes.Clone(run.Forwarded), kept...), body) {
			t.Errorf("opening sent %v: kept stream is not the upstream's (%v)", openingSent, err)
		}
		client := cc.encoded(t, st, run, actionsFor(len(turns), replacement(turns[0].Calls)))
		_, again := cc.reread(t, client)
		checkReplaced(t, again[0].Calls, turns[0].Calls)
		client = cc.encoded(t, st, run, actionsFor(len(turns), responding()))
		if _, again = cc.reread(t, client); len(again[0].Calls) != 0 || !strings.Contains(again[0].Text, escalation.Text) {
			t.Errorf("opening sent %v: responded stream reads as %d calls, text %q", openingSent, len(again[0].Calls), again[0].Text)
		}
	}
}

// encoded is what the client reads once Encode's bytes follow what went
// out, checked as the API's client checks a stream.
func (cc *conformanceCase) encoded(t *testing.T, st api.Stream, run *apitest.Run, acts []neutral.Action) []byte {
	t.Helper()
	out, err := st.Encode(run.Held, acts, run.Sent())
	if err != nil {
		t.Fatal(err)
	}
	if cc.framed == "" {
		noRepeat(t, run.Forwarded, out)
	}
	client := append(bytes.Clone(run.Forwarded), out...)
	cc.client(t, client)
	return client
}

// noRepeat fails when out writes again an event the client already got.
func noRepeat(t *testing.T, forwarded, out []byte) {
	t.Helper()
	seen := map[string]bool{}
	rd := sse.NewReader(bytes.NewReader(forwarded), 0)
	for rd.Next() {
		if ev := rd.Event(); len(ev.Data) > 0 {
			seen[string(ev.Raw)] = true
		}
	}
	rd = sse.NewReader(bytes.NewReader(out), 0)
	for rd.Next() {
		if ev := rd.Event(); seen[string(ev.Raw)] {
			t.Errorf("an event the client already got is written again: %q", ev.Raw)
		}
	}
}

var cut = neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeUpstream, Message: "the upstream went away"}

// testStreamError cuts the recorded stream after its first call event,
// with everything sent (shadow mode) or the call held: the error event
// follows what the client got, reads as the API's own in-stream error,
// and the upstream's error relayed after a dropped hold does too.
func (cc *conformanceCase) testStreamError(t *testing.T) {
	body := read(t, cc.stream)
	for _, shadow := range []bool{true, false} {
		run := &apitest.Run{Shadow: shadow}
		st, rd := cc.newStream(t, body)
		var prefix []byte
		for rd.Next() {
			ev := rd.Event()
			prefix = append(prefix, ev.Raw...)
			step, err := run.Feed(st, &ev)
			if err != nil {
				t.Fatal(err)
			}
			if step.Hold {
				break
			}
		}
		for _, esc := range []*neutral.Escalated{nil, escalation} {
			client := append(bytes.Clone(run.Forwarded), st.ErrorEvent(cut, esc, run.Sent())...)
			cc.client(t, client)
			if again, _ := cc.reread(t, client); again.UpstreamError == nil {
				t.Errorf("shadow %v: the error event is not read as the API's error: %q", shadow, client)
			}
		}
		if shadow {
			// The upstream's own error, numbered and framed as the
			// upstream would go on, after the call.
			cc.relayed(t, append(prefix, st.ErrorEvent(cut, nil, run.Sent())...))
		}
	}
}

// relayed feeds a stream that ends in the upstream's error as the
// pipeline does, and writes the error after what went out.
func (cc *conformanceCase) relayed(t *testing.T, up []byte) {
	t.Helper()
	run := &apitest.Run{}
	st := cc.play(t, up, run)
	if run.UpstreamError == nil {
		t.Fatalf("the upstream's error not reported: %q", up)
	}
	if !run.Holding {
		run.Release()
	}
	client := append(bytes.Clone(run.Forwarded), st.UpstreamError(*run.UpstreamError, run.Sent())...)
	cc.client(t, client)
	if again, _ := cc.reread(t, client); again.UpstreamError == nil {
		t.Errorf("relayed error not read as the API's error: %q", client)
	}
}
