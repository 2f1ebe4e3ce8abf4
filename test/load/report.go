package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// summaryRow is one scenario × target: medians over the repetitions, and
// totals of the counts.
type summaryRow struct {
	Scenario string  `json:"scenario"`
	Target   string  `json:"target"`
	Reps     int     `json:"reps"`
	RPS      float64 `json:"rps"`
	// RatioBare is RPS over the bare proxy's median RPS.
	RatioBare float64 `json:"ratio_to_bare"`
	// RatioRange is the lowest and highest per-repetition ratio to bare,
	// each taken against the bare run of the same repetition.
	RatioRange [2]float64 `json:"ratio_to_bare_range"`
	P50us      float64    `json:"p50_us"`
	P90us      float64    `json:"p90_us"`
	P99us      float64    `json:"p99_us"`
	AddedP50us float64    `json:"added_p50_vs_direct_us"`
	TTFBp50us  float64    `json:"ttfb_p50_us,omitempty"`
	TTFBp99us  float64    `json:"ttfb_p99_us,omitempty"`
	// AddedTTFBus is the median time to first text byte minus direct's.
	AddedTTFBus float64            `json:"added_ttfb_vs_direct_us,omitempty"`
	CPUus       map[string]float64 `json:"cpu_us_per_req"`
	ClientCPU   float64            `json:"client_cpu_us_per_req"`
	// UpstreamConnsPer1k is the median of new mock connections per 1,000
	// requests.
	UpstreamConnsPer1k float64 `json:"upstream_conns_per_1k"`
	Requests           int     `json:"requests"`
	OK                 int     `json:"ok"`
	Reframed           int     `json:"ok_reframed"`
	Errors             int     `json:"errors"`
	Truncated          int     `json:"truncated"`
	Corrupted          int     `json:"corrupted"`
	Dropped            int     `json:"dropped"`
}

// targetNames are the targets in report order.
var targetNames = []string{"direct", "bare", "toolgate", "nginx"}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarizeRuns(runs []runResult, scs []scenario) []summaryRow {
	by := map[[2]string][]runResult{}
	for _, r := range runs {
		k := [2]string{r.Scenario, r.Target}
		by[k] = append(by[k], r)
	}
	var out []summaryRow
	for _, sc := range scs {
		rows := map[string]*summaryRow{}
		for _, tn := range targetNames {
			rs := by[[2]string{sc.Name, tn}]
			if len(rs) == 0 {
				continue
			}
			row := &summaryRow{Scenario: sc.Name, Target: tn, Reps: len(rs), CPUus: map[string]float64{}}
			col := func(f func(runResult) float64) float64 {
				v := make([]float64, 0, len(rs))
				for _, r := range rs {
					v = append(v, f(r))
				}
				return median(v)
			}
			row.RPS = col(func(r runResult) float64 { return r.RPS })
			row.P50us = col(func(r runResult) float64 { return r.P50us })
			row.P90us = col(func(r runResult) float64 { return r.P90us })
			row.P99us = col(func(r runResult) float64 { return r.P99us })
			row.TTFBp50us = col(func(r runResult) float64 { return r.TTFBp50us })
			row.TTFBp99us = col(func(r runResult) float64 { return r.TTFBp99us })
			row.ClientCPU = col(func(r runResult) float64 { return r.ClientCPU })
			row.UpstreamConnsPer1k = col(func(r runResult) float64 { return r.UpstreamConnsPer1k })
			for role := range rs[0].CPUus {
				row.CPUus[role] = col(func(r runResult) float64 { return r.CPUus[role] })
			}
			for _, r := range rs {
				row.Requests += r.Requests
				row.OK += r.OK
				row.Reframed += r.Reframed
				row.Errors += r.Errors
				row.Truncated += r.Truncated
				row.Corrupted += r.Corrupted
				row.Dropped += r.Dropped
			}
			rows[tn] = row
		}
		bare, direct := rows["bare"], rows["direct"]
		bareByRep := map[int]float64{}
		for _, r := range by[[2]string{sc.Name, "bare"}] {
			bareByRep[r.Rep] = r.RPS
		}
		for _, tn := range targetNames {
			row := rows[tn]
			if row == nil {
				continue
			}
			if bare != nil && bare.RPS > 0 {
				row.RatioBare = row.RPS / bare.RPS
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, r := range by[[2]string{sc.Name, tn}] {
					if b := bareByRep[r.Rep]; b > 0 {
						lo, hi = math.Min(lo, r.RPS/b), math.Max(hi, r.RPS/b)
					}
				}
				if !math.IsInf(lo, 0) {
					row.RatioRange = [2]float64{lo, hi}
				}
			}
			if direct != nil {
				row.AddedP50us = row.P50us - direct.P50us
				if sc.Stream {
					row.AddedTTFBus = row.TTFBp50us - direct.TTFBp50us
				}
			}
			out = append(out, *row)
		}
	}
	return out
}

// targetCheck is one stated performance target and whether this run met it.
type targetCheck struct {
	Target string `json:"target"`
	Value  string `json:"value"`
	Status string `json:"status"` // met, UNMET, not run, too few
}

func find(rows []summaryRow, sc, tn string) *summaryRow {
	for i := range rows {
		if rows[i].Scenario == sc && rows[i].Target == tn {
			return &rows[i]
		}
	}
	return nil
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "UNMET"
}

// streamsNeeded is how many verified toolgate streams the integrity target
// asks for.
const streamsNeeded = 10000

