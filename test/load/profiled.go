package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/app"
)

// serveProfiled runs toolgate in this process, as `toolgate serve` would,
// with a CPU profile of its whole life written to dir/cpu.prof and, when
// it is told to stop (SIGTERM or its stdin closing), the allocation
// profile to dir/allocs.prof. The load generator runs in another process,
// so the profile holds toolgate's work alone. The logger is built like
// serve's (JSON lines through a 256 KiB buffer flushed every second), so
// the per-request line is in the profile at its real cost.
func serveProfiled(config, dir string) int {
	cfg, err := catalog.LoadConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	level, err := zapcore.ParseLevel(cfg.Log.Level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "log.level:", err)
		return 1
	}
	sink := zapcore.Lock(zapcore.AddSync(struct{ io.Writer }{os.Stderr}))
	ws := &zapcore.BufferedWriteSyncer{WS: sink, Size: 256 << 10, FlushInterval: time.Second}
	defer func() { _ = ws.Stop() }()
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionConfig().EncoderConfig), ws, level),
		zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel), zap.ErrorOutput(sink))

	// Every allocation sampled at the default rate is enough for
	// proportions; a rate of 1 would slow the allocator being measured.
	cpu, err := os.Create(filepath.Join(dir, "cpu.prof"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cpu.Close()
	if err := pprof.StartCPUProfile(cpu); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a, err := app.Start(config, app.Options{Logger: log})
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	stop := make(chan struct{}, 1)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- struct{}{}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sigs:
	case <-stop:
	}
	pprof.StopCPUProfile()
	if err := writeAllocs(filepath.Join(dir, "allocs.prof")); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.Shutdown(ctx)
	return 0
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
