package test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// A headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on the child's fd 3, answers and
// events on its fd 4, each message ended by a NUL byte). The pipe needs
// no port and no websocket library.

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type chromium struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      *os.File
	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan cdpMessage
	events  chan cdpMessage
	session string
	done    chan struct{}
}

// startChromium starts Debian's chromium headless with an empty profile,
// or skips the test without it (fails it under CI=true, where .ci/run
// installs it). It is stopped by its PID when the test ends.
func startChromium(t *testing.T) *chromium {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI must install it (.ci/run)")
		}
		t.Skip("chromium is not installed")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW} // the child's fd 3 and fd 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	c := &chromium{t: t, cmd: cmd, in: inW, waiting: map[int64]chan cdpMessage{}, events: make(chan cdpMessage, 1024), done: make(chan struct{})}
	go c.read(outR)
	t.Cleanup(c.stop)
	return c
}

func (c *chromium) read(out *os.File) {
	defer close(c.done)
	defer out.Close()
	r := bufio.NewReader(out)
	for {
		b, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(b[:len(b)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.waiting[m.ID]
			delete(c.waiting, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case c.events <- m:
		default: // a test that reads no events loses them, never blocks
		}
	}
}

func (c *chromium) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, _ = c.callIn(ctx, "", "Browser.close", nil)
	c.in.Close()
	exited := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-exited
	}
}

// call sends one command in the page's session and waits for its answer.
func (c *chromium) call(method string, params any) json.RawMessage {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.callIn(ctx, c.session, method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return res
}

func (c *chromium) callIn(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	if params == nil {
		p = []byte("{}")
	}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMessage, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: p, SessionID: session})
	if _, err := c.in.Write(append(b, 0)); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %d %s", method, m.Error.Code, m.Error.Message)
		}
		return m.Result, nil
	case <-c.done:
		return nil, fmt.Errorf("%s: chromium exited", method)
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", method, ctx.Err())
	}
}

// openPage makes a new tab and attaches to it; later calls go to it.
func (c *chromium) openPage() {
	c.t.Helper()
	var tgt struct {
		TargetID string `json:"targetId"`
	}
	c.decode(c.call("Target.createTarget", map[string]any{"url": "about:blank"}), &tgt)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.decode(c.call("Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true}), &att)
	c.session = att.SessionID
}

func (c *chromium) decode(b json.RawMessage, v any) {
	c.t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Fatalf("CDP answer %s: %v", b, err)
	}
}

// waitEvent waits for an event of the page's session named method,
// handing every event it passes to seen (nil: none).
func (c *chromium) waitEvent(method string, seen func(cdpMessage)) cdpMessage {
	c.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-c.events:
			if seen != nil {
				seen(m)
			}
			if m.Method == method && m.SessionID == c.session {
				return m
			}
		case <-timeout:
			c.t.Fatalf("no %s event", method)
		}
	}
}

// node finds the first element matching selector in the current document.
func (c *chromium) node(selector string) int64 {
	c.t.Helper()
	var doc struct {
		Root struct {
			NodeID int64 `json:"nodeId"`
		} `json:"root"`
	}
	c.decode(c.call("DOM.getDocument", map[string]any{"depth": 0}), &doc)
	var q struct {
		NodeID int64 `json:"nodeId"`
	}
	c.decode(c.call("DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}), &q)
	if q.NodeID == 0 {
		c.t.Fatalf("no element %q on the page", selector)
	}
	return q.NodeID
}

// click presses and releases the mouse in the middle of the element, as
// a person does: with scripts off, only the browser's own form handling
// can act on it.
func (c *chromium) click(selector string) {
	c.t.Helper()
	id := c.node(selector)
	c.call("DOM.scrollIntoViewIfNeeded", map[string]any{"nodeId": id})
	var box struct {
		Model struct {
			Content []float64 `json:"content"`
		} `json:"model"`
	}
	c.decode(c.call("DOM.getBoxModel", map[string]any{"nodeId": id}), &box)
	q := box.Model.Content
	if len(q) != 8 {
		c.t.Fatalf("%q has no box", selector)
	}
	x, y := (q[0]+q[2]+q[4]+q[6])/4, (q[1]+q[3]+q[5]+q[7])/4
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		c.call("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1})
	}
}

// typeInto focuses the element and types text into it.
func (c *chromium) typeInto(selector, text string) {
	c.t.Helper()
	c.call("DOM.focus", map[string]any{"nodeId": c.node(selector)})
	c.call("Input.insertText", map[string]any{"text": text})
}

// html is the current document's markup.
func (c *chromium) html() string {
	c.t.Helper()
	var out struct {
		OuterHTML string `json:"outerHTML"`
	}
	c.decode(c.call("DOM.getOuterHTML", map[string]any{"nodeId": c.node("html")}), &out)
	return out.OuterHTML
}

// screenshot is a PNG of the page as shown.
func (c *chromium) screenshot() []byte {
	c.t.Helper()
	var out struct {
		Data string `json:"data"`
	}
	c.decode(c.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}), &out)
	b, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}
