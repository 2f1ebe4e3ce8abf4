package eval

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
)

// Run measures the cases against the config's first upstream and returns
// the report over every result: this run's and, with opt.ResultsPath, those
// of earlier runs that still match their case. When ctx is canceled the
// cases in flight are abandoned (they run again on resume), the results
// file is left complete, and the report covers what was measured, with
// Interrupted set. The error is for problems that stop the run from
// starting or from recording: a bad case, an unwritable results file.
func Run(ctx context.Context, snap *catalog.Snapshot, cases []Case, opt Options) (*Report, error) {
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = DefaultConcurrency
	}
	switch {
	case opt.Retries == 0:
		opt.Retries = DefaultRetries
	case opt.Retries < 0:
		opt.Retries = 0
	}
	rs, err := newSetup(snap, &opt, log)
	if err != nil {
		return nil, err
	}
	preps, err := prepareCases(snap, rs, cases)
	if err != nil {
		return nil, err
	}
	st, err := openStore(opt.ResultsPath)
	if err != nil {
		return nil, fmt.Errorf("results file: %w", err)
	}
	if st.skipped > 0 {
		fmt.Fprintf(log, "note: %d unreadable line(s) in %s were ignored\n", st.skipped, opt.ResultsPath)
	}
	todo := pendingCases(st, preps, opt.ResultsPath, log)
	if len(todo) > 0 {
		if rs.srv, err = rs.start(); err != nil {
			_ = st.close()
			return nil, err
		}
		defer rs.srv.stop()
	}
	if err := measure(ctx, rs, st, todo, opt); err != nil {
		return nil, err
	}

	// Only results that still match their case count.
	current := make(map[string]CaseResult, len(preps))
	for _, p := range preps {
		if r, ok := st.get(p.testCase.ID); ok && r.Key == p.key {
			current[p.testCase.ID] = r
		}
	}
	rep := Summarize(cases, current, Meta{
		Model:               opt.Model,
		CatalogVersion:      snap.Version,
		Endpoint:            redactURL(rs.endpoint),
		ConfiguredThreshold: configuredThreshold(snap),
		MinPrecision:        opt.MinPrecision,
		// Stopped after the last case finished is not an interruption.
		Interrupted: ctx.Err() != nil && len(current) < len(preps),
	})
	rep.Generated = time.Now().UTC()
	return rep, nil
}

// prepareCases prepares every case, or lists every case that cannot run.
func prepareCases(snap *catalog.Snapshot, rs *runSetup, cases []Case) ([]*prepared, error) {
	preps := make([]*prepared, 0, len(cases))
	var probs []string
	for _, c := range cases {
		p, err := prepare(snap, rs, c)
		if err != nil {
			probs = append(probs, fmt.Sprintf("case %q: %v", c.ID, err))
			continue
		}
		preps = append(preps, p)
	}
	if len(probs) > 0 {
		return nil, listError("cases", probs)
	}
	return preps, nil
}

// pendingCases picks the cases the results file has no usable result for:
// new ones, changed ones and failed ones. It says what a resume reuses.
func pendingCases(st *store, preps []*prepared, resultsPath string, log io.Writer) []*prepared {
	var todo []*prepared
	reused, stale, retry := 0, 0, 0
	for _, p := range preps {
		r, ok := st.get(p.testCase.ID)
		switch {
		case !ok:
		case r.Key != p.key:
			stale++
		case r.Error != "":
			retry++
		default:
			reused++
			continue
		}
		todo = append(todo, p)
	}
	if resultsPath != "" && reused+stale+retry > 0 {
		fmt.Fprintf(log, "resuming from %s: %d result(s) reused, %d failed case(s) retried, %d changed case(s) measured again\n",
			resultsPath, reused, retry, stale)
	}
	return todo
}

// measure runs the cases opt.Concurrency at a time, records each result as
// it finishes and closes the store. A failure to record stops the run:
// measuring on without saving would spend money on results a resume cannot
// use.
func measure(ctx context.Context, rs *runSetup, st *store, todo []*prepared, opt Options) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var writeErr error
	var writeOnce sync.Once
	prog := startProgress(opt.Progress, opt.Interactive, len(todo))
	jobs := make(chan *prepared)
	var wg sync.WaitGroup
	for range min(opt.Concurrency, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				row, ok := rs.runCase(runCtx, p)
				if !ok {
					continue
				}
				if err := st.add(row); err != nil {
					writeOnce.Do(func() { writeErr = err; cancel() })
					continue
				}
				prog.add(row.Error != "")
			}
		}()
	}
feed:
	for _, p := range todo {
		select {
		case jobs <- p:
		case <-runCtx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	prog.finish()
	if err := st.close(); err != nil && writeErr == nil {
		writeErr = fmt.Errorf("results file: %w", err)
	}
	return writeErr
}

func configuredThreshold(snap *catalog.Snapshot) float64 {
	if p := snap.Config.Recovery.ConfidenceThreshold; p != nil {
		return *p
	}
	return catalog.DefaultConfidence
}

// redactURL drops credentials a URL may carry before it goes in a report.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	u.User = nil
	return u.String()
}
