package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// outcome classifies one request.
type outcome uint8

const (
	okExact    outcome = iota // the bytes the mock sent, unchanged
	okReframed                // different bytes, same events, text and calls
	failed                    // transport error, timeout, non-200 status, error event
	truncated                 // the answer stopped early: read error, no [DONE], missing events
	corrupted                 // complete but wrong: other text, calls, or event count
)

// sample is one request's measurements.
type sample struct {
	out outcome
	lat time.Duration // to the last byte (open loop: from the scheduled time)
	// ttfb is the time to the first text byte of a stream; 0 if none came.
	ttfb time.Duration
}

// driver sends requests and judges answers.
type driver struct {
	client   *http.Client
	timeout  time.Duration
	statsURL string
}

func newDriver(timeout time.Duration) *driver {
	tr := &http.Transport{
		Proxy:               nil, // loopback only, never through an environment proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2048,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
	return &driver{client: &http.Client{Transport: tr}, timeout: timeout}
}

// workload is the scenario's exchange; the zero value is the small one.
func (sc scenario) workload() *workload {
	if sc.Workload == "" {
		return workloads[smallWorkload]
	}
	return workloads[sc.Workload]
}

// one sends one request to base and measures it from start.
func (d *driver) one(ctx context.Context, base string, sc scenario, start time.Time) sample {
	stream := sc.Stream
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	w := sc.workload()
	body := w.plainReq
	if stream {
		body = w.streamReq
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+chatPath, bytes.NewReader(body))
	if err != nil {
		return sample{out: failed}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-load-test")
	req.Header.Set(workloadHeader, w.name)
	if sc.Gap > 0 {
		req.Header.Set(gapHeader, sc.Gap.String())
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return sample{out: failed, lat: time.Since(start)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return sample{out: failed, lat: time.Since(start)}
	}
	if !stream {
		got, err := io.ReadAll(resp.Body)
		s := sample{lat: time.Since(start)}
		switch {
		case err != nil:
			s.out = truncated
		case bytes.Equal(got, w.answer):
			s.out = okExact
		default:
			s.out = corrupted
		}
		return s
	}
	// Read as the bytes come, noting when the first text delta arrives.
	got := make([]byte, 0, len(w.stream)+512)
	buf := make([]byte, 32<<10)
	var s sample
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			from := textSearchFrom(len(got))
			got = append(got, buf[:n]...)
			if s.ttfb == 0 && firstText(got, from) {
				s.ttfb = time.Since(start)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.lat, s.out = time.Since(start), truncated
			return s
		}
	}
	s.lat = time.Since(start)
	s.out = w.judgeStream(got)
	return s
}

// judgeStream checks a whole stream. Identical bytes prove everything the
// checks below ask for (40 events, [DONE] last, the expected text and
// calls); anything else is read as an SDK would and classified.
func (w *workload) judgeStream(got []byte) outcome {
	if bytes.Equal(got, w.stream) {
		return okExact
	}
	a := assemble(got)
	switch {
	case a.Error:
		return failed
	case !a.Done || a.Events < w.want.Events:
		return truncated
	case a.equal(w.want):
		return okReframed
	default:
		return corrupted
	}
}

// runResult is one target × scenario × repetition.
type runResult struct {
	Target    string  `json:"target"`
	Scenario  string  `json:"scenario"`
	Rep       int     `json:"rep"`
	Seconds   float64 `json:"seconds"`
	Requests  int     `json:"requests"`
	OK        int     `json:"ok"`
	Reframed  int     `json:"ok_reframed"`
	Errors    int     `json:"errors"`
	Truncated int     `json:"truncated"`
	Corrupted int     `json:"corrupted"`
	// Dropped counts open-loop sends skipped because too many were in flight.
	Dropped   int     `json:"dropped,omitempty"`
	RPS       float64 `json:"rps"`
	P50us     float64 `json:"p50_us"`
	P90us     float64 `json:"p90_us"`
	P99us     float64 `json:"p99_us"`
	TTFBp50us float64 `json:"ttfb_p50_us,omitempty"`
	TTFBp90us float64 `json:"ttfb_p90_us,omitempty"`
	TTFBp99us float64 `json:"ttfb_p99_us,omitempty"`
	// CPUus is CPU µs per request of each server process, by role.
	CPUus     map[string]float64 `json:"cpu_us_per_req"`
	ClientCPU float64            `json:"client_cpu_us_per_req"`
	// UpstreamConnsPer1k is how many new connections the mock accepted
	// per 1,000 requests: near 0 when the target reuses its connections.
	UpstreamConnsPer1k float64 `json:"upstream_conns_per_1k"`
	LoadAvg            float64 `json:"loadavg_1m"`
}

// scenario is one kind of load.
type scenario struct {
	Name   string  `json:"name"`
	Stream bool    `json:"stream"`
	Conc   int     `json:"concurrency,omitempty"` // closed loop: workers
	Rate   float64 `json:"rate,omitempty"`        // open loop: requests per second
	// Gap spaces the mock's stream events (0: as fast as it can write).
	Gap time.Duration `json:"event_gap,omitempty"`
	// Span multiplies the run length, for a scenario that completes few
	// requests per second and would otherwise give a thin median.
	Span int `json:"span,omitempty"`
	// Workload names the exchange (workloads); empty is the small one.
	Workload string `json:"workload,omitempty"`
	// MCP, when set, makes the scenario MCP tools/call requests on
	// sessions (mcpSession) or stateless (mcpStateless) instead (mcp.go).
	MCP string `json:"mcp,omitempty"`
}

// runLength is how long one run of the scenario lasts.
func (sc scenario) runLength(d time.Duration) time.Duration {
	return d * time.Duration(max(sc.Span, 1))
}

// collect gathers samples from many goroutines.
type collect struct {
	mu sync.Mutex
	s  []sample
}

func (c *collect) add(s []sample) {
	c.mu.Lock()
	c.s = append(c.s, s...)
	c.mu.Unlock()
}

// closedLoop keeps conc requests in flight until dur has passed; a worker
// starts no request after the deadline and each request has its own
// timeout, so the run ends within dur + timeout.
func (d *driver) closedLoop(ctx context.Context, base string, sc scenario, dur time.Duration) ([]sample, time.Duration) {
	var c collect
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for range sc.Conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			var mw mcpWorker
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if sc.MCP != "" {
					mine = append(mine, mw.one(ctx, d, base, sc))
					continue
				}
				t := time.Now()
				mine = append(mine, d.one(ctx, base, sc, t))
			}
			c.add(mine)
		}()
	}
	wg.Wait()
	return c.s, time.Since(start)
}

