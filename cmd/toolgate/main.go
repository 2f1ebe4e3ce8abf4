// Command toolgate is an HTTP sidecar proxy that lets through only tool calls
// naming a real tool with valid arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
  toolgate demo    [--serve [--listen ADDR]] [--trace-endpoint URL]
                                          run a scripted end-to-end demonstration, or keep
                                          toolgate and the scripted model up for your own SDK
  toolgate eval    --config config.yaml --cases cases.jsonl --model M
                                          measure recovery and pick the threshold
  toolgate audit verify FILE              check the approval record chain of a sink file
  toolgate pin     --config config.yaml   pin the MCP servers' tool definitions (catalog.pins.file)
  toolgate version                        print the version

toolgate COMMAND --help shows a command's flags.
`

const serveUsage = `Usage: toolgate serve [--config config.yaml]

Runs the proxy with the config file. Every variable the config's *_env fields
name must be set. SIGHUP (or an edit of the file) reloads it; SIGTERM drains.

Flags:
`

const checkUsage = `Usage: toolgate check [--config config.yaml]

Validates the config file, compiles its catalog and lints it, without serving.
Variables the config's *_env fields name may be unset here: each is reported
as a warning (serve refuses to start without them).

Flags:
`

const demoUsage = `Usage: toolgate demo [--trace-endpoint URL]
       toolgate demo --serve [--listen ADDR] [--trace-endpoint URL]

Starts toolgate and a scripted model on loopback (no key, no network) and
walks through four scenes. With --serve, both stay up until Ctrl-C and the
demo prints the base URL and a snippet per SDK to point your own client at.

Flags:
`

const versionUsage = `Usage: toolgate version

Prints the version.
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
		return serve(args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "demo":
		return demoCommand(args[1:], stdout, stderr)
	case "eval":
		return eval.Command(args[1:], stdout, stderr)
	case "audit":
		return audit(args[1:], stdout, stderr)
	case "pin":
		return pinCommand(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fs := newFlags("version", versionUsage)
		if code, ok := parse(fs, args[1:], stdout, stderr); !ok {
			return code
		}
		fmt.Fprintln(stdout, "toolgate", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "toolgate: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// flags is a subcommand's flag set with its usage text, which parse
// prints itself: the flag package's own would go to one writer for both
// --help and mistakes.
type flags struct {
	*flag.FlagSet
	usage string
}

func newFlags(name, usage string) flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return flags{fs, usage}
}

// parse parses a subcommand's flags. --help prints its usage on stdout and
// exits 0; an unknown flag or any argument left over is a usage error
// (exit 2), so that a mistyped command line is never run as another one.
func parse(fs flags, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, fs.usage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "toolgate %s: %v\n\n", fs.Name(), err)
		printUsage(stderr)
		return 2, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "toolgate %s: unexpected argument %q\n\n", fs.Name(), fs.Arg(0))
		printUsage(stderr)
		return 2, false
	}
	return 0, true
}

func configFlag(name, usage string, args []string, stdout, stderr io.Writer) (path string, code int, ok bool) {
	fs := newFlags(name, usage)
	p := fs.String("config", "config.yaml", "path to the config file")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return "", code, false
	}
	return *p, 0, true
}

// loadError prints a config that could not be read; a missing file says
// how to name another, since the default is only ./config.yaml.
func loadError(stderr io.Writer, name, path string, err error) {
	fmt.Fprintln(stderr, err)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "toolgate %s: no config at %s; pass --config PATH (see toolgate %s --help)\n", name, path, name)
	}
}

func check(args []string, stdout, stderr io.Writer) int {
	path, code, ok := configFlag("check", checkUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	snap, unset, err := catalog.LoadWithoutEnv(path)
	if err != nil {
		loadError(stderr, "check", path, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid; catalog version %s, %d tools\n", path, snap.Version, len(snap.Tools))
	for _, name := range unset {
		fmt.Fprintf(stdout, "warning: environment variable %s is not set; serve will not start without it\n", name)
	}
	warnings := lint.Catalog(snap)
	for _, w := range warnings {
		fmt.Fprintln(stdout, "warning:", w)
	}
	for _, line := range lint.Strict(snap) {
		fmt.Fprintln(stdout, line)
	}
	return 0
}

func demoCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", demoUsage)
	trace := fs.String("trace-endpoint", "", "export the demo's traces to this OTLP http/protobuf endpoint, e.g. http://127.0.0.1:4318")
	keep := fs.Bool("serve", false, "keep toolgate and the scripted model running for your own SDK, until Ctrl-C")
	listen := fs.String("listen", "127.0.0.1:8080", "with --serve: toolgate's address (127.0.0.1:0 picks a free port)")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	listenSet := false
	fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	if listenSet && !*keep {
		fmt.Fprintln(stderr, "toolgate demo: --listen needs --serve")
		return 2
	}
	if *keep {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := demo.Serve(ctx, stdout, demo.ServeOptions{Listen: *listen, TraceEndpoint: *trace}); err != nil {
			fmt.Fprintln(stderr, "demo failed:", err)
			return 1
		}
		return 0
	}
	if err := demo.RunTraced(context.Background(), stdout, *trace); err != nil {
		fmt.Fprintln(stderr, "demo failed:", err)
		return 1
	}
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	path, code, ok := configFlag("serve", serveUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	cfg, err := catalog.LoadConfig(path)
	if err != nil {
		loadError(stderr, "serve", path, err)
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
	logConfig := zap.NewProductionConfig()
	enc := zapcore.NewJSONEncoder(logConfig.EncoderConfig)
	if c.Format == "console" {
		enc = zapcore.NewConsoleEncoder(zap.NewDevelopmentConfig().EncoderConfig)
	}
	// struct{ io.Writer } hides Sync: on a file that is an fsync every
	// second, and a log line needs no disk barrier.
	sink := zapcore.Lock(zapcore.AddSync(struct{ io.Writer }{out}))
	buffered := &zapcore.BufferedWriteSyncer{WS: sink, Size: 256 << 10, FlushInterval: time.Second}
	// No zap.AddCaller: the caller of every request line is the same line
	// of the pipeline, and finding it walked the stack on each request
	// (about 60% of the line's cost). No stack on error lines either: they
	// report what the operator must fix (a rejected reload, a failed
	// listener), where a trace of toolgate's own frames is noise; a
	// recovered panic logs its stack itself.
	log := zap.New(zapcore.NewCore(enc, buffered, level),
		zap.AddStacktrace(zapcore.DPanicLevel), zap.ErrorOutput(sink))
	return log, func() { _ = buffered.Stop() }, nil
}
