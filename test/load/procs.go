package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// child is one server process of the run.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it tells a -mock or -bare child to stop
	log   string
	addr  string
	done  chan struct{}
	// tree counts the CPU time of the process's children too (nginx's
	// workers).
	tree bool
}

// cpu is the CPU time the child has used so far, in µs.
func (c *child) cpu() (float64, error) {
	if c.tree {
		return cpuTree(c.pid())
	}
	return cpuMicros(c.pid())
}

// startChild starts a server process with stderr going to a log file.
// When wantAddr is set, it waits (up to 15 s) for the "ADDR host:port"
// line our own child modes print.
func startChild(name, logPath string, wantAddr bool, bin string, args ...string) (*child, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stderr = lf
	proc.SetParentDeathSignal(cmd)
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	var out io.ReadCloser
	if wantAddr {
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	} else {
		cmd.Stdout = lf
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	if !wantAddr {
		return c, nil
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		addr, found := strings.CutPrefix(l, "ADDR ")
		if !ok || !found {
			c.stop()
			return nil, fmt.Errorf("%s did not report its address (log %s)", name, logPath)
		}
		c.addr = addr
		return c, nil
	case <-time.After(15 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s did not start within 15s (log %s)", name, logPath)
	}
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop ends this child only: its stdin closes, then SIGTERM, then SIGKILL
// after 5 s.
func (c *child) stop() {
	if c == nil {
		return
	}
	_ = c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// exited reports whether the child has died during the run.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux build in practice; getconf confirms it when
// present.
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
			return float64(v)
		}
	}
	return 100
}()

// cpuMicros is the user+system CPU time a process has used, in µs, from
// /proc/<pid>/stat (fields 14 and 15). The command name (field 2) may hold
// spaces, so fields are counted after its closing parenthesis.
func cpuMicros(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so utime (14) is f[11] and stime (15) f[12].
	if len(f) < 13 {
		return 0, errors.New("short /proc stat line")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable CPU times in /proc stat")
	}
	return (ut + st) * 1e6 / clockTicks, nil
}

// loadAvg is the 1-minute load average, to show how busy the machine was.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// tail returns the last n bytes of a file, for error reports.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
