package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"opsbot/reconcile"
)

func runReconcile(e *env, args []string) error {
	fs := newFlags(e, "reconcile", "--server URL --repo OWNER/REPO [--json]",
		"opsbot reconcile --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX")
	serverURL := fs.String("server", "", "the running server (token from OPSBOT_API_TOKEN)")
	repo := fs.String("repo", "", "OWNER/REPO to reconcile")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *serverURL == "" || *repo == "" {
		fmt.Fprintln(e.stderr, "opsbot reconcile: --server URL and --repo OWNER/REPO are required")
		return exitCode(2)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 6*time.Minute)
	defer cancel()
	var rep reconcile.Report
	token, err := e.apiToken()
	if err != nil {
		return err
	}
	if err := getJSON(ctx, *serverURL, token, http.MethodPost, "/api/v1/reconcile",
		map[string]string{"repo": *repo}, &rep); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(e.stdout, "%s since %s: %d comments checked, %d lost command comments queued %v, %d pins of closed PRs handled %v\n",
		rep.Repo, rep.Since.UTC().Format(time.RFC3339), rep.CommentsChecked, len(rep.CommandsRecovered), rep.CommandsRecovered,
		len(rep.PinsOfClosedPRs), rep.PinsOfClosedPRs)
	return nil
}
