package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
)

// Exit codes of Command.
const (
	// ExitFailed: the run could not start or some cases failed.
	ExitFailed = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitInterrupted: stopped by SIGINT; the report covers what was done.
	ExitInterrupted = 130
)

const commandUsage = `Usage:
  toolgate eval --config config.yaml --cases cases.jsonl --model MODEL [flags]
  toolgate eval --from-sink escalations.jsonl --out cases.jsonl

Measures decision recovery against the config's first upstream and
recommends recovery.confidence_threshold (see docs/recovery.md, "Calibrating
recovery").

Flags:
`

// Command is `toolgate eval`. SIGINT stops the run cleanly: cases in flight
// are dropped, the results file stays complete and the report covers what
// was measured; a second SIGINT kills the process as usual.
func Command(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the next Ctrl-C is the default one
	}()
	return command(ctx, args, stdout, stderr)
}

type flags struct {
	config, cases, out, html, results, fromSink, model string
	concurrency, retries                               int
	minPrecision                                       float64
}

func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f flags
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	// The flag package would print the usage to one writer for both
	// --help (asked for: stdout) and a mistake (stderr).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, commandUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fs.StringVar(&f.config, "config", "config.yaml", "config whose first upstream, catalog and recovery settings are measured")
	fs.StringVar(&f.cases, "cases", "", "cases file (JSONL)")
	fs.StringVar(&f.model, "model", "", "model to ask (the re-query's \"model\")")
	fs.StringVar(&f.out, "out", "", "write the report as JSON here; with --from-sink, the cases file to write")
	fs.StringVar(&f.html, "html", "", "write the report as a self-contained HTML page here")
	fs.StringVar(&f.results, "results", "", "per-case results (JSONL): appended as cases finish; cases already in it are not run again")
	fs.IntVar(&f.concurrency, "concurrency", DefaultConcurrency, "cases in flight at once")
	fs.IntVar(&f.retries, "retries", DefaultRetries, "retries per case after 429, 5xx or a timeout (0: none)")
	fs.Float64Var(&f.minPrecision, "min-precision", DefaultMinPrecision, "precision the recommended threshold must reach")
	fs.StringVar(&f.fromSink, "from-sink", "", "turn this escalation sink file into cases to label (written to --out)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "toolgate eval: %v\n\n", err)
		printUsage(stderr)
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolgate eval: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	if f.fromSink != "" {
		return fromSinkCommand(f, stdout, stderr)
	}
	switch {
	case f.cases == "":
		fmt.Fprintln(stderr, "toolgate eval: --cases is required")
		return ExitUsage
	case f.model == "":
		fmt.Fprintln(stderr, "toolgate eval: --model is required")
		return ExitUsage
	case f.concurrency < 1:
		fmt.Fprintln(stderr, "toolgate eval: --concurrency must be at least 1")
		return ExitUsage
	case !(f.minPrecision >= 0 && f.minPrecision <= 1):
		fmt.Fprintln(stderr, "toolgate eval: --min-precision must be within 0..1")
		return ExitUsage
	}
	snap, err := LoadSnapshot(f.config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed
	}
	cases, err := readCasesFile(f.cases)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", f.cases, err)
		return ExitFailed
	}
	if f.retries == 0 {
		f.retries = -1 // on the command line 0 means none
	}
	tty := IsTerminal(stderr)
	rep, err := Run(ctx, snap, cases, Options{
		Model:        f.model,
		Concurrency:  f.concurrency,
		Retries:      f.retries,
		MinPrecision: f.minPrecision,
		ResultsPath:  f.results,
		Progress:     stderr,
		Interactive:  tty,
		Log:          stderr,
	})
	if err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	if err := WriteTable(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	if f.out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(f.out, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "toolgate eval: writing the JSON report:", err)
			return ExitFailed
		}
	}
	if f.html != "" {
		var b bytes.Buffer
		err := WriteHTML(&b, rep)
		if err == nil {
			err = os.WriteFile(f.html, b.Bytes(), 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "toolgate eval: writing the HTML report:", err)
			return ExitFailed
		}
	}
	switch {
	case rep.Interrupted:
		if f.results != "" {
			fmt.Fprintf(stderr, "interrupted: %d of %d cases measured; run the same command again to continue from %s\n",
				rep.Measured, rep.Cases, f.results)
		} else {
			fmt.Fprintf(stderr, "interrupted: %d of %d cases measured; without --results a new run starts over\n", rep.Measured, rep.Cases)
		}
		return ExitInterrupted
	case rep.Errors > 0:
		fmt.Fprintf(stderr, "%d case(s) failed and are left out of the rates", rep.Errors)
		if f.results != "" {
			fmt.Fprintf(stderr, "; run the same command again to retry them")
		}
		fmt.Fprintln(stderr)
		return ExitFailed
	}
	return 0
}

func readCasesFile(path string) ([]Case, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return ReadCases(fh)
}

func fromSinkCommand(f flags, stdout, stderr io.Writer) int {
	if f.out == "" {
		fmt.Fprintln(stderr, "toolgate eval: --from-sink needs --out for the cases file")
		return ExitUsage
	}
	in, err := os.Open(f.fromSink)
	if err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	defer in.Close()
	cases, st, err := CasesFromSink(in)
	if err != nil {
		fmt.Fprintf(stderr, "toolgate eval: %s: %v\n", f.fromSink, err)
		return ExitFailed
	}
	var b bytes.Buffer
	if err := WriteCases(&b, cases); err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	// Never over an existing file: it may hold labels a person wrote.
	out, err := os.OpenFile(f.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			fmt.Fprintf(stderr, "toolgate eval: %s exists and may hold labels; choose another --out\n", f.out)
		} else {
			fmt.Fprintln(stderr, "toolgate eval:", err)
		}
		return ExitFailed
	}
	_, err = out.Write(b.Bytes())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	for _, u := range st.Unreadable {
		fmt.Fprintf(stderr, "%s: skipped %s\n", f.fromSink, u)
	}
	fmt.Fprintf(stdout, "%s: %d escalation record(s), %d with an invented tool written to %s as cases to label",
		filepath.Base(f.fromSink), st.Records, st.Cases, f.out)
	if st.NotInvented > 0 {
		fmt.Fprintf(stdout, " (%d without one skipped)", st.NotInvented)
	}
	fmt.Fprintln(stdout)
	var todo []string
	todo = append(todo, `set "expected" on every case to the right tool or "escalate"`)
	if st.WithoutIntent > 0 {
		todo = append(todo, fmt.Sprintf("write the conversation into \"messages\" for the %d case(s) whose record had no intent", st.WithoutIntent))
	}
	fmt.Fprintf(stdout, "next: %s\n", strings.Join(todo, "; "))
	return 0
}
