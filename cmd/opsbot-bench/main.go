// Command opsbot-bench load-tests an opsbot server on this machine: it
// starts a fake GitHub, starts the opsbot binary (--opsbot) as the server,
// sends it signed payloads and reports throughput and latency
// (docs/BENCHMARKS.md). It is its own command so that the production
// binary links neither the load generator nor the fake GitHub's load.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/flagdoc"
	"github.com/SemiAnalysisAI/opsbot/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	default:
		fmt.Fprintln(os.Stderr, "opsbot-bench:", err)
		os.Exit(1)
	}
}

// exitCode ends the program with that status and no further message.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

const synopsis = "Usage: opsbot-bench --opsbot PATH --scenario ingest|commands|gate|mixed|scale|burst|fsync [flags]"

var examples = []string{
	"go build -o opsbot ./cmd/opsbot && go build -o opsbot-bench ./cmd/opsbot-bench",
	"./opsbot-bench --opsbot ./opsbot --scenario ingest --concurrency 64 --duration 30s   # also measures the reference receiver",
	"./opsbot-bench --opsbot ./opsbot --scenario commands --rate 0.5 --duration 60s --json",
	"./opsbot-bench --opsbot ./opsbot --scenario scale --scale-prs 100000 --scale-audit 1000000",
	"./opsbot-bench --opsbot ./opsbot --scenario burst --burst 500 --time-scale 60",
}

// run is the whole program. --help prints the usage on stdout and
// succeeds; a bad flag prints it on stderr and exits 2.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && args[0] == loadgen.FloorArg {
		// The reference receiver, as the ingest scenario starts it.
		return loadgen.ServeFloor(ctx, stdout)
	}
	fs := flag.NewFlagSet("opsbot-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "%s\n\nFlags:\n", synopsis)
		flagdoc.PrintDefaults(w, fs)
		fmt.Fprintf(w, "\nExamples:\n  %s\n", strings.Join(examples, "\n  "))
	}
	opsbot := fs.String("opsbot", "", "the opsbot binary to start as the server (default: opsbot beside this program, else on $PATH)")
	scenario := fs.String("scenario", "ingest", "ingest, commands, gate, mixed, scale, burst or fsync")
	perMinute := fs.Int("content-per-minute", 0, "content-creating requests allowed per minute (default: GitHub's 80 for commands and burst, unlimited otherwise)")
	perHour := fs.Int("content-per-hour", 0, "content-creating requests allowed per hour (default: GitHub's 500 for commands and burst)")
	timeScale := fs.Float64("time-scale", 0, "shorten the rate windows by this factor (default 60 for burst, 1 otherwise)")
	burst := fs.Int("burst", 500, "burst: command comments posted at once on one PR")
	conc := fs.Int("concurrency", 64, "connections sending at once (closed loop)")
	rate := fs.Float64("rate", 100, "requests per second for commands and synchronize (open loop)")
	dur := fs.Duration("duration", 30*time.Second, "how long to send")
	size := fs.Int("body-size", 15<<10, "bytes of an ingest delivery")
	prs := fs.Int("prs", 1000, "PRs in the fake repository")
	scalePRs := fs.Int("scale-prs", 100000, "scale: PRs in the prebuilt state")
	scaleAudit := fs.Int("scale-audit", 1000000, "scale: audit records in the prebuilt state")
	dir := fs.String("dir", "", "working directory for the state (default: a new temporary one)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	profile := fs.String("server-cpuprofile", "", "have the server write a CPU profile to this file")
	floor := fs.Bool("floor", true, "ingest: first measure a reference receiver that checks the signature and answers 202, storing nothing, and report opsbot's rate and p99 against it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil
		}
		fmt.Fprintf(stderr, "opsbot-bench: %v\n\n", err)
		usage(stderr)
		return exitCode(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "opsbot-bench: unexpected argument %q\n\n", fs.Arg(0))
		usage(stderr)
		return exitCode(2)
	}
	exe, err := findOpsbot(*opsbot)
	if err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "opsbot-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	var floorCmd []string
	if *floor && *scenario == "ingest" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this program to start the reference receiver: %w (or pass --floor=false)", err)
		}
		floorCmd = []string{self, loadgen.FloorArg}
	}
	results, err := loadgen.Run(ctx, loadgen.Options{FloorCommand: floorCmd, Scenario: *scenario, Concurrency: *conc, Rate: *rate, Duration: *dur,
		BodySize: *size, PRs: *prs, Exe: exe, Dir: *dir, Log: stderr, ScalePRs: *scalePRs, ScaleAudit: *scaleAudit, CPUProfile: *profile,
		ContentPerMinute: *perMinute, ContentPerHour: *perHour, TimeScale: *timeScale, Burst: *burst})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tREQUESTS\tERRORS\tPER SECOND\tP50 ms\tP90 ms\tP99 ms\tMAX ms\tOTHER")
	for _, r := range results {
		other := ""
		for k, v := range r.Extra {
			other += fmt.Sprintf("%s=%.2f ", k, v)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\n", r.Scenario, r.Requests, r.Errors, r.Throughput,
			r.P50ms, r.P90ms, r.P99ms, r.MaxMs, other)
	}
	return tw.Flush()
}

// findOpsbot returns the server binary to start: the --opsbot flag, else
// an opsbot beside this program, else one on $PATH.
func findOpsbot(flagged string) (string, error) {
	if flagged != "" {
		if _, err := os.Stat(flagged); err != nil {
			return "", fmt.Errorf("--opsbot %s: %w (build it with: go build -o opsbot ./cmd/opsbot)", flagged, err)
		}
		return flagged, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "opsbot")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	if p, err := exec.LookPath("opsbot"); err == nil {
		return p, nil
	}
	return "", errors.New("no opsbot binary to start as the server: build one (go build -o opsbot ./cmd/opsbot) and pass --opsbot ./opsbot")
}
