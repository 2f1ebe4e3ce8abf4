package eval

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Steps of the threshold sweep: 0.00, 0.05, … 1.00. Thresholds are built as
// i/Steps so that each equals the float a config's "0.85" parses to.
const Steps = 20

// Threshold returns the i-th threshold of the sweep.
func Threshold(i int) float64 { return float64(i) / Steps }

// Report is the outcome of an eval: the sweep, the recommendation, the
// breakdown per kind and the cost.
type Report struct {
	Generated      time.Time `json:"generated"`
	Model          string    `json:"model"`
	CatalogVersion string    `json:"catalog_version"`
	// Endpoint is where the re-queries went.
	Endpoint string `json:"endpoint"`
	// Cases is the number of cases in the cases file.
	Cases int `json:"cases"`
	// Measured cases have a decision; only they count in the rates.
	Measured int `json:"measured"`
	// Errors are cases whose re-query failed; Pending were not run (the
	// run was interrupted).
	Errors  int `json:"errors"`
	Pending int `json:"pending"`
	// Interrupted is set when the run was stopped before the end.
	Interrupted bool `json:"interrupted"`
	// WithRightTool counts measured cases whose expected answer is a tool:
	// the denominator of recall.
	WithRightTool       int     `json:"with_right_tool"`
	MinPrecision        float64 `json:"min_precision"`
	ConfiguredThreshold float64 `json:"configured_threshold"`
	// Recommended is the lowest threshold whose precision reaches
	// MinPrecision, or nil when none does.
	Recommended    *float64 `json:"recommended_threshold"`
	Recommendation string   `json:"recommendation"`
	// Decisions counts what the model answered, whatever the threshold.
	Decisions Decisions `json:"decisions"`
	// Thresholds is the sweep, one row per threshold.
	Thresholds []Row `json:"thresholds"`
	// KindsAt is the threshold of the Kinds breakdown: the recommended
	// one, else the configured one.
	KindsAt float64   `json:"kinds_at"`
	Kinds   []KindRow `json:"kinds"`
	Cost    Cost      `json:"cost"`
	// Failures lists the cases that ended in an error, in file order.
	Failures []FailedCase `json:"failures"`
}

// Decisions counts the model's answers.
type Decisions struct {
	Substitute int `json:"substitute"`
	Escalate   int `json:"escalate"`
	Invalid    int `json:"invalid"`
	// SubstituteRejected counts substitutes that failed their tool's checks
	// or needed confirmation: serve escalates them at any threshold.
	SubstituteRejected int `json:"substitute_rejected"`
}

// Row is the outcome of the measured cases at one threshold.
type Row struct {
	Threshold float64 `json:"threshold"`
	// Substituted cases would have run a substitute; Correct ones onto the
	// expected tool. Wrong = WrongTool (a right tool exists, another was
	// chosen) + ShouldEscalate (no right tool exists).
	Substituted    int `json:"substituted"`
	Correct        int `json:"correct"`
	Wrong          int `json:"wrong"`
	WrongTool      int `json:"wrong_tool"`
	ShouldEscalate int `json:"should_escalate"`
	// Escalated cases would have become escalations.
	Escalated        int     `json:"escalated"`
	SubstitutionRate float64 `json:"substitution_rate"`
	// Precision is Correct/Substituted; nil with no substitution.
	Precision      *float64 `json:"precision"`
	EscalationRate float64  `json:"escalation_rate"`
	// Recall is Correct over the cases with a right tool; nil without any.
	Recall *float64 `json:"recall"`
}

// KindRow is one kind's row at the report's KindsAt threshold.
type KindRow struct {
	Kind          string `json:"kind"`
	Cases         int    `json:"cases"`
	Measured      int    `json:"measured"`
	Errors        int    `json:"errors"`
	WithRightTool int    `json:"with_right_tool"`
	Row
}