func checkTargets(rows []summaryRow, runs []runResult) ([]targetCheck, []string) {
	var out []targetCheck
	notRun := func(name string) { out = append(out, targetCheck{Target: name, Value: "-", Status: "not run"}) }

	name := "plain c=32 throughput ≥ 0.8 × bare"
	if tg, b := find(rows, "plain-c32", "toolgate"), find(rows, "plain-c32", "bare"); tg != nil && b != nil {
		out = append(out, targetCheck{name, fmt.Sprintf("%.2f × (reps %.2f–%.2f)", tg.RatioBare, tg.RatioRange[0], tg.RatioRange[1]), status(tg.RatioBare >= 0.8)})
		out = append(out, targetCheck{"toolgate CPU ≤ 300 µs per plain request (c=32)", fmt.Sprintf("%.0f µs (bare %.0f µs)", tg.CPUus["proxy"], b.CPUus["proxy"]), status(tg.CPUus["proxy"] <= 300)})
	} else {
		notRun(name)
	}
	name = "stream c=32 throughput ≥ 0.7 × bare"
	if tg, b := find(rows, "stream-c32", "toolgate"), find(rows, "stream-c32", "bare"); tg != nil && b != nil {
		out = append(out, targetCheck{name, fmt.Sprintf("%.2f × (reps %.2f–%.2f)", tg.RatioBare, tg.RatioRange[0], tg.RatioRange[1]), status(tg.RatioBare >= 0.7)})
		out = append(out, targetCheck{"toolgate CPU ≤ 600 µs per 40-event stream (c=32)", fmt.Sprintf("%.0f µs (bare %.0f µs)", tg.CPUus["proxy"], b.CPUus["proxy"]), status(tg.CPUus["proxy"] <= 600)})
	} else {
		notRun(name)
	}
	for _, sc := range []struct{ name, label string }{
		{"stream-c1", "instant upstream"},
		{"stream-c1-paced", "upstream paced " + pacedGap.String() + "/event"},
	} {
		name := "time to first text byte at c=1 ≤ bare + 100 µs (" + sc.label + ")"
		if tg, b := find(rows, sc.name, "toolgate"), find(rows, sc.name, "bare"); tg != nil && b != nil {
			d := tg.TTFBp50us - b.TTFBp50us
			out = append(out, targetCheck{name, fmt.Sprintf("p50 %.0f µs vs bare %.0f µs (%+.0f µs)", tg.TTFBp50us, b.TTFBp50us, d), status(d <= 100)})
		} else {
			notRun(name)
		}
	}
	out = append(out, fixtureTargets(rows)...)
	streams, bad := 0, 0
	for _, r := range runs {
		if r.Target == "toolgate" && strings.Contains(r.Scenario, "stream-") {
			streams += r.Requests
			bad += r.Truncated + r.Corrupted
		}
	}
	name = "zero truncated or corrupted streams in 10,000 (toolgate)"
	switch {
	case streams == 0:
		notRun(name)
	case bad > 0:
		out = append(out, targetCheck{name, fmt.Sprintf("%d bad of %d", bad, streams), "UNMET"})
	case streams < streamsNeeded:
		out = append(out, targetCheck{name, fmt.Sprintf("0 bad of %d (fewer than 10,000 checked)", streams), "too few"})
	default:
		out = append(out, targetCheck{name, fmt.Sprintf("0 bad of %d", streams), "met"})
	}

	var warn []string
	for _, r := range runs {
		if r.Target != "toolgate" && r.Errors+r.Truncated+r.Corrupted > 0 {
			warn = append(warn, fmt.Sprintf("%s %s rep %d: %d errors, %d truncated, %d corrupted: the baseline itself failed, so ratios are suspect",
				r.Target, r.Scenario, r.Rep, r.Errors, r.Truncated, r.Corrupted))
		}
		if r.Dropped > 0 {
			warn = append(warn, fmt.Sprintf("%s %s rep %d: %d open-loop sends dropped (too many in flight)", r.Target, r.Scenario, r.Rep, r.Dropped))
		}
	}
	return out, warn
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\nMedians over each scenario's repetitions (the reps column); counts are totals. Latencies in µs; CPU in µs of each server process per request.\n")
	fmt.Fprintf(w, "Load average (1 min): %.2f at start, %.2f at end, on %d CPUs.\n\n", rep.Machine.LoadAvgStart, rep.Machine.LoadAvgEnd, rep.Machine.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\treps\treq/s\t×bare\t×bare range\tp50\tp90\tp99\t+p50 vs direct\tttfb p50\t+ttfb vs direct\tcpu proxy\tcpu mock\tcpu client\tup conns/1k\trequests\terrors\ttrunc\tcorrupt\t")
	for _, r := range rep.Summary {
		ttfb, addTTFB := "-", "-"
		if r.TTFBp50us > 0 {
			ttfb, addTTFB = fmt.Sprintf("%.0f", r.TTFBp50us), fmt.Sprintf("%+.0f", r.AddedTTFBus)
		}
		proxyCPU := "-"
		if v, ok := r.CPUus["proxy"]; ok {
			proxyCPU = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f–%.2f\t%.0f\t%.0f\t%.0f\t%+.0f\t%s\t%s\t%s\t%.0f\t%.0f\t%.1f\t%d\t%d\t%d\t%d\t\n",
			r.Scenario, r.Target, r.Reps, r.RPS, r.RatioBare, r.RatioRange[0], r.RatioRange[1], r.P50us, r.P90us, r.P99us, r.AddedP50us,
			ttfb, addTTFB, proxyCPU, r.CPUus["mock"], r.ClientCPU, r.UpstreamConnsPer1k, r.Requests, r.Errors, r.Truncated, r.Corrupted)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nTargets (from the medians above):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Targets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Status, t.Target, t.Value)
	}
	_ = tw.Flush()
	printFixtureTable(w, rep)
	for _, s := range rep.Warnings {
		fmt.Fprintln(w, "warning:", s)
	}
}
