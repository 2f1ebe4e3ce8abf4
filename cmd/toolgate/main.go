// Command toolgate is an HTTP sidecar proxy that lets through only tool calls
// naming a real tool with valid arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/demo"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/eval"
	"github.com/toolgate/toolgate/cmd/toolgate/internal/lint"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `toolgate: only real tools with valid arguments reach your agent.

Usage:
  toolgate serve   --config config.yaml   run the proxy
  toolgate check   --config config.yaml   validate the config and lint the catalog
  toolgate demo [--trace-endpoint URL]    run a scripted end-to-end demonstration (traces to an OTLP endpoint)
  toolgate eval    --config config.yaml --cases cases.jsonl --model M
                                          measure recovery and pick the threshold
  toolgate version                        print the version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "demo":
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.SetOutput(stderr)
		trace := fs.String("trace-endpoint", "", "export the demo's traces to this OTLP http/protobuf endpoint, e.g. http://127.0.0.1:4318")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		if err := demo.RunTraced(context.Background(), stdout, *trace); err != nil {
			fmt.Fprintln(stderr, "demo failed:", err)
			return 1
		}
		return 0
	case "eval":
		return eval.Command(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "toolgate", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "toolgate: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func configFlag(name string, args []string, stderr io.Writer) (string, bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "config.yaml", "path to config.yaml")
	if err := fs.Parse(args); err != nil {
		return "", false
	}
	return *path, true
}

func check(args []string, stdout, stderr io.Writer) int {
	path, ok := configFlag("check", args, stderr)
	if !ok {
		return 2
	}
	snap, err := catalog.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid; catalog version %s, %d tools\n", path, snap.Version, len(snap.Tools))
	warnings := lint.Catalog(snap)
	for _, w := range warnings {
		fmt.Fprintln(stdout, "warning:", w)
	}
	for _, line := range lint.Strict(snap) {
		fmt.Fprintln(stdout, line)
	}
	return 0
}

func serve(args []string, stderr io.Writer) int {
	path, ok := configFlag("serve", args, stderr)
	if !ok {
		return 2
	}
	cfg, err := catalog.LoadConfig(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log, stopLog, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer stopLog()
	a, err := app.Start(path, app.Options{Logger: log, Version: version})
	if err != nil {
		log.Error("start failed", zap.Error(err))
		return 1
	}
	stopWatch, err := a.Watch()
	if err != nil {
		log.Warn("config folder not watched; reload with SIGHUP", zap.Error(err))
	} else {
		defer stopWatch()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			_ = a.Reload()
			continue
		}
		log.Info("draining", zap.String("signal", sig.String()), zap.Duration("grace", a.Grace()))
		ctx, cancel := context.WithTimeout(context.Background(), a.Grace())
		err := a.Shutdown(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Error("shutdown", zap.Error(err))
		}
		return 0
	}
	return 0
}

// newLogger writes JSON (or console) lines to out through a buffer flushed
// every second and when the returned stop runs: one write per request line
// was a system call on every proxied request. zap itself flushes at once
// before a panic or fatal line.
func newLogger(c catalog.Log, out io.Writer) (*zap.Logger, func(), error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, nil, fmt.Errorf("log.level: %w", err)
	}
	zc := zap.NewProductionConfig()
	enc := zapcore.NewJSONEncoder(zc.EncoderConfig)
	if c.Format == "console" {
		enc = zapcore.NewConsoleEncoder(zap.NewDevelopmentConfig().EncoderConfig)
	}
	// struct{ io.Writer } hides Sync: on a file that is an fsync every
	// second, and a log line needs no disk barrier.
	sink := zapcore.Lock(zapcore.AddSync(struct{ io.Writer }{out}))
	ws := &zapcore.BufferedWriteSyncer{WS: sink, Size: 256 << 10, FlushInterval: time.Second}
	// No zap.AddCaller: the caller of every request line is the same line
	// of the pipeline, and finding it walked the stack on each request
	// (about 60% of the line's cost).
	log := zap.New(zapcore.NewCore(enc, ws, level),
		zap.AddStacktrace(zapcore.ErrorLevel), zap.ErrorOutput(sink))
	return log, func() { _ = ws.Stop() }, nil
}
