// Package proc holds what the measuring programs (test/load, test/soak,
// test/rss) need to run toolgate as a process of its own and read what it
// uses: a free loopback port, a fresh build, readiness, /proc and /metrics.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FreeAddr asks the kernel for a free loopback port. Another process may
// take it before toolgate binds it; toolgate then fails to start and the
// caller says so.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Build compiles cmd/toolgate of the module the working directory is in
// into out, so the measured binary is the checked-out code.
func Build(ctx context.Context, out string) error {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == os.DevNull {
		return errors.New("run this from inside the toolgate module (or pass -toolgate)")
	}
	fmt.Println("building toolgate:", "go build -o", out, "./cmd/toolgate")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/toolgate")
	cmd.Dir = filepath.Dir(mod)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	t := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building toolgate: %w", err)
	}
	fmt.Printf("built in %s\n", time.Since(t).Round(100*time.Millisecond))
	return nil
}

// ErrExited is WaitReady's answer when the process died while starting.
var ErrExited = errors.New("exited during start")

// WaitReady polls url (toolgate's /readyz) until it answers 200, done is
// closed (the process died) or 30 s pass.
func WaitReady(ctx context.Context, url string, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl := &http.Client{Timeout: time.Second}
	for {
		resp, err := cl.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return ErrExited
		case <-ctx.Done():
			return fmt.Errorf("not ready at %s: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Status reads the kB figures of /proc/<pid>/status that a memory report
// needs: VmRSS (resident now), VmHWM (peak resident) and Threads (a count).
func Status(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmHWM", "VmRSS", "Threads":
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				out[k] = n
			}
		}
	}
	return out, nil
}

// Scrape reads the named series from toolgate's admin /metrics, summing
// the labelled ones.
func Scrape(admin string, names ...string) (map[string]float64, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(line, n+" ") || strings.HasPrefix(line, n+"{") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				out[n] += v
			}
		}
	}
	return out, sc.Err()
}

// Workdir makes a run's temporary folder, named after prefix, and returns
// it with the toolgate binary to run: bin when given, else a fresh build
// into the folder. cleanup removes the folder unless keep is set, in which
// case its path is printed so its config and logs can be read afterwards.
func Workdir(ctx context.Context, prefix string, keep bool, bin string) (dir, toolgate string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	if keep {
		fmt.Println("keeping", dir)
		cleanup = func() {}
	}
	if bin == "" {
		bin = filepath.Join(dir, "toolgate")
		if err := Build(ctx, bin); err != nil {
			cleanup()
			return "", "", nil, err
		}
	}
	return dir, bin, cleanup, nil
}
