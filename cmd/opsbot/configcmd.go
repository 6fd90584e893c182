package main

import (
	"errors"
	"fmt"

	"opsbot/config"
)

func runConfig(e *env, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprintln(e.stderr, "Usage: opsbot config check --config FILE\n\nExample:\n  opsbot config check --config opsbot.example.yaml")
			return nil
		}
		fmt.Fprintln(e.stderr, "Usage: opsbot config check --config FILE")
		return exitCode(2)
	}
	fs := newFlags(e, "config check", "--config FILE", "opsbot config check --config opsbot.example.yaml")
	file := fs.String("config", "", "the YAML configuration file")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *file == "" {
		fmt.Fprintln(e.stderr, "opsbot config check: --config FILE is required")
		return exitCode(2)
	}
	cfg, err := config.Load(*file)
	if err != nil {
		var probs config.Problems
		if errors.As(err, &probs) {
			fmt.Fprintf(e.stdout, "%s: %d problem(s):\n", *file, len(probs))
			for _, p := range probs {
				fmt.Fprintln(e.stdout, "  "+p)
			}
			return exitCode(1)
		}
		fmt.Fprintf(e.stderr, "opsbot config check: %v\n", err)
		return exitCode(1)
	}
	fmt.Fprintf(e.stdout, "%s: ok\n", *file)
	fmt.Fprintf(e.stdout, "  listen:      %s\n  state_path:  %s\n  github:      %s", cfg.Listen, cfg.StatePath, cfg.GitHub.APIURL)
	if cfg.GitHub.App != nil {
		fmt.Fprintf(e.stdout, " (GitHub App %d)\n", cfg.GitHub.App.ID)
	} else {
		fmt.Fprintf(e.stdout, " (token from $%s)\n", cfg.GitHub.TokenEnv)
	}
	fmt.Fprintf(e.stdout, "  webhook secret from $%s\n", cfg.GitHub.WebhookSecretEnv)
	if cfg.Slack.Channel != "" {
		fmt.Fprintf(e.stdout, "  slack:       %s (token from $%s)\n", cfg.Slack.Channel, cfg.Slack.TokenEnv)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(e.stdout, "  warning: "+w)
	}
	for _, r := range cfg.Repos {
		fmt.Fprintf(e.stdout, "  repo %s: sweep %s, reuse needs %s, stage needs %s, help needs %s\n",
			r.Name, r.SweepWorkflow, r.Reuse.MinRole, r.Stage.MinRole, r.Help.MinRole)
	}
	return nil
}
