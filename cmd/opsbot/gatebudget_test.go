package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// Whoever holds a gate token cannot spend opsbot's GitHub budget: asks are
// limited per credential (a burst, then 429 with Retry-After), asks for PRs
// opsbot has no record of read nothing, and a commit found not to be the
// head is answered from memory for a minute.
func TestGateAsksCannotSpendTheGitHubBudget(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/opsbot help") // opsbot now knows PR 2512
	w.GH.ResetRequests()
	limited := 0
	for i := range 80 {
		body := askForm(90000+i, sha(fmt.Sprintf("%02x", i))) // a PR opsbot never heard of
		if i%2 == 1 {
			body = askForm(thePR, sha(fmt.Sprintf("%02x", i))) // a made-up commit of a known PR
		}
		r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "text/plain", body)
		switch r.code {
		case http.StatusOK:
			if !strings.Contains(r.body, "skip-pr-sweep=false") {
				t.Fatalf("ask %d: %s", i, r.body)
			}
		case http.StatusTooManyRequests:
			limited++
			if r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "skip-pr-sweep=false") {
				t.Fatalf("a limited ask: %v %s", r.header, r.body)
			}
		default:
			t.Fatalf("ask %d: %d %s", i, r.code, r.body)
		}
	}
	if n := w.GH.Reads(); n > 20 {
		t.Fatalf("80 asks for unknown PRs and commits made %d GitHub reads, want at most 20: %v", n, w.GH.Requests())
	}
	if limited < 50 {
		t.Fatalf("%d of 80 asks were limited, want the burst (20) through and the rest refused", limited)
	}
	if m := w.Metrics(); m[`opsbot_gate_asks_total{outcome="rate_limited"}`] == "0" || m[`opsbot_gate_asks_total{outcome="unknown_pr"}`] == "0" {
		t.Errorf("gate asks counted: rate_limited %s, unknown_pr %s", m[`opsbot_gate_asks_total{outcome="rate_limited"}`],
			m[`opsbot_gate_asks_total{outcome="unknown_pr"}`])
	}
}

// A GitHub error while a pinned push is decided sweeps that push (fail
// closed) but keeps the pin: the next push is checked again and skips.
func TestGitHubErrorWhileDecidingKeepsThePin(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	const route = "GET /repos/{owner}/{repo}/actions/runs/{id}"
	w.GH.Inject(route, githubtest.Fault{Status: 403, Body: `{"message":"Resource not accessible by integration"}`})
	w.Push("c2")
	if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "the pin stays") {
		t.Fatalf("the push decided while GitHub failed: %v, want a sweep that keeps the pin", out)
	}
	mustContain(t, "reply", w.LastReply(), "GitHub did not answer", "The pin by @maintainer stays")
	w.GH.Heal(route)
	w.Push("c3")
	if out, _ := w.gate("--pr", "2512", "--sha", sha("c3")); out["skip-pr-sweep"] != "true" {
		t.Fatalf("the next push: %v, want a skip", out)
	}
	want := []string{"command reuse-sweep-run accepted", "pin active", "decision sweep", "decision skip", "pin consumed"}
	if got := w.trail(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("audit = %v, want %v", got, want)
	}
}
