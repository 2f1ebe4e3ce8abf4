package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// nginx is a third target: a widely deployed C proxy, to show what
// proxying alone costs when written in C. It runs from its own generated
// config in a folder of the run's temporary directory, in the foreground
// (daemon off), listening on 127.0.0.1 only, with its logs in that folder
// (access log off: neither Go proxy writes one per request to a file the
// way nginx would... and toolgate's line goes to its own log at the level
// -log-level sets).
//
// Worker processes: one per CPU (a master and runtime.NumCPU() workers),
// since each Go target may run on every CPU too (GOMAXPROCS is the CPU
// count); a single worker would cap nginx at one core where the others are
// not capped. CPU per request is the master's and the workers' summed.
//
// The master gets SIGTERM if this program dies (nginx's fast shutdown,
// which stops its workers too), so no worker is left behind. Run as root,
// this program starts nginx as "nobody".

// nginxConf is the config: %[1]d workers, %[2]s the folder, %[3]s nginx's
// listen address, %[4]s the mock's. proxy_buffering off passes each event
// on as it arrives, as the Go proxies flush every write; the upstream
// block keeps connections to the mock alive (HTTP/1.1, Connection
// cleared) as the Go proxies' pools do, and neither side closes a
// keep-alive connection after a request count.
const nginxConf = `daemon off;
master_process on;
worker_processes %[1]d;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events {
    worker_connections 8192;
}
http {
    access_log off;
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_buffer_size 64k;
    client_max_body_size 64m;
    upstream mock {
        server %[4]s;
        keepalive 256;
        keepalive_requests 1000000;
        keepalive_timeout 120s;
    }
    server {
        listen %[3]s;
        location = /_ready {
            return 204;
        }
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 120s;
        }
    }
}
`

// findNginx resolves -nginx: "off" is no nginx target, "auto" is nginx on
// PATH if there is one, anything else must be an nginx binary.
func findNginx(flag string) (string, error) {
	switch flag {
	case "off", "":
		return "", nil
	case "auto":
		p, err := exec.LookPath("nginx")
		if err != nil {
			return "", nil
		}
		return p, nil
	}
	p, err := exec.LookPath(flag)
	if err != nil {
		return "", fmt.Errorf("-nginx %s: %w", flag, err)
	}
	return p, nil
}

// startNginx writes the config into tmp/nginx and starts nginx on it,
// waiting until it answers on its listen address.
func startNginx(ctx context.Context, bin, tmp, mockAddr string) (*child, string, error) {
	listen, err := proc.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(tmp, "nginx")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, "", err
	}
	cfg := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(nginxConf, runtime.NumCPU(), dir, listen, mockAddr)), 0o644); err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", cfg, "-e", filepath.Join(dir, "error.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if os.Geteuid() == 0 {
		cred, err := unprivileged(tmp, dir)
		if err != nil {
			return nil, "", err
		}
		cmd.SysProcAttr.Credential = cred
	}
	out, err := os.Create(filepath.Join(dir, "nginx.out"))
	if err != nil {
		return nil, "", err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	c := &child{name: "nginx", cmd: cmd, log: filepath.Join(dir, "error.log"), done: make(chan struct{}), tree: true}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start nginx: %w", err)
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	if err := waitHTTP(ctx, "http://"+listen+"/_ready", c.done); err != nil {
		return c, "", fmt.Errorf("nginx %w (config %s)\n%s%s", err, cfg, tail(out.Name(), 2000), tail(c.log, 2000))
	}
	return c, listen, nil
}

// unprivileged is the "nobody" user's credential, with dir made nobody's
// and its parent folder opened for traversal only, so nginx can write its
// log and pid file there.
func unprivileged(parent, dir string) (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, nginx needs the user nobody to run as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, errors.New("user nobody has a non-numeric uid or gid")
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// waitHTTP polls url until it answers 2xx, done is closed or 15 s pass.
func waitHTTP(ctx context.Context, url string, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl := &http.Client{Timeout: time.Second}
	for {
		if resp, err := cl.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		select {
		case <-done:
			return proc.ErrExited
		case <-ctx.Done():
			return fmt.Errorf("not answering at %s: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cpuTree is the CPU time of pid and of its live children, in µs: nginx's
// workers are the master's children, and their time reaches the master's
// own counters only once they have exited.
func cpuTree(pid int) (float64, error) {
	total, err := cpuMicros(pid)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the name: state, then the parent's pid.
		if f := strings.Fields(s[i+1:]); len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if us, err := cpuMicros(p); err == nil {
			total += us
		}
	}
	return total, nil
}