// Cost is what the re-queries took.
type Cost struct {
	// Requeries counts the cases that got an answer.
	Requeries    int   `json:"requeries"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// Latency percentiles of the answered re-queries, nearest rank.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP95MS float64 `json:"latency_p95_ms"`
	Retries      int     `json:"retries"`
}

// FailedCase is one case that could not be measured.
type FailedCase struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// Meta describes the run for the report's header.
type Meta struct {
	Model               string
	CatalogVersion      string
	Endpoint            string
	ConfiguredThreshold float64
	MinPrecision        float64
	Interrupted         bool
}

// Summarize computes the report over cases from their results (keyed by case
// id; a case without a result is pending). Labels are taken from the cases,
// so relabelling a case needs no new run.
func Summarize(cases []Case, results map[string]CaseResult, m Meta) *Report {
	rep := &Report{
		Model:               m.Model,
		CatalogVersion:      m.CatalogVersion,
		Endpoint:            m.Endpoint,
		Cases:               len(cases),
		Interrupted:         m.Interrupted,
		MinPrecision:        m.MinPrecision,
		ConfiguredThreshold: m.ConfiguredThreshold,
		Failures:            []FailedCase{},
	}
	measured, latencies, kinds := countCases(rep, cases, results)
	rep.Measured = len(measured)
	rep.Cost.TotalTokens = rep.Cost.InputTokens + rep.Cost.OutputTokens
	rep.Cost.LatencyP50MS = percentile(latencies, 50)
	rep.Cost.LatencyP95MS = percentile(latencies, 95)

	for i := 0; i <= Steps; i++ {
		rep.Thresholds = append(rep.Thresholds, sweepRow(measured, Threshold(i)))
	}
	for _, row := range rep.Thresholds {
		if row.Precision != nil && *row.Precision >= m.MinPrecision {
			t := row.Threshold
			rep.Recommended = &t
			break
		}
	}
	rep.KindsAt = m.ConfiguredThreshold
	if rep.Recommended != nil {
		rep.KindsAt = *rep.Recommended
	}
	rep.Recommendation = recommendation(rep)

	rep.Kinds = kindRows(kinds, measured, rep.KindsAt)
	return rep
}

// countCases counts each case into rep (pending, failed, decisions, cost) and
// into its kind's row, and returns the measured cases, their latencies and
// the rows by kind.
func countCases(rep *Report, cases []Case, results map[string]CaseResult) (measured []measuredCase, latencies []float64, kinds map[string]*KindRow) {
	kinds = map[string]*KindRow{}
	for _, c := range cases {
		k := kinds[c.Kind]
		if k == nil {
			k = &KindRow{Kind: c.Kind}
			kinds[c.Kind] = k
		}
		k.Cases++
		r, ok := results[c.ID]
		if !ok {
			rep.Pending++
			continue
		}
		rep.Cost.InputTokens += r.InputTokens
		rep.Cost.OutputTokens += r.OutputTokens
		rep.Cost.Retries += r.Retries
		if r.Error != "" {
			rep.Errors++
			k.Errors++
			rep.Failures = append(rep.Failures, FailedCase{ID: c.ID, Error: r.Error})
			continue
		}
		rep.Cost.Requeries++
		latencies = append(latencies, r.LatencyMS)
		switch r.Decision {
		case "substitute":
			rep.Decisions.Substitute++
			if r.Outcome != OutcomeSubstituted {
				rep.Decisions.SubstituteRejected++
			}
		case "escalate":
			rep.Decisions.Escalate++
		default:
			rep.Decisions.Invalid++
		}
		measured = append(measured, measuredCase{testCase: c, result: r})
		k.Measured++
		if c.Expected != ExpectEscalate {
			k.WithRightTool++
			rep.WithRightTool++
		}
	}
	return measured, latencies, kinds
}

// kindRows gives one row per kind, in name order, over its measured cases at
// threshold at.
func kindRows(kinds map[string]*KindRow, measured []measuredCase, at float64) []KindRow {
	var rows []KindRow
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := kinds[n]
		var of []measuredCase
		for _, mc := range measured {
			if mc.testCase.Kind == n {
				of = append(of, mc)
			}
		}
		k.Row = sweepRow(of, at)
		rows = append(rows, *k)
	}
	return rows
}

type measuredCase struct {
	testCase Case
	result   CaseResult
}

// sweepRow computes one threshold's row over measured cases.
func sweepRow(ms []measuredCase, t float64) Row {
	row := Row{Threshold: t}
	right := 0
	for _, mc := range ms {
		if mc.testCase.Expected != ExpectEscalate {
			right++
		}
		if !mc.result.substitutedAt(t) {
			row.Escalated++
			continue
		}
		row.Substituted++
		switch {
		case mc.result.Tool == mc.testCase.Expected:
			row.Correct++
		case mc.testCase.Expected == ExpectEscalate:
			row.ShouldEscalate++
		default:
			row.WrongTool++
		}
	}
	row.Wrong = row.WrongTool + row.ShouldEscalate
	if n := len(ms); n > 0 {
		row.SubstitutionRate = float64(row.Substituted) / float64(n)
		row.EscalationRate = float64(row.Escalated) / float64(n)
	}
	row.Precision = ratio(row.Correct, row.Substituted)
	row.Recall = ratio(row.Correct, right)
	return row
}

func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	v := float64(a) / float64(b)
	return &v
}

// percentile is the nearest-rank percentile: the smallest value with at
// least p% of the values at or below it. 0 for no values.
func percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func recommendation(rep *Report) string {
	if rep.Measured == 0 {
		return "no case was measured, so no threshold can be recommended"
	}
	if rep.Recommended == nil {
		return fmt.Sprintf("no threshold reaches a precision of %s: the model's substitutions are not reliable enough on these cases; "+
			"keep recovery.confidence_threshold at 1 (escalate every invented call) or improve the catalog's descriptions and the prompt, then measure again",
			percent(rep.MinPrecision))
	}
	t := *rep.Recommended
	s := fmt.Sprintf("set recovery.confidence_threshold to %.2f, the lowest threshold with a precision of at least %s", t, percent(rep.MinPrecision))
	if t == rep.ConfiguredThreshold {
		s += " (the config already has it)"
	} else {
		s += fmt.Sprintf(" (the config has %.2f)", rep.ConfiguredThreshold)
	}
	return s
}

// percent formats a fraction as a percentage.
func percent(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

func percentOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return percent(*v)
}

// WriteTable prints the report as text tables.
func WriteTable(w io.Writer, rep *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "toolgate eval: model %s, catalog %s\n", rep.Model, rep.CatalogVersion)
	fmt.Fprintf(&b, "%d cases: %d measured, %d failed, %d not run; %d with a right tool\n",
		rep.Cases, rep.Measured, rep.Errors, rep.Pending, rep.WithRightTool)
	if rep.Interrupted {
		b.WriteString("the run was interrupted: this report covers the cases measured so far\n")
	}
	d := rep.Decisions
	fmt.Fprintf(&b, "decisions: %d substitute (%d rejected by the checks), %d escalate, %d invalid\n\n",
		d.Substitute, d.SubstituteRejected, d.Escalate, d.Invalid)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "threshold\tsubstituted\tsubst.rate\tprecision\twrong\tescal.rate\trecall\t")
	for _, r := range rep.Thresholds {
		mark := ""
		if rep.Recommended != nil && r.Threshold == *rep.Recommended {
			mark += " <- recommended"
		}
		if r.Threshold == rep.ConfiguredThreshold {
			mark += " <- config"
		}
		fmt.Fprintf(tw, "%.2f\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Threshold, r.Substituted, percent(r.SubstitutionRate),
			percentOrDash(r.Precision), r.Wrong, percent(r.EscalationRate), percentOrDash(r.Recall), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n\n", rep.Recommendation)

	fmt.Fprintf(&b, "by kind, at threshold %.2f:\n", rep.KindsAt)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tcases\tsubstituted\tprecision\twrong\tescal.rate\trecall\tfailed")
	for _, k := range rep.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\t%s\t%d\n", kindName(k.Kind), k.Cases, k.Substituted, percentOrDash(k.Precision),
			k.Wrong, percent(k.EscalationRate), percentOrDash(k.Recall), k.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := rep.Cost
	fmt.Fprintf(&b, "\ncost: %d re-queries, %d tokens (%d in, %d out), latency p50 %.0f ms, p95 %.0f ms, %d retries\n",
		c.Requeries, c.TotalTokens, c.InputTokens, c.OutputTokens, c.LatencyP50MS, c.LatencyP95MS, c.Retries)
	for i, f := range rep.Failures {
		if i == 10 {
			fmt.Fprintf(&b, "… and %d more failures (see the JSON report)\n", len(rep.Failures)-10)
			break
		}
		fmt.Fprintf(&b, "failed %s: %s\n", f.ID, f.Error)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func kindName(k string) string {
	if k == "" {
		return "(none)"
	}
	return k
}
