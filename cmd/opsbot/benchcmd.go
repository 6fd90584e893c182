package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"opsbot/loadgen"
)

func runBench(e *env, args []string) error {
	fs := newFlags(e, "bench", "--scenario ingest|commands|gate|mixed|scale|fsync [flags]",
		"opsbot bench --scenario ingest --concurrency 64 --duration 30s",
		"opsbot bench --scenario commands --rate 100 --duration 30s --json",
		"opsbot bench --scenario scale --scale-prs 100000 --scale-audit 1000000")
	scenario := fs.String("scenario", "ingest", "ingest, commands, gate, mixed, scale or fsync")
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the opsbot binary to start as the server: %w", err)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "opsbot-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	results, err := loadgen.Run(e.ctx, loadgen.Options{Scenario: *scenario, Concurrency: *conc, Rate: *rate, Duration: *dur,
		BodySize: *size, PRs: *prs, Exe: exe, Dir: *dir, Log: e.stderr, ScalePRs: *scalePRs, ScaleAudit: *scaleAudit, CPUProfile: *profile})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 2, 2, ' ', 0)
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
