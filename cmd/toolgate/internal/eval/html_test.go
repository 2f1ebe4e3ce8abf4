package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const svgNS = "http://www.w3.org/2000/svg"

func suiteReport(t *testing.T) *Report {
	t.Helper()
	cases, script := suite()
	_, snap := newUpstream(t, script)
	return runEval(t, context.Background(), snap, cases, Options{})
}

// TestHTMLWellFormed parses the whole page as strict XML (x/net/html is not
// a dependency of this module) and checks the plot: one point per
// threshold for the escalation rate and recall, and one per threshold with
// any substitution for precision, every point inside the drawing.
func TestHTMLWellFormed(t *testing.T) {
	rep := suiteReport(t)
	var page bytes.Buffer
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	for _, banned := range []string{"<script", "http://", "https://", "src=", "@import", "url("} {
		// The only URLs allowed are the two namespace names and the
		// report's own endpoint text.
		n := strings.Count(s, banned)
		if banned == "http://" {
			n -= strings.Count(s, "http://www.w3.org/") + strings.Count(s, rep.Endpoint)
		}
		if n != 0 {
			t.Errorf("the page is not self-contained: %d× %q", n, banned)
		}
	}

	dec := xml.NewDecoder(strings.NewReader(s))
	dec.Strict = true
	points := map[string]int{}
	var root string
	svgs, inSVG := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			if el.Name.Local == "svg" {
				if el.Name.Space != svgNS {
					t.Errorf("svg in namespace %q", el.Name.Space)
				}
				svgs++
				inSVG++
			}
			if el.Name.Local != "polyline" {
				continue
			}
			if inSVG == 0 || el.Name.Space != svgNS {
				t.Error("a polyline outside the svg")
			}
			var series, pts string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "data-series":
					series = a.Value
				case "points":
					pts = a.Value
				}
			}
			for _, p := range strings.Fields(pts) {
				xy := strings.Split(p, ",")
				x, err1 := strconv.ParseFloat(xy[0], 64)
				y, err2 := strconv.ParseFloat(xy[len(xy)-1], 64)
				if len(xy) != 2 || err1 != nil || err2 != nil || x < plotLeft || x > plotRght || y < plotTop || y > plotBot {
					t.Errorf("%s: point %q outside the plot", series, p)
				}
			}
			points[series] = len(strings.Fields(pts))
		case xml.EndElement:
			if el.Name.Local == "svg" {
				inSVG--
			}
		}
	}
	if root != "html" || svgs != 1 {
		t.Errorf("root %q, %d svg elements", root, svgs)
	}
	// Precision is defined from 0.00 to 0.95 (c01 at 0.95 is the last
	// substitution): 20 points; the others have all 21.
	want := map[string]int{"precision": 20, "escalation_rate": 21, "recall": 21}
	for k, n := range want {
		if points[k] != n {
			t.Errorf("%s has %d points, want %d (all: %v)", k, points[k], n, points)
		}
	}
	for _, want := range []string{"recommended 0.85", "Set recovery.confidence_threshold to 0.85", `<tr class="rec"><td>0.85</td>`, `<tr class="cfg"><td>0.80</td>`, "c13"} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestHTMLInChromium renders the page in a real browser. CI installs
// Debian's chromium; elsewhere the test is skipped when it is missing.
func TestHTMLInChromium(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing, and CI=true requires this check (apt-get install chromium)", chromium)
		}
		t.Skipf("%s is not installed: the rendering check needs Debian's chromium package (it is required when CI=true)", chromium)
	}
	rep := suiteReport(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--screenshot="+shot, "--window-size=1000,800", "file://"+page)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	fh, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got != (image.Point{X: 1000, Y: 800}) {
		t.Fatalf("screenshot is %v, want 1000x800", got)
	}
	// Non-trivial: text and lines make many colours, and a fair share of
	// the page is not background.
	colours := map[[3]uint32]bool{}
	inked, total := 0, 0
	for y := 0; y < 800; y += 2 {
		for x := 0; x < 1000; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			total++
			if r>>8 < 200 || g>>8 < 200 || b>>8 < 200 {
				inked++
			}
		}
	}
	if len(colours) < 20 || inked*100 < total {
		t.Errorf("the screenshot looks empty: %d colours, %d of %d pixels inked", len(colours), inked, total)
	}
}
