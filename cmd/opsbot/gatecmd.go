package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/gate"
)

// The gate's failures come in two kinds, as in the action (actions/gate/gate.sh).
// A refusal will not pass by itself (a wrong token, an admin token, a
// short SHA, a missing flag, plain http to another host): the step fails
// (::error::, exit 1) so the mistake is seen. A transient failure (no
// answer, a 5xx or a 429 until the timeout; a push that names no commit)
// warns and the step passes, unless --strict. Either way the outputs say
// skip-pr-sweep=false and the sweep runs.
type gateFailure struct {
	refused bool
	cause   string
}

func (f *gateFailure) Error() string { return f.cause }

func gateRefusal(format string, a ...any) *gateFailure {
	return &gateFailure{refused: true, cause: fmt.Sprintf(format, a...)}
}

func gateTransient(format string, a ...any) *gateFailure {
	return &gateFailure{cause: fmt.Sprintf(format, a...)}
}

func runGate(e *env, args []string) error {
	fs := newFlags(e, "gate", "--server URL --repo OWNER/REPO (--pr N --sha SHA | --event push --sha SHA | --event merge_group --ref REF --sha SHA) [flags]",
		"opsbot gate --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX --pr 2512 --sha $HEAD_SHA",
		"opsbot gate --server https://opsbot.example.com --repo SemiAnalysisAI/InferenceX --event push --sha $GITHUB_SHA")
	serverURL := fs.String("server", "", "the opsbot server's base URL: https://, or http:// only to this machine (127.0.0.0/8, localhost, [::1])")
	repo := fs.String("repo", "", "OWNER/REPO")
	pr := fs.Int("pr", 0, "the pull request number (pull_request events)")
	sha := fs.String("sha", "", "the head commit (pull_request), the pushed commit (push) or the group's commit (merge_group), all 40 (or 64) hex digits")
	event := fs.String("event", "pull_request", "pull_request, push or merge_group")
	ref := fs.String("ref", "", "the merge group's branch, github.event.merge_group.head_ref (merge_group events)")
	action := fs.String("action", "synchronize", "the pull_request action that triggered the workflow")
	output := fs.String("github-output", "", "file to append the step outputs to (default $GITHUB_OUTPUT)")
	strict := fs.Bool("strict", false, "fail the step (exit 1) also when no decision could be had in time, not only when the ask was refused")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to keep asking a server that does not answer (retries included)")
	perr := parseFlags(fs, args)
	if errors.Is(perr, flag.ErrHelp) {
		return perr
	}
	if *output == "" {
		*output = e.getenv("GITHUB_OUTPUT")
	}
	var ans gate.Answer
	var err error
	if perr != nil {
		err = gateRefusal("the step's flags are wrong (opsbot gate --help lists them)")
	} else {
		ans, err = askGateFor(e, *serverURL, gate.Request{Repo: *repo, PR: *pr, SHA: *sha, Event: *event, Action: *action, Ref: *ref}, *timeout)
	}
	var f *gateFailure
	if err != nil && !errors.As(err, &f) {
		f = gateRefusal("%s", err.Error())
	}
	values := ans.Outputs()
	failed := false
	if f != nil {
		cause := gate.OneLine(f.cause)
		values = gate.FailedOutputs("opsbot gate failed: " + cause)
		if f.refused || *strict {
			failed = true
			fmt.Fprintf(e.stdout, "::error::opsbot gate was refused, so the sweep runs (and every push will sweep until this is fixed): %s\n",
				escapeData(cause))
			if !f.refused {
				fmt.Fprintf(e.stdout, "::error::opsbot gate could not get a decision (--strict), so the sweep runs: %s\n", escapeData(cause))
			}
		} else {
			fmt.Fprintf(e.stdout, "::warning::opsbot gate could not get a decision, so the sweep runs: %s\n", escapeData(cause))
		}
	}
	var lines bytes.Buffer
	lines.WriteString(gate.OutputLines(values))
	e.stdout.Write(lines.Bytes())
	if *output != "" {
		if err := appendFile(*output, lines.Bytes()); err != nil {
			fmt.Fprintf(e.stdout, "::error::opsbot gate could not write the step outputs to %s: %s\n", escapeData(*output), escapeData(err.Error()))
			failed = true
		}
	}
	if failed {
		return exitCode(1)
	}
	return nil
}

