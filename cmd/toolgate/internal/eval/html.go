package eval

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// The plot's geometry, in SVG user units.
const (
	plotW, plotH       = 640, 360
	plotLeft, plotRght = 56.0, 620.0
	plotTop, plotBot   = 20.0, 300.0
)

func plotX(t float64) float64 { return plotLeft + t*(plotRght-plotLeft) }
func plotY(v float64) float64 { return plotBot - v*(plotBot-plotTop) }

// WriteHTML writes the report as one self-contained page: inline CSS and an
// inline SVG plot, no script, no external asset, so it can be attached to
// an issue or opened from disk anywhere. The page is also well-formed XML
// (void elements closed, only XML's own entities), so strict tools read it.
func WriteHTML(w io.Writer, rep *Report) error {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(&b, "<title>toolgate eval: %s</title>\n", e(rep.Model))
	b.WriteString(htmlHead)
	b.WriteString("<h1>Recovery calibration</h1>\n")
	fmt.Fprintf(&b, "<p class=\"meta\">model %s · catalog %s · %s · generated %s</p>\n",
		e(rep.Model), e(rep.CatalogVersion), e(rep.Endpoint), e(rep.Generated.UTC().Format(time.RFC3339)))
	fmt.Fprintf(&b, "<p class=\"meta\">%d cases: %d measured, %d failed, %d not run; %d with a right tool. Decisions: %d substitute (%d rejected by the checks), %d escalate, %d invalid.</p>\n",
		rep.Cases, rep.Measured, rep.Errors, rep.Pending, rep.WithRightTool,
		rep.Decisions.Substitute, rep.Decisions.SubstituteRejected, rep.Decisions.Escalate, rep.Decisions.Invalid)
	if rep.Interrupted {
		b.WriteString("<p class=\"lead none\">The run was interrupted: this report covers the cases measured so far.</p>\n")
	}
	cls := "lead"
	if rep.Recommended == nil {
		cls = "lead none"
	}
	fmt.Fprintf(&b, "<p class=\"%s\">%s.</p>\n", cls, e(upperFirst(rep.Recommendation)))

	b.WriteString("<h2>Precision and escalation rate by threshold</h2>\n")
	writePlot(&b, rep)

	writeSweep(&b, rep)
	writeKinds(&b, rep)
	writeCostAndFailures(&b, rep)
	b.WriteString("</main>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// htmlHead opens the page after its title: the style sheet and the main
// element the sections go in.
const htmlHead = `<style>
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2329;background:#fff;margin:0;padding:24px}
main{max-width:940px;margin:0 auto}
h1{font-size:24px;margin:0 0 6px}
h2{font-size:18px;margin:28px 0 8px}
.lead{font-size:16px;padding:10px 14px;border-left:4px solid #2b6cb0;background:#eef4fb;margin:12px 0}
.lead.none{border-color:#c53030;background:#fdf0f0}
.meta{color:#56606b;margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:14px}
th,td{padding:3px 10px;border-bottom:1px solid #e3e7eb;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f5f7f9}
tr.rec td{background:#e6f4ea;font-weight:600}
tr.cfg td:first-child::after{content:" (config)";color:#56606b;font-weight:400}
svg{display:block;max-width:100%;height:auto}
.axis{stroke:#56606b;stroke-width:1}
.grid{stroke:#e3e7eb;stroke-width:1}
.tick{font-size:11px;fill:#56606b}
.precision{fill:none;stroke:#2b6cb0;stroke-width:2.5}
.escalation{fill:none;stroke:#dd6b20;stroke-width:2.5}
.recall{fill:none;stroke:#38a169;stroke-width:1.5;stroke-dasharray:5 4}
.target{stroke:#2b6cb0;stroke-width:1;stroke-dasharray:3 3}
.chosen{stroke:#1d2329;stroke-width:1.5}
.config{stroke:#a0aec0;stroke-width:1.5;stroke-dasharray:2 3}
.label{font-size:12px;fill:#1d2329}
</style>
</head>
<body>
<main>
`

// writeSweep writes the table of every threshold tried, marking the
// recommended and the configured one.
func writeSweep(b *strings.Builder, rep *Report) {
	b.WriteString("<h2>Threshold sweep</h2>\n<table>\n<thead><tr><th>threshold</th><th>substituted</th><th>subst. rate</th><th>precision</th><th>wrong tool</th><th>should escalate</th><th>escal. rate</th><th>recall</th></tr></thead>\n<tbody>\n")
	for _, r := range rep.Thresholds {
		var classes []string
		if rep.Recommended != nil && r.Threshold == *rep.Recommended {
			classes = append(classes, "rec")
		}
		if r.Threshold == rep.ConfiguredThreshold {
			classes = append(classes, "cfg")
		}
		attr := ""
		if len(classes) > 0 {
			attr = ` class="` + strings.Join(classes, " ") + `"`
		}
		fmt.Fprintf(b, "<tr%s><td>%.2f</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td></tr>\n",
			attr, r.Threshold, r.Substituted, percent(r.SubstitutionRate), percentOrDash(r.Precision), r.WrongTool, r.ShouldEscalate,
			percent(r.EscalationRate), percentOrDash(r.Recall))
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeKinds writes the table by kind of case at the threshold shown.
func writeKinds(b *strings.Builder, rep *Report) {
	e := html.EscapeString
	fmt.Fprintf(b, "<h2>By kind, at threshold %.2f</h2>\n<table>\n", rep.KindsAt)
	b.WriteString("<thead><tr><th>kind</th><th>cases</th><th>substituted</th><th>precision</th><th>wrong</th><th>escal. rate</th><th>recall</th><th>failed</th></tr></thead>\n<tbody>\n")
	for _, k := range rep.Kinds {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
			e(kindName(k.Kind)), k.Cases, k.Substituted, percentOrDash(k.Precision), k.Wrong, percent(k.EscalationRate), percentOrDash(k.Recall), k.Errors)
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeCostAndFailures writes what the run cost and the cases that failed.
func writeCostAndFailures(b *strings.Builder, rep *Report) {
	e := html.EscapeString
	c := rep.Cost
	b.WriteString("<h2>Cost</h2>\n<table>\n<tbody>\n")
	fmt.Fprintf(b, "<tr><td>re-queries answered</td><td>%d</td></tr>\n", c.Requeries)
	fmt.Fprintf(b, "<tr><td>tokens in / out / total</td><td>%d / %d / %d</td></tr>\n", c.InputTokens, c.OutputTokens, c.TotalTokens)
	fmt.Fprintf(b, "<tr><td>latency p50 / p95</td><td>%.0f ms / %.0f ms</td></tr>\n", c.LatencyP50MS, c.LatencyP95MS)
	fmt.Fprintf(b, "<tr><td>retries</td><td>%d</td></tr>\n", c.Retries)
	b.WriteString("</tbody>\n</table>\n")

	if len(rep.Failures) > 0 {
		b.WriteString("<h2>Failed cases</h2>\n<table>\n<tbody>\n")
		for _, f := range rep.Failures {
			fmt.Fprintf(b, "<tr><td>%s</td><td style=\"text-align:left\">%s</td></tr>\n", e(f.ID), e(f.Error))
		}
		b.WriteString("</tbody>\n</table>\n")
	}
}

// writePlot draws precision, escalation rate and recall against the
// threshold. Precision is undefined where nothing is substituted; since
// substitutions only fall as the threshold rises, that is a tail of the
// sweep, and its line simply stops there.
func writePlot(b *strings.Builder, rep *Report) {
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"precision and escalation rate versus confidence threshold\">\n",
		plotW, plotH, plotW, plotH)
	for i := 0; i <= 4; i++ {
		v := float64(i) / 4
		y := plotY(v)
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", plotLeft, y, plotRght, y)
		fmt.Fprintf(b, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n", plotLeft-6, y+4, 100*v)
	}
	for i := 0; i <= 10; i++ {
		t := float64(i) / 10
		x := plotX(t)
		fmt.Fprintf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, plotBot, x, plotBot+4)
		fmt.Fprintf(b, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", x, plotBot+17, t)
	}
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", plotLeft, plotBot, plotRght, plotBot)
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", plotLeft, plotTop, plotLeft, plotBot)
	fmt.Fprintf(b, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">recovery.confidence_threshold</text>\n", (plotLeft+plotRght)/2, plotBot+34.0)

	y := plotY(rep.MinPrecision)
	fmt.Fprintf(b, "<line class=\"target\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", plotLeft, y, plotRght, y)
	// Left-aligned, away from the recommended threshold's label, which
	// sits top right where precision usually reaches the target.
	fmt.Fprintf(b, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">min precision %s</text>\n", plotLeft+6, y-5, percent(rep.MinPrecision))
	x := plotX(rep.ConfiguredThreshold)
	fmt.Fprintf(b, "<line class=\"config\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, plotTop, x, plotBot)
	if rep.Recommended != nil {
		x := plotX(*rep.Recommended)
		fmt.Fprintf(b, "<line class=\"chosen\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, plotTop, x, plotBot)
		fmt.Fprintf(b, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">recommended %.2f</text>\n", x, plotTop-6, *rep.Recommended)
	}

	var prec, esc, rec []string
	for _, r := range rep.Thresholds {
		x := plotX(r.Threshold)
		if r.Precision != nil {
			prec = append(prec, fmt.Sprintf("%.1f,%.1f", x, plotY(*r.Precision)))
		}
		esc = append(esc, fmt.Sprintf("%.1f,%.1f", x, plotY(r.EscalationRate)))
		if r.Recall != nil {
			rec = append(rec, fmt.Sprintf("%.1f,%.1f", x, plotY(*r.Recall)))
		}
	}
	if len(rec) > 0 {
		fmt.Fprintf(b, "<polyline class=\"recall\" data-series=\"recall\" points=\"%s\"/>\n", strings.Join(rec, " "))
	}
	fmt.Fprintf(b, "<polyline class=\"escalation\" data-series=\"escalation_rate\" points=\"%s\"/>\n", strings.Join(esc, " "))
	if len(prec) > 0 {
		fmt.Fprintf(b, "<polyline class=\"precision\" data-series=\"precision\" points=\"%s\"/>\n", strings.Join(prec, " "))
	}

	// Legend, under the axis title.
	ly := float64(plotH) - 8
	legend := []struct{ class, text string }{
		{"precision", "precision"}, {"escalation", "escalation rate"}, {"recall", "recall"}, {"config", "configured threshold"},
	}
	lx := plotLeft
	for _, l := range legend {
		fmt.Fprintf(b, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", l.class, lx, ly-4, lx+22, ly-4)
		fmt.Fprintf(b, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx+28, ly, l.text)
		lx += 40 + 7*float64(len(l.text))
	}
	b.WriteString("</svg>\n")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
