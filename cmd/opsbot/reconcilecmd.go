package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	token := e.getenv("OPSBOT_API_TOKEN")
	if token == "" {
		return fmt.Errorf("OPSBOT_API_TOKEN is not set: export one of the server's API tokens")
	}
	body, _ := json.Marshal(map[string]string{"repo": *repo})
	ctx, cancel := context.WithTimeout(e.ctx, 6*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(*serverURL, "/")+"/api/v1/reconcile", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bad --server: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking %s: %w", *serverURL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server answered %s: %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	if *asJSON {
		_, err := e.stdout.Write(raw)
		return err
	}
	var rep reconcile.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("the server's answer is not a report: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s since %s: %d comments checked, %d lost command comments queued %v, %d pins of closed PRs handled %v\n",
		rep.Repo, rep.Since.UTC().Format(time.RFC3339), rep.CommentsChecked, len(rep.CommandsRecovered), rep.CommandsRecovered,
		len(rep.PinsOfClosedPRs), rep.PinsOfClosedPRs)
	return nil
}
