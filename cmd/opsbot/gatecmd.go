package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/gate"
)

func runGate(e *env, args []string) error {
	fs := newFlags(e, "gate", "--server URL --repo OWNER/REPO (--pr N --sha SHA | --event push --sha SHA) [flags]",
		"opsbot gate --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX --pr 2512 --sha $HEAD_SHA",
		"opsbot gate --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX --event push --sha $GITHUB_SHA")
	serverURL := fs.String("server", "", "the opsbot server's base URL")
	repo := fs.String("repo", "", "OWNER/REPO")
	pr := fs.Int("pr", 0, "the pull request number (pull_request events)")
	sha := fs.String("sha", "", "the head commit (pull_request) or the pushed commit (push)")
	event := fs.String("event", "pull_request", "pull_request or push")
	action := fs.String("action", "synchronize", "the pull_request action that triggered the workflow")
	output := fs.String("github-output", "", "file to append the step outputs to (default $GITHUB_OUTPUT)")
	strict := fs.Bool("strict", false, "exit 1 on any error instead of answering skip-pr-sweep=false")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the server")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *output == "" {
		*output = e.getenv("GITHUB_OUTPUT")
	}
	var ans gate.Answer
	token, err := e.apiToken()
	if err == nil {
		ans, err = askGate(e.ctx, *serverURL, token, gate.Request{Repo: *repo, PR: *pr, SHA: *sha,
			Event: *event, Action: *action}, *timeout)
	}
	var values map[string]string
	if err != nil {
		// Fail closed: an error never skips a sweep.
		values = gate.FailedOutputs("opsbot gate failed: " + err.Error())
		fmt.Fprintf(e.stdout, "::warning::opsbot gate could not get a decision, so the sweep runs: %s\n", gate.OneLine(err.Error()))
	} else {
		values = ans.Outputs()
	}
	var lines bytes.Buffer
	lines.WriteString(gate.OutputLines(values))
	e.stdout.Write(lines.Bytes())
	if *output != "" {
		f, ferr := os.OpenFile(*output, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if ferr == nil {
			_, ferr = f.Write(lines.Bytes())
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		if ferr != nil {
			fmt.Fprintf(e.stdout, "::warning::opsbot gate could not write %s: %s\n", *output, ferr)
			if err == nil {
				err = ferr
			}
		}
	}
	if err != nil && *strict {
		fmt.Fprintln(e.stderr, "opsbot gate:", err)
		return exitCode(1)
	}
	return nil
}

func askGate(ctx context.Context, serverURL, token string, req gate.Request, timeout time.Duration) (gate.Answer, error) {
	var ans gate.Answer
	switch {
	case req.Repo == "":
		return ans, fmt.Errorf("--repo is required")
	case req.SHA == "":
		return ans, fmt.Errorf("--sha is required")
	case req.Event == "pull_request" && req.PR <= 0:
		return ans, fmt.Errorf("--pr is required for a pull_request event")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := getJSON(ctx, serverURL, token, http.MethodPost, "/api/v1/gate", req, &ans)
		// 503: the server decided nothing (the PR's webhooks are still being
		// processed, or an ID token could not be checked yet); 429: this
		// token asked too often. Ask again while the timeout allows.
		var se *serverError
		if !errors.As(err, &se) || (se.code != http.StatusServiceUnavailable && se.code != http.StatusTooManyRequests) {
			if err == nil {
				err = answerFor(req, ans)
			}
			return ans, err
		}
		wait := 2 * time.Second
		if se.retryAfter > 0 {
			wait = min(se.retryAfter, 30*time.Second)
		}
		select {
		case <-ctx.Done():
			return ans, err
		case <-time.After(wait):
		}
	}
}

// answerFor checks that an answer is for what was asked (repository, event,
// PR, commit): an answer for anything else is not used.
func answerFor(req gate.Request, ans gate.Answer) error {
	sha, _ := gate.CanonicalSHA(req.SHA)
	event := req.Event
	if event == "" || event == "pull_request_target" {
		event = "pull_request"
	}
	gotEvent := ans.Event
	if gotEvent == "pull_request_target" {
		gotEvent = "pull_request"
	}
	switch {
	case !strings.EqualFold(ans.Repo, req.Repo):
		return fmt.Errorf("the server answered for repository %q, not %q: not used", ans.Repo, req.Repo)
	case gotEvent != event:
		return fmt.Errorf("the server answered for a %q event, not %q: not used", ans.Event, req.Event)
	case !strings.EqualFold(ans.SHA, sha):
		return fmt.Errorf("the server answered for commit %q, not %q: not used", ans.SHA, req.SHA)
	case event == "pull_request" && ans.PR != req.PR:
		return fmt.Errorf("the server answered for PR #%d, not #%d: not used", ans.PR, req.PR)
	}
	return nil
}