// askGateFor checks the ask and the transport, then asks.
func askGateFor(e *env, serverURL string, req gate.Request, timeout time.Duration) (gate.Answer, error) {
	var ans gate.Answer
	if err := checkGateServer(serverURL); err != nil {
		return ans, err
	}
	switch {
	case timeout <= 0:
		return ans, gateRefusal("--timeout %s is not a positive duration", timeout)
	case req.Repo == "":
		return ans, gateRefusal("--repo OWNER/REPO is required")
	case req.Event != "pull_request" && req.Event != "push" && req.Event != "merge_group":
		return ans, gateRefusal("--event %q: the gate answers pull_request, push and merge_group events", req.Event)
	case req.Event == "merge_group" && req.Ref == "":
		return ans, gateRefusal("--ref is required for a merge_group event (github.event.merge_group.head_ref)")
	case req.SHA == "":
		return ans, gateRefusal("--sha is required (the head commit of the PR, or the pushed commit)")
	case strings.Trim(req.SHA, "0") == "":
		// A push that deleted a branch (after = 000…0) names no commit.
		return ans, gateTransient("the %s event names no commit (--sha %s)", req.Event, req.SHA)
	case req.Event == "pull_request" && req.PR <= 0:
		return ans, gateRefusal("--pr N is required for a pull_request event")
	}
	token, err := e.apiToken()
	if err != nil {
		return ans, gateRefusal("%s", err.Error())
	}
	if token == "" {
		return ans, gateRefusal("%s", errNoToken.Error())
	}
	return askGate(e.ctx, serverURL, token, req, timeout, func(msg string) { fmt.Fprintln(e.stderr, "opsbot gate: "+msg) })
}

// checkGateServer refuses a server URL the bearer must not go to: anything
// but https, except plain http to this machine (a sidecar, tests), and any
// URL naming a user, whose host may be another than it seems.
func checkGateServer(serverURL string) error {
	if serverURL == "" {
		return gateRefusal("--server URL is required (the opsbot server's https:// address)")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return gateRefusal("--server %q is not a URL: %v", serverURL, err)
	}
	if u.User != nil {
		return gateRefusal("--server %q names a user (an @ in its host part): give the server's plain https:// URL", serverURL)
	}
	switch {
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	}
	return gateRefusal("--server %q is not an https:// URL (plain http is taken only for 127.0.0.0/8, localhost and [::1]: "+
		"the gate token would cross the network in the clear)", serverURL)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// escapeData escapes a workflow command's message (%, CR, LF).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// askGate asks until an answer that is not a connection error, a 5xx or a
// 429, backing off 1, 2, 4, 8, 10, 10 … s (or the answer's Retry-After)
// while the timeout allows; logf says each retry. Running out of time is
// transient; any other failure is a refusal.
func askGate(ctx context.Context, serverURL, token string, req gate.Request, timeout time.Duration, logf func(string)) (gate.Answer, error) {
	var ans gate.Answer
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := time.Second
	var last error // the last failure that was not the timeout itself
	giveUp := func(n int) error {
		return gateTransient("gave up after %d attempts in %s; last: %s", n, timeout, gate.OneLine(last.Error()))
	}
	for n := 1; ; n++ {
		err := getJSON(ctx, serverURL, token, http.MethodPost, "/api/v1/gate", req, &ans)
		if last == nil || ctx.Err() == nil {
			last = err
		}
		if err == nil {
			if err := answerFor(req, ans); err != nil {
				return ans, gateRefusal("%s", err.Error())
			}
			return ans, nil
		}
		var se *serverError
		isServer := errors.As(err, &se)
		if isServer && se.code != http.StatusTooManyRequests && se.code/100 != 5 {
			cause := err.Error()
			if se.code == http.StatusUnauthorized {
				cause += " (OPSBOT_API_TOKEN is not one of the server's gate tokens, api.gate_tokens_env)"
			}
			return ans, gateRefusal("%s", cause)
		}
		if !isServer && !isTransport(err) {
			return ans, gateRefusal("%s", err.Error())
		}
		pause := wait
		if isServer && se.retryAfter > 0 {
			pause = se.retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < pause {
			pause = max(time.Until(dl), 0)
		}
		if ctx.Err() != nil || pause <= 0 {
			return ans, giveUp(n)
		}
		logf(fmt.Sprintf("attempt %d: %s; retrying in %s", n, gate.OneLine(err.Error()), pause.Round(time.Millisecond)))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ans, giveUp(n)
		case <-t.C:
		}
		wait = min(wait*2, 10*time.Second)
	}
}

// isTransport reports whether err is a failure to get any answer at all
// (a refused or reset connection, a timeout), which may pass by itself.
func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded)
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
