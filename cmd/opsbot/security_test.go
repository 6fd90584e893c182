package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"opsbot/internal/fixtures"
)

// The end-to-end tests of docs/security.md's threat model that concern
// recovery, replays and opsbot's own identity.

// closedPayload is the `closed` (unmerged) delivery of the PR.
func (w *world) closedPayload() map[string]any {
	p := payload(w.t, "pull_request", "closed")
	setPath(p, "repository.full_name", theRepo)
	p["number"] = thePR
	setPath(p, "pull_request.number", thePR)
	setPath(p, "pull_request.merged", false)
	setPath(p, "pull_request.merge_commit_sha", "")
	setPath(p, "pull_request.head.ref", "kimi-tune")
	return p
}

// A captured `closed` delivery resent under a new delivery id (GitHub's
// signature does not cover the id) is a duplicate: it does not expire the
// pin taken after the PR was reopened.
func TestReplayedClosedDeliveryUnderANewIDDoesNotActAgain(t *testing.T) {
	w := newWorld(t, "")
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	w.gh.ClosePR(theRepo, thePR, false, "")
	captured, err := json.Marshal(w.closedPayload())
	if err != nil {
		t.Fatal(err)
	}
	if code, rep := post(t, fixtures.SignedRequest(t, w.srv.URL+"/webhook", "pull_request", "closed-1", captured, testSecret)); code != http.StatusAccepted {
		t.Fatalf("closed: %d %v", code, rep)
	}
	w.settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("closing did not expire the pin: %v", tr)
	}
	w.gh.ReopenPR(theRepo, thePR)
	reopened := payload(t, "pull_request", "reopened")
	setPath(reopened, "repository.full_name", theRepo)
	reopened["number"] = thePR
	setPath(reopened, "pull_request.number", thePR)
	setPath(reopened, "pull_request.state", "open")
	w.send("pull_request", reopened)
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("the new pin is not active: %v", tr)
	}

	code, rep := post(t, fixtures.SignedRequest(t, w.srv.URL+"/webhook", "pull_request", "closed-replayed", captured, testSecret))
	if code != http.StatusOK || rep["status"] != "duplicate" {
		t.Fatalf("the replayed closed delivery: %d %v, want 200 duplicate", code, rep)
	}
	w.settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("the replay acted: %v", tr)
	}
	w.push("c2")
	if got := w.statuses("c2"); len(got) != 1 || got[0].Description != "skip: reusing run 31147925932, authorized by @maintainer" {
		t.Fatalf("the push after the replay: %+v", got)
	}
}
