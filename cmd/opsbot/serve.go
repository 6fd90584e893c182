package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
)

func runServe(e *env, args []string) error {
	fs := newFlags(e, "serve", "--config FILE [--listen ADDR] [--state FILE [--init]] [--dry-run]",
		"OPSBOT_WEBHOOK_SECRET=change-me-to-a-long-secret opsbot serve --config opsbot.example.yaml",
		"opsbot serve --config /etc/opsbot/opsbot.yaml --listen 0.0.0.0:8080")
	file := fs.String("config", "opsbot.yaml", "the YAML configuration file")
	listen := fs.String("listen", "", "address to listen on (overrides $OPSBOT_LISTEN, which overrides the config's listen)")
	statePath := fs.String("state", "", "the bbolt database file (overrides $OPSBOT_STATE_PATH, which overrides the config's state_path)")
	dryRun := fs.Bool("dry-run", false, "log what would be posted to GitHub and Slack instead of posting it")
	initDB := fs.Bool("init", false, "create the database when --state or $OPSBOT_STATE_PATH names one that does not exist yet\n"+
		"(the configuration's own state_path, or a path in an empty directory, is created without it)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file until the server stops (for docs/BENCHMARKS.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(e.stderr, "opsbot serve: --log-level %q: use debug, info, warn or error\n", *logLevel)
		return exitCode(2)
	}
	log := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations}))
	if e.getenv("GOGC") == "" {
		// The live heap is small (tens of MB) and nearly all garbage is
		// request bodies: collecting at 3x instead of 2x the live heap
		// lifts ingest by a sixth for about 30 MB more at peak
		// (docs/BENCHMARKS.md). GOGC set in the environment wins.
		debug.SetGCPercent(200)
	}
	if e.getenv("GOMEMLIMIT") == "" {
		// A soft limit on the heap: past it the collector runs sooner than
		// GOGC says, so a burst of large bodies does not carry the process
		// far past its usual size (docs/BENCHMARKS.md). The live heap is
		// tens of MB; GOMEMLIMIT set in the environment wins.
		debug.SetMemoryLimit(64 << 20)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	cfg, err := config.Load(*file)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w\n(no configuration there: start from the example, opsbot serve --config opsbot.example.yaml, "+
			"or name yours with --config FILE)", err)
	}
	if err != nil {
		return fmt.Errorf("%w\n(check it with: opsbot config check --config %s)", err, *file)
	}
	if *listen == "" {
		*listen = e.getenv("OPSBOT_LISTEN") // the container image's 0.0.0.0:8080
	}
	stateFrom := "--state"
	if *statePath == "" {
		*statePath, stateFrom = e.getenv("OPSBOT_STATE_PATH"), "$OPSBOT_STATE_PATH"
	}
	if *statePath == "" || filepath.Clean(*statePath) == filepath.Clean(cfg.StatePath) {
		stateFrom = "" // the file's own state_path (a variable may name it again: the container image's)
	}
	overrides := func(c *config.Config) {
		if *listen != "" {
			c.Listen = *listen
		}
		if *statePath != "" {
			c.StatePath = *statePath
		}
		if *dryRun {
			c.DryRun = true
		}
	}
	overrides(cfg)
	secrets, probs := app.Preflight(cfg, e.getenv)
	if len(probs) > 0 {
		return fmt.Errorf("%w\n(check it with: opsbot config check --config %s)", probs, *file)
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration weakens a guard", "warning", w)
	}
	// A port in use is said before any database is made or opened.
	ln, mln, err := app.Listen(cfg)
	if err != nil {
		return err
	}
	if made, err := app.NewDatabase(cfg.StatePath, stateFrom, *initDB); err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	} else if made != "" {
		log.Info(made, "state", cfg.StatePath)
	}

	deps := app.Deps{Log: log, Secrets: secrets, Version: fullVersion(), Commit: fullCommit()}
	if e.deps != nil {
		e.deps(&deps)
	}
	return app.Run(e.ctx, cfg, deps, app.RunOptions{File: *file, Overrides: overrides, Stdout: e.stdout, Listener: ln, MetricsListener: mln})
}

// readableDurations writes durations as people read them ("1.5s",
// "230ms"), not as nanoseconds.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		d := a.Value.Duration()
		switch {
		case d >= time.Second:
			d = d.Round(time.Millisecond)
		case d >= time.Millisecond:
			d = d.Round(10 * time.Microsecond)
		}
		a.Value = slog.StringValue(d.String())
	}
	return a
}
