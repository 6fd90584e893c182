package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// A gate ask waits (api.gate_wait) for the PR's webhooks already received;
// when they are still not processed by then, it answers 503 (retry) and
// decides nothing, so it cannot overtake a queued /reuse-sweep-run cancel;
// `opsbot gate` asks again.
func TestGateAskDoesNotOvertakeAQueuedCancel(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "  gate_wait: 200ms\n", "", nil)
	w.GH.AddUser("maint2", 5003, "User")
	w.GH.SetRole(theRepo, "maint2", "write")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Push(theRepo, thePR, []string{sha("c2")})
	// maint2's role lookup is slow: their cancel stays queued past the ask's wait.
	w.GH.Inject("GET /repos/{owner}/{repo}/collaborators/{user}/permission", githubtest.Fault{Delay: 2 * time.Second, Pass: true, Times: 1})
	c := w.GH.AddComment(theRepo, thePR, "maint2", "/reuse-sweep-run cancel")
	maint2 := user{Login: "maint2", ID: 5003, Kind: "User"}
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maint2, maint2, c.ID, c.Body, ""))

	r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "text/plain", askForm(thePR, sha("c2")))
	if r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "skip-pr-sweep=false\n") ||
		!strings.Contains(r.body, "still being processed") {
		t.Fatalf("ask while a cancel is queued = %d %s, want 503 asking to retry", r.code, r.body)
	}
	// opsbot gate asks again on 503 while its timeout allows: it gets the
	// answer made after the cancel.
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "no reuse authorization") {
		t.Fatalf("opsbot gate while the cancel is queued = %v, want the sweep decided after the cancel", out)
	}
	w.Settle()
	if tr := strings.Join(w.trail(), ","); strings.Count(tr, "decision") != 1 || !strings.Contains(tr, "pin revoked") {
		t.Fatalf("audit = %s, want the pin revoked and one decision", tr)
	}
}
