package main

import (
	"strconv"
	"testing"
	"time"

	"opsbot/internal/githubtest"
)

// A notice that can never be sent wedges nothing: the staging
// acknowledgement is refused for good, so the callback's edit has no comment
// to edit. The edit is posted as a new comment instead, the refused
// acknowledgement is listed among the failed notices, the next push's
// commit status arrives within a second, and the idle server then makes no
// commits at all.
func TestStuckNoticeWedgesNothing(t *testing.T) {
	w := stageWorld(t, "")
	w.gh.Inject("POST /repos/{owner}/{repo}/issues/{n}/comments", githubtest.Fault{Status: 422, Times: 1})
	c := w.comment(maintainer, "/stage-results 31147925932")
	if len(w.replies()) != 0 {
		t.Fatalf("the acknowledgement was posted despite the refusal: %v", w.replies())
	}

	cb := payload(t, "repository_dispatch", "")
	cb["action"] = "stage-results-completed"
	setPath(cb, "repository.full_name", theRepo)
	cb["client_payload"] = map[string]any{"comment-id": strconv.FormatInt(c.ID, 10), "run-id": strconv.FormatInt(runR1, 10),
		"pr-number": strconv.Itoa(thePR), "stage-succeeded": true}
	postNoSettle(t, w, "repository_dispatch", cb)

	w.gh.Push(theRepo, thePR, []string{sha("c2")}, nil)
	pushed := time.Now()
	postNoSettle(t, w, "pull_request", w.syncPayload(sha("c2")))
	for len(w.statuses("c2")) == 0 {
		if time.Since(pushed) > time.Second {
			t.Fatalf("no commit status for the next push within a second: the PR's notices are stuck behind the edit")
		}
		time.Sleep(5 * time.Millisecond)
	}

	w.settle()
	mustContain(t, "the edit, posted as a new comment", w.lastReply(), "@maintainer staged run [31147925932]")
	out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.srv.URL, "--failed-notices", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "failed notices", out, `"kind": "comment"`, "staging run", "422")

	commits := w.metrics()["opsbot_commit_seconds_count"]
	// An idle window is what is measured here: nothing is awaited.
	time.Sleep(500 * time.Millisecond)
	if got := w.metrics()["opsbot_commit_seconds_count"]; got != commits {
		t.Fatalf("an idle server committed: %s commits, then %s half a second later", commits, got)
	}
}
