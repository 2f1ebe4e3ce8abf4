package eval

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether w is a terminal, where a redrawn progress bar
// reads well; elsewhere (CI logs, files) periodic lines do.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Redraw and log intervals of the progress display.
var (
	barEvery  = 200 * time.Millisecond
	lineEvery = 10 * time.Second
)

// progress shows how far a run is, its rate and the time left.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	start time.Time

	mu     sync.Mutex
	done   int
	failed int

	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts drawing; a nil writer draws nothing.
func startProgress(w io.Writer, tty bool, total int) *progress {
	p := &progress{w: w, tty: tty, total: total, start: time.Now(), stop: make(chan struct{})}
	if w == nil || total == 0 {
		return p
	}
	every := lineEvery
	if tty {
		every = barEvery
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
	return p
}

// add counts one finished case.
func (p *progress) add(failed bool) {
	p.mu.Lock()
	p.done++
	if failed {
		p.failed++
	}
	p.mu.Unlock()
}

// finish stops the display and draws the final state once.
func (p *progress) finish() {
	if p.w == nil || p.total == 0 {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.draw(true)
}

func (p *progress) draw(final bool) {
	p.mu.Lock()
	done, failed := p.done, p.failed
	p.mu.Unlock()
	elapsed := time.Since(p.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	left := "?"
	if rate > 0 {
		left = shortDuration(time.Duration(float64(p.total-done) / rate * float64(time.Second)))
	}
	frac := float64(done) / float64(p.total)
	fails := ""
	if failed > 0 {
		fails = fmt.Sprintf(", %d failed", failed)
	}
	if p.tty {
		const width = 30
		n := int(frac * width)
		bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
		end := ""
		if final {
			end = "\n"
		}
		// Trailing spaces clear what a longer previous line left behind.
		fmt.Fprintf(p.w, "\r[%s] %d/%d %3.0f%% %.1f cases/s, %s left%s    %s", bar, done, p.total, 100*frac, rate, left, fails, end)
		return
	}
	if final {
		fmt.Fprintf(p.w, "eval: %d/%d cases in %s%s\n", done, p.total, shortDuration(elapsed), fails)
		return
	}
	fmt.Fprintf(p.w, "eval: %d/%d cases (%.0f%%), %.1f cases/s, about %s left%s\n", done, p.total, 100*frac, rate, left, fails)
}

// shortDuration formats d as h:mm:ss or m:ss.
func shortDuration(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