// openLoop sends at a fixed rate whatever the answers do, and measures each
// latency from the request's scheduled time, so a stall shows as latency
// instead of silently lowering the rate (coordinated omission). At most
// maxInFlight requests are outstanding; a send over that is dropped and
// counted.
func (d *driver) openLoop(ctx context.Context, base string, sc scenario, dur time.Duration) ([]sample, time.Duration, int) {
	const maxInFlight = 4096
	var c collect
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxInFlight)
	interval := time.Duration(float64(time.Second) / sc.Rate)
	n := int(dur / interval)
	dropped := 0
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := d.one(ctx, base, sc, at)
			c.add([]sample{s})
		}()
	}
	wg.Wait()
	return c.s, time.Since(start), dropped
}

// summarize turns samples into a runResult's counts and percentiles.
func summarize(r *runResult, ss []sample, elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	r.Requests = len(ss)
	var lat, ttfb []float64
	for _, s := range ss {
		switch s.out {
		case okExact:
			r.OK++
		case okReframed:
			r.OK++
			r.Reframed++
		case failed:
			r.Errors++
		case truncated:
			r.Truncated++
		case corrupted:
			r.Corrupted++
		}
		if s.out == okExact || s.out == okReframed {
			lat = append(lat, float64(s.lat.Microseconds()))
			if s.ttfb > 0 {
				ttfb = append(ttfb, float64(s.ttfb.Nanoseconds())/1e3)
			}
		}
	}
	r.RPS = float64(r.OK) / elapsed.Seconds()
	r.P50us, r.P90us, r.P99us = pct(lat, 50), pct(lat, 90), pct(lat, 99)
	if len(ttfb) > 0 {
		r.TTFBp50us, r.TTFBp90us, r.TTFBp99us = pct(ttfb, 50), pct(ttfb, 90), pct(ttfb, 99)
	}
}

// pct is the nearest-rank percentile of v (sorted in place).
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(float64(len(v))*p/100+0.5) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// errStopped reports a run cut short by a signal or the overall deadline.
var errStopped = errors.New("stopped before the end")

// mockConns reads how many connections the mock has accepted so far.
func (d *driver) mockConns(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.statsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var conns, reqs int64
	if _, err := fmt.Fscan(resp.Body, &conns, &reqs); err != nil {
		return 0, err
	}
	return conns, nil
}
