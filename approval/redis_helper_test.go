package approval

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a real redis-server the test started on a loopback port.
type redisServer struct {
	Addr string
	cmd  *exec.Cmd
}

// startRedis starts Debian's redis-server without persistence on a free
// loopback port and stops it, by its PID, when the test ends. Without the
// binary the test is skipped, except in CI, where that is a failure: CI
// installs it (.ci/run).
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI must install it (apt-get install redis-server)")
		}
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	t.Cleanup(s.Stop)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c.Ping(context.Background()).Err() == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server by its PID and waits for it; it is safe to call
// twice.
func (s *redisServer) Stop() {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
