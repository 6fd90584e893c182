package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
)

func runConfig(e *env, args []string) error {
	const synopsis = "check --config FILE [--no-env]"
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
			fmt.Fprintln(e.stdout, "Usage: opsbot config "+synopsis+"\n\nExamples:\n  opsbot config check --config opsbot.example.yaml\n"+
				"  opsbot config check --config deploy/opsbot.yaml --no-env   # CI: the file alone, no secrets needed")
			return nil
		}
		unknownSubcommand(e, "config", args, "check")
		fmt.Fprintln(e.stderr, "Usage: opsbot config "+synopsis)
		return exitCode(2)
	}
	fs := newFlags(e, "config check", "--config FILE [--no-env]", "opsbot config check --config opsbot.example.yaml",
		"opsbot config check --config deploy/opsbot.yaml --no-env   # CI: the file alone, no secrets needed")
	file := fs.String("config", "", "the YAML configuration file")
	noEnv := fs.Bool("no-env", false, "check the file alone: not the environment variables and secrets it names, nor the files it names on this\n"+
		"machine (state_path's directory, the TLS pair, the GitHub App's key); for linting a configuration in CI")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *file == "" {
		fmt.Fprintln(e.stderr, "opsbot config check: --config FILE is required")
		return exitCode(2)
	}
	load := config.Load
	if *noEnv {
		load = config.LoadFileOnly
	}
	cfg, err := load(*file)
	if err != nil {
		var probs config.Problems
		if errors.As(err, &probs) {
			printProblems(e, probs)
			fmt.Fprintf(e.stdout, "%s: %d problem(s): opsbot serve would refuse this file\n", *file, len(probs))
			return exitCode(1)
		}
		fmt.Fprintf(e.stderr, "opsbot config check: %v\n", err)
		return exitCode(1)
	}
	var probs config.Problems
	if !*noEnv {
		// As serve does: the environment overrides the file's listen and
		// state_path (the container image sets OPSBOT_LISTEN).
		stateFrom := ""
		if v := e.getenv("OPSBOT_STATE_PATH"); v != "" && filepath.Clean(v) != filepath.Clean(cfg.StatePath) {
			stateFrom = "$OPSBOT_STATE_PATH"
		}
		for _, o := range []struct {
			variable string
			field    *string
		}{{"OPSBOT_LISTEN", &cfg.Listen}, {"OPSBOT_STATE_PATH", &cfg.StatePath}} {
			if v := e.getenv(o.variable); v != "" {
				*o.field = v
				fmt.Fprintf(e.stdout, "  $%s overrides the file: %s\n", o.variable, v)
			}
		}
		_, probs = app.Preflight(cfg, e.getenv)
		// The database serve would refuse to create (serve --init creates it).
		if _, err := app.NewDatabase(cfg.StatePath, stateFrom, false); err != nil {
			probs = append(probs, err.Error())
		}
	}
	fmt.Fprintf(e.stdout, "%s:\n", *file)
	fmt.Fprintf(e.stdout, "  listen:      %s\n  state_path:  %s\n  github:      %s", cfg.Listen, cfg.StatePath, cfg.GitHub.APIURL)
	switch {
	case cfg.GitHub.App != nil:
		fmt.Fprintf(e.stdout, " (GitHub App %d)\n", cfg.GitHub.App.ID)
	case cfg.GitHub.TokenEnv != "":
		fmt.Fprintf(e.stdout, " (token from $%s)\n", cfg.GitHub.TokenEnv)
	default:
		fmt.Fprintln(e.stdout, " (no credentials: neither github.token_env nor github.app is set)")
	}
	tok, _ := config.SecretValue(e.getenv, cfg.GitHub.TokenEnv)
	switch {
	case cfg.DryRun:
		fmt.Fprintln(e.stdout, "  dry run:     on (dry_run is set): notices are logged, not posted, to GitHub and to Slack alike")
	case *noEnv:
	case cfg.GitHub.App == nil && (cfg.GitHub.TokenEnv == "" || strings.TrimSpace(tok) == ""):
		fmt.Fprintln(e.stdout, "  dry run:     on: "+app.NoTokenSaying(cfg))
	default:
		fmt.Fprintln(e.stdout, "  dry run:     off: notices are posted to GitHub")
	}
	fmt.Fprintf(e.stdout, "  webhook secret from $%s\n", cfg.GitHub.WebhookSecretEnv)
	if cfg.GitHub.BotLogin != "" || cfg.GitHub.BotUserID != 0 {
		fmt.Fprintln(e.stdout, "  note: github.bot_login and bot_user_id are no longer needed: opsbot learns its own account from GitHub at start"+
			" (they are used only in a dry run without credentials)")
	}
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
	if *noEnv {
		fmt.Fprintf(e.stdout, "%s: ok: the file alone is valid (--no-env: the environment, its secrets and the files it names here were not checked)\n", *file)
		return nil
	}
	reportEnvironment(e, cfg)
	if len(probs) > 0 {
		printProblems(e, probs)
		fmt.Fprintf(e.stdout, "%s: %d problem(s): the file is valid, but opsbot serve would not start in this environment\n", *file, len(probs))
		return exitCode(1)
	}
	fmt.Fprintf(e.stdout, "%s: ok: opsbot serve would start with it in this environment\n", *file)
	return nil
}

