package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
)

// served is toolgate itself, started for one run the way serve starts it,
// with the front as its only upstream. Every case is one request to it, so
// the re-query, its checks (size limits, UTF-8, keys that differ only in
// case, call ids, validators) and the verdict are serve's own.
type served struct {
	app    *app.App
	front  *front
	client *http.Client
	url    string
	steps  *stepLog
	// maxBody bounds what eval reads back: an answer, or an escalation
	// quoting the bad call and the decision.
	maxBody int64
}

// proxySnapshot is snap as the run's toolgate serves it: the first upstream
// alone, at the front's URL and without a key (the front adds it), eval's
// recovery settings, escalations answered as errors, and no sinks, MCP
// servers, inbound auth, abstain exit or shadow mode.
func proxySnapshot(snap *catalog.Snapshot, s recovery.Settings, frontURL string) *catalog.Snapshot {
	cfg := *snap.Config
	up := cfg.Upstreams[0]
	up.URL, up.PathPrefix, up.APIPaths, up.APIKeyEnv = frontURL, "", nil, ""
	cfg.Upstreams = []catalog.Upstream{up}
	cfg.Mode = catalog.ModeEnforce
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.InboundAuth = catalog.InboundAuth{}
	cfg.MCPServers = nil
	cfg.Abstain.Enabled = false
	cfg.Escalation.Mode = catalog.EscalationError
	cfg.Escalation.Sinks = catalog.Sinks{}
	attempts, reprompts, threshold := s.RecoveryAttempts, s.RepromptAttempts, s.Threshold
	cfg.Recovery.Strategy = s.Strategy
	cfg.Recovery.MaxAttempts, cfg.Recovery.ConfidenceThreshold = &attempts, &threshold
	cfg.Reprompt.MaxAttempts = &reprompts
	out := *snap
	out.Config = &cfg
	out.Prompt = s.Prompt
	out.Secrets = catalog.Secrets{}
	return &out
}

// start starts the front and toolgate for the run.
func (rs *runSetup) start() (*served, error) {
	f, err := startFront(rs.upstream, rs.endpoint, rs.key)
	if err != nil {
		return nil, fmt.Errorf("starting the front upstream: %w", err)
	}
	steps := &stepLog{byRequest: map[string][]recovery.Event{}}
	a, err := app.StartSnapshot(proxySnapshot(rs.snap, rs.settings, f.URL()), app.Options{Sink: noSink{}, Observer: steps})
	if err != nil {
		f.close()
		return nil, fmt.Errorf("starting toolgate: %w", err)
	}
	lim := rs.snap.Config.Limits
	return &served{
		app:     a,
		front:   f,
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		url:     "http://" + a.ProxyAddr() + ChatPath,
		steps:   steps,
		maxBody: lim.MaxRequestBytes + 2*lim.MaxResponseBytes,
	}, nil
}

// stop drains toolgate; cases still in flight were canceled already.
func (s *served) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.app.Shutdown(ctx)
	s.front.close()
	s.client.CloseIdleConnections()
}

// answered is toolgate's answer to one case.
type answered struct {
	status int
	header http.Header
	body   []byte
	// steps are the ladder's, from the observer.
	steps []recovery.Event
}

// ask sends one case to toolgate as an agent would.
func (s *served) ask(ctx context.Context, body []byte, t *ticket) (*answered, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "toolgate-eval")
	req.Header.Set(caseHeader, t.id)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("toolgate did not answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading toolgate's answer: %w", err)
	}
	if int64(len(b)) > s.maxBody {
		return nil, errors.New("toolgate's answer is larger than any it should give")
	}
	return &answered{status: resp.StatusCode, header: resp.Header, body: b,
		steps: s.steps.popSteps(resp.Header.Get("X-Toolgate-Request-Id"))}, nil
}

// requeryTokens sums the usage toolgate reports for its re-queries
// (X-Toolgate-Usage), leaving out the case's replayed first answer.
func (a *answered) requeryTokens() (in, out int64) {
	var u struct {
		Calls []struct {
			Kind   recovery.QueryKind `json:"kind"`
			Input  int64              `json:"input"`
			Output int64              `json:"output"`
		} `json:"calls"`
	}
	if json.Unmarshal([]byte(a.header.Get("X-Toolgate-Usage")), &u) != nil {
		return 0, 0
	}
	for _, c := range u.Calls {
		if c.Kind != recovery.KindOriginal {
			in += c.Input
			out += c.Output
		}
	}
	return in, out
}

// calledTool is the name of the call with id in a chat completion.
func calledTool(body []byte, id string) (string, error) {
	var cc struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name string `json:"name"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &cc); err != nil {
		return "", fmt.Errorf("toolgate's answer is not a chat completion: %w", err)
	}
	for _, ch := range cc.Choices {
		for _, c := range ch.Message.ToolCalls {
			if c.ID == id {
				return c.Function.Name, nil
			}
		}
	}
	return "", fmt.Errorf("toolgate's answer has no call %s", id)
}

// escalationIn reads the escalation of an error-mode answer; label is the
// error's code, which is the escalation's reason label.
func escalationIn(body []byte) (label string, e *recovery.Escalation, err error) {
	var env struct {
		Error struct {
			Code       string               `json:"code"`
			Escalation *recovery.Escalation `json:"escalation"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error.Escalation == nil {
		return "", nil, fmt.Errorf("toolgate escalated without an escalation in its answer (%v)", err)
	}
	return env.Error.Code, env.Error.Escalation, nil
}

// stepLog keeps each request's recovery steps until its answer is read.
type stepLog struct {
	mu        sync.Mutex
	byRequest map[string][]recovery.Event
}

// ObserveRecovery implements pipeline.RecoveryObserver.
func (l *stepLog) ObserveRecovery(requestID string, steps []recovery.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byRequest[requestID] = steps
}

func (l *stepLog) popSteps(requestID string) []recovery.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	steps := l.byRequest[requestID]
	delete(l.byRequest, requestID)
	return steps
}

// noSink drops escalations: eval reads them from the answers.
type noSink struct{}

func (noSink) Record(*pipeline.EscalationRecord) {}
