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
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// serveProfiled runs toolgate in this process, as `toolgate serve` would,
// with a CPU profile of its whole life written to dir/cpu.prof and, when
// it is told to stop (SIGTERM or its stdin closing), the allocation
// profile to dir/allocs.prof. The load generator runs in another process,
// so the profile holds toolgate's work alone. The logger is built like
// serve's (JSON lines through a 256 KiB buffer flushed every second), so
// the per-request line is in the profile at its real cost.
func serveProfiled(config, dir string) int {
	stop := make(chan struct{})
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		eof := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
		select {
		case <-sigs:
		case <-eof:
		}
		close(stop)
	}()
	if err := profileToolgate(config, dir, stop); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// profileToolgate serves config, profiled into dir, until stop closes.
func profileToolgate(config, dir string, stop <-chan struct{}) error {
	cfg, err := catalog.LoadConfig(config)
	if err != nil {
		return err
	}
	level, err := zapcore.ParseLevel(cfg.Log.Level)
	if err != nil {
		return fmt.Errorf("log.level: %w", err)
	}
	sink := zapcore.Lock(zapcore.AddSync(struct{ io.Writer }{os.Stderr}))
	ws := &zapcore.BufferedWriteSyncer{WS: sink, Size: 256 << 10, FlushInterval: time.Second}
	defer func() { _ = ws.Stop() }()
	// As serve's logger: no caller, which would walk the stack on every
	// request line and show in the profile as a cost serve does not pay.
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionConfig().EncoderConfig), ws, level),
		zap.AddStacktrace(zapcore.DPanicLevel), zap.ErrorOutput(sink))

	// Allocations are sampled at the default rate, which is enough for
	// proportions; a rate of 1 would slow the allocator being measured.
	cpu, err := os.Create(filepath.Join(dir, "cpu.prof"))
	if err != nil {
		return err
	}
	defer cpu.Close()
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return err
	}
	a, err := app.Start(config, app.Options{Logger: log})
	if err != nil {
		pprof.StopCPUProfile()
		return fmt.Errorf("start: %w", err)
	}
	<-stop
	pprof.StopCPUProfile()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.Shutdown(ctx)
	return writeAllocs(filepath.Join(dir, "allocs.prof"))
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