func printProblems(e *env, probs config.Problems) {
	fmt.Fprintf(e.stdout, "%d problem(s):\n", len(probs))
	for _, p := range probs {
		fmt.Fprintln(e.stdout, "  "+p)
	}
}

// reportEnvironment says, for each environment variable the configuration
// names, whether it (or its VAR_FILE twin) is set here and what opsbot does
// without it, and returns how many unset ones stop opsbot serve from
// starting (preflight reports those as problems too). Values are never
// printed, nor files read.
func reportEnvironment(e *env, cfg *config.Config) int {
	type named struct{ key, variable, without string }
	vars := []named{
		{"github.webhook_secret_env", cfg.GitHub.WebhookSecretEnv, "opsbot serve refuses to start"},
	}
	if cfg.GitHub.TokenEnv != "" {
		vars = append(vars, named{"github.token_env", cfg.GitHub.TokenEnv, "GitHub dry-run: notices are logged, not posted; every command is answered 'permission could not be checked'"})
	}
	if cfg.API.GateTokensEnv != "" {
		vars = append(vars, named{"api.gate_tokens_env", cfg.API.GateTokensEnv, "only GitHub Actions ID tokens may ask the gate"})
	}
	if cfg.API.AdminTokensEnv != "" {
		vars = append(vars, named{"api.admin_tokens_env", cfg.API.AdminTokensEnv, "the audit, backup and reconcile APIs are refused"})
	}
	if cfg.API.TokensEnv != "" {
		vars = append(vars, named{"api.tokens_env", cfg.API.TokensEnv, "no legacy token is accepted"})
	}
	if cfg.Slack.TokenEnv != "" {
		vars = append(vars, named{"slack.token_env", cfg.Slack.TokenEnv, "Slack dry-run: messages are logged, not posted"})
	}
	if cfg.AuditWeb.Enabled {
		vars = append(vars, named{"audit_web.user_env", cfg.AuditWeb.UserEnv, "opsbot serve refuses to start"},
			named{"audit_web.password_env", cfg.AuditWeb.PasswordEnv, "opsbot serve refuses to start"})
	}
	fmt.Fprintln(e.stdout, "  environment:")
	unset, stops := 0, 0
	for _, v := range vars {
		switch {
		case strings.TrimSpace(e.getenv(v.variable)) != "":
			fmt.Fprintf(e.stdout, "    $%s (%s): set\n", v.variable, v.key)
			continue
		case e.getenv(v.variable+"_FILE") != "":
			fmt.Fprintf(e.stdout, "    $%s (%s): set, from the file $%s_FILE names\n", v.variable, v.key, v.variable)
			continue
		}
		unset++
		if strings.Contains(v.without, "refuses to start") {
			stops++
		}
		fmt.Fprintf(e.stdout, "    $%s (%s): UNSET here: %s\n", v.variable, v.key, v.without)
	}
	if unset > 0 {
		fmt.Fprintf(e.stdout, "  %d named variable(s) unset in this environment: set them where opsbot serve runs\n", unset)
	}
	return stops
}
