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
	f, code, ok := parseFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	if f.fromSink != "" {
		return fromSinkCommand(f, stdout, stderr)
	}
	if msg := f.measureProblem(); msg != "" {
		fmt.Fprintln(stderr, "toolgate eval: "+msg)
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
	if err == nil {
		err = writeReports(stdout, rep, f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolgate eval:", err)
		return ExitFailed
	}
	return runStatus(stderr, rep, f.results)
}

// parseFlags reads the command line. When ok is false the command ends with
// code: --help was asked for (0) or the line is wrong (ExitUsage).
func parseFlags(args []string, stdout, stderr io.Writer) (f flags, code int, ok bool) {
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
			return f, 0, false
		}
		fmt.Fprintf(stderr, "toolgate eval: %v\n\n", err)
		printUsage(stderr)
		return f, ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolgate eval: unexpected argument %q\n", fs.Arg(0))
		return f, ExitUsage, false
	}
	return f, 0, true
}

// measureProblem says what a measuring run's flags lack, or "".
func (f flags) measureProblem() string {
	switch {
	case f.cases == "":
		return "--cases is required"
	case f.model == "":
		return "--model is required"
	case f.concurrency < 1:
		return "--concurrency must be at least 1"
	case !(f.minPrecision >= 0 && f.minPrecision <= 1):
		return "--min-precision must be within 0..1"
	}
	return ""
}

// writeReports prints the table and writes the JSON and HTML reports asked
// for.
func writeReports(stdout io.Writer, rep *Report, f flags) error {
	if err := WriteTable(stdout, rep); err != nil {
		return err
	}
	if f.out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(f.out, append(b, '\n'), 0o644)
		}
		if err != nil {
			return fmt.Errorf("writing the JSON report: %w", err)
		}
	}
	if f.html != "" {
		var b bytes.Buffer
		err := WriteHTML(&b, rep)
		if err == nil {
			err = os.WriteFile(f.html, b.Bytes(), 0o644)
		}
		if err != nil {
			return fmt.Errorf("writing the HTML report: %w", err)
		}
	}
	return nil
}

// runStatus tells how a finished run ended and returns its exit code: an
// interrupted run or failed cases say how to continue.
func runStatus(stderr io.Writer, rep *Report, results string) int {
	switch {
	case rep.Interrupted:
		if results != "" {
			fmt.Fprintf(stderr, "interrupted: %d of %d cases measured; run the same command again to continue from %s\n",
				rep.Measured, rep.Cases, results)
		} else {
			fmt.Fprintf(stderr, "interrupted: %d of %d cases measured; without --results a new run starts over\n", rep.Measured, rep.Cases)
		}
		return ExitInterrupted
	case rep.Errors > 0:
		fmt.Fprintf(stderr, "%d case(s) failed and are left out of the rates", rep.Errors)
		if results != "" {
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
