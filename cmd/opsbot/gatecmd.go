package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"opsbot/gate"
)

// The step outputs `opsbot gate` writes, in this order.
var gateOutputs = []string{"skip-pr-sweep", "reuse-enabled", "reuse-source-run-id", "reuse-source-run-attempt",
	"reuse-source-run-url", "reuse-source-pr-number", "reuse-source-head-sha", "reuse-reason"}

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
	ans, err := askGate(e.ctx, *serverURL, e.getenv("OPSBOT_API_TOKEN"), gate.Request{Repo: *repo, PR: *pr, SHA: *sha,
		Event: *event, Action: *action}, *timeout)
	values := map[string]string{}
	if err != nil {
		// Fail closed: an error never skips a sweep.
		values["skip-pr-sweep"], values["reuse-enabled"] = "false", "false"
		values["reuse-reason"] = "opsbot gate failed: " + err.Error()
		fmt.Fprintf(e.stdout, "::warning::opsbot gate could not get a decision, so the sweep runs: %s\n", oneLineText(err.Error()))
	} else {
		values["skip-pr-sweep"] = strconv.FormatBool(ans.SkipPRSweep)
		values["reuse-enabled"] = strconv.FormatBool(ans.ReuseEnabled)
		values["reuse-reason"] = ans.Reason
		if ans.RunID != 0 {
			values["reuse-source-run-id"] = strconv.FormatInt(ans.RunID, 10)
			values["reuse-source-run-attempt"] = strconv.Itoa(max(ans.RunAttempt, 1))
			values["reuse-source-run-url"] = ans.RunURL
			values["reuse-source-pr-number"] = strconv.Itoa(ans.SourcePR)
			values["reuse-source-head-sha"] = ans.RunHeadSHA
		}
	}
	var lines bytes.Buffer
	for _, k := range gateOutputs {
		fmt.Fprintf(&lines, "%s=%s\n", k, oneLineText(values[k]))
	}
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
	err := getJSON(ctx, serverURL, token, http.MethodPost, "/api/v1/gate", req, &ans)
	return ans, err
}

// oneLineText keeps a value on one output line.
func oneLineText(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
