package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/SemiAnalysisAI/opsbot/reconcile"
)

func runReconcile(e *env, args []string) error {
	fs := newFlags(e, "reconcile", "--server URL --repo OWNER/REPO [--replay-since T] [--json]",
		"opsbot reconcile --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX",
		"opsbot reconcile --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX --replay-since 2026-05-04T09:00:00Z")
	serverURL := fs.String("server", "", "the running server (token from OPSBOT_API_TOKEN)")
	repo := fs.String("repo", "", "OWNER/REPO to reconcile")
	replay := fs.String("replay-since", "", "run the unseen, unedited command comments posted since then (RFC 3339, or a duration such as 2h;\n"+
		"at most 72h ago), even on the repository's first reconcile, which otherwise only records them as seen")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *serverURL == "" || *repo == "" {
		fmt.Fprintln(e.stderr, "opsbot reconcile: --server URL and --repo OWNER/REPO are required")
		return exitCode(2)
	}
	body := map[string]string{"repo": *repo}
	if *replay != "" {
		t, err := parseSince(*replay)
		if err != nil {
			fmt.Fprintf(e.stderr, "opsbot reconcile: --replay-since %q: give an RFC 3339 time (2026-05-04T09:00:00Z) or a duration (2h)\n", *replay)
			return exitCode(2)
		}
		body["replay_since"] = t.UTC().Format(time.RFC3339)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 6*time.Minute)
	defer cancel()
	var rep reconcile.Report
	token, err := e.apiToken()
	if err != nil {
		return err
	}
	if err := getJSON(ctx, *serverURL, token, http.MethodPost, "/api/v1/reconcile", body, &rep); err != nil {
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
	if len(rep.ClosesRecovered) > 0 {
		fmt.Fprintf(e.stdout, "%d closes of PRs opsbot held open taken in %v (their closed webhook was lost)\n",
			len(rep.ClosesRecovered), rep.ClosesRecovered)
	}
	if rep.ClosesCut {
		fmt.Fprintf(e.stdout, "more PRs were closed since %s than a reconcile reads: the least recently updated were not looked at\n",
			rep.Since.UTC().Format(time.RFC3339))
	}
	if rep.First {
		fmt.Fprintf(e.stdout, "first reconcile of %s: %d command comments recorded as seen, none run %v "+
			"(--replay-since T runs those posted since T)\n", rep.Repo, len(rep.CommandsRecorded), rep.CommandsRecorded)
	}
	if len(rep.CommandsNotRun) > 0 {
		fmt.Fprintf(e.stdout, "%d command comments not run: edited since posted, posted before the window or on a closed PR, "+
			"or already answered %v (see the audit for each)\n",
			len(rep.CommandsNotRun), rep.CommandsNotRun)
	}
	if len(rep.CommandsPending) > 0 {
		fmt.Fprintf(e.stdout, "%d command comments left to their webhook delivery, which is waiting in the inbox %v\n",
			len(rep.CommandsPending), rep.CommandsPending)
	}
	return nil
}
