package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The race between reconcile and a comment's `created` delivery still
// waiting in the inbox (docs/security.md): a maintainer's cancel must not
// be dropped by a reconcile that runs meanwhile.

const permissionRoute = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"

// reconcileNow asks for a reconcile and returns its report without waiting
// for the inbox to drain (a delivery in it is held).
func (w *world) reconcileNow() map[string]any {
	w.T.Helper()
	out, errOut, err := runCLI(w.T, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo, "--json")
	if err != nil {
		w.T.Fatalf("reconcile: %v %s", err, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.T.Fatalf("reconcile report: %v\n%s", err, out)
	}
	return rep
}

// waitFor waits for a held request to arrive at the fake GitHub.
func waitFor(t *testing.T, arrived <-chan struct{}, what string) {
	t.Helper()
	testkit.Arrives(t, arrived, what)
}

// cancelWhileHeld pins with one maintainer's comment, then has a second
// maintainer (whose role opsbot has not looked up yet) post
// `/reuse-sweep-run cancel`; its delivery is stored and its processing
// waits on the role read. It returns the cancel comment and the release.
func cancelWhileHeld(w *world) (githubtest.Comment, func()) {
	w.T.Helper()
	m2 := user{Login: "maintainer2", ID: 5003, Kind: "User"}
	w.GH.AddUser(m2.Login, m2.ID, "User")
	w.GH.SetRole(theRepo, m2.Login, "write")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	if n := countPinActive(w.trail()); n != 1 {
		w.T.Fatalf("trail = %v, want the pin", w.trail())
	}
	arrived, release := w.GH.Hold(permissionRoute)
	w.T.Cleanup(release)
	c := w.GH.AddComment(theRepo, thePR, m2.Login, "/reuse-sweep-run cancel")
	postNoSettle(w.T, w, "issue_comment", w.CommentPayload("created", m2, m2, c.ID, c.Body, ""))
	waitFor(w.T, arrived, "the cancel's role read")
	return c, release
}

// wantCancelled checks the pin was revoked by the cancel, once, and that
// the next push sweeps.
func (w *world) wantCancelled() {
	w.T.Helper()
	tr := w.trail()
	revoked := 0
	for _, s := range tr {
		if s == "pin revoked" {
			revoked++
		}
	}
	if revoked != 1 {
		w.T.Fatalf("trail = %v, want the pin revoked once by the cancel", tr)
	}
	mustContain(w.T, "the cancel's reply", w.LastReply(), "@maintainer2")
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || !strings.HasPrefix(got[0].Description, "sweep") {
		w.T.Fatalf("push c2 = %+v, want a sweep: the maintainer cancelled the pin", got)
	}
}

// A reconcile that runs while a cancel's delivery is stored and waiting
// (here on a slow role read) leaves the comment to it, whatever the
// reconcile would have decided: a repository's first reconcile (which
// records what it finds) or a failed read of the comment's reactions (which
// does not run it). The delivery then revokes the pin and the next push
// sweeps.
func TestReconcileLeavesAWaitingDeliveryItsComment(t *testing.T) {
	t.Parallel()
	t.Run("first reconcile", func(t *testing.T) {
		w := newWorld(t, "")
		c, release := cancelWhileHeld(w)
		rep := w.reconcileNow()
		if rep["first"] != true || len(ids(rep, "commands_recorded")) != 0 || !slices.Equal(ids(rep, "commands_pending"), []int64{c.ID}) {
			t.Fatalf("reconcile = %v, want a first reconcile leaving comment %d to its delivery", rep, c.ID)
		}
		release()
		w.Settle()
		if tr := w.recoveryTrail(); slices.Contains(tr, "recorded "+itoa64(c.ID)) {
			t.Fatalf("recovery audit = %v: the waiting comment was recorded", tr)
		}
		w.wantCancelled()
	})
	t.Run("reactions unreadable", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c, release := cancelWhileHeld(w)
		w.GH.Inject("GET /repos/{owner}/{repo}/issues/comments/{id}/reactions", githubtest.Fault{Status: 404, Times: 1})
		rep := w.reconcileNow()
		if len(ids(rep, "commands_not_run")) != 0 || !slices.Equal(ids(rep, "commands_pending"), []int64{c.ID}) {
			t.Fatalf("reconcile = %v, want comment %d left to its delivery", rep, c.ID)
		}
		release()
		w.Settle()
		w.wantCancelled()
	})
}

// The other order: a reconcile that finds the cancel before its delivery
// arrives recovers it (queued under recovery's own id), and the delivery
// that comes after runs nothing more: the pin is revoked once.
func TestReconcileBeforeTheDeliveryRunsTheCancelOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	m2 := user{Login: "maintainer2", ID: 5003, Kind: "User"}
	w.GH.AddUser(m2.Login, m2.ID, "User")
	w.GH.SetRole(theRepo, m2.Login, "write")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	c := w.GH.AddComment(theRepo, thePR, m2.Login, "/reuse-sweep-run cancel")
	w.GH.SetCommentTime(c.ID, time.Now().Add(-time.Minute))
	rep := w.reconcile()
	if !slices.Equal(ids(rep, "commands_recovered"), []int64{c.ID}) {
		t.Fatalf("reconcile = %v, want comment %d recovered", rep, c.ID)
	}
	w.Send("issue_comment", w.CommentPayload("created", m2, m2, c.ID, c.Body, ""))
	w.wantCancelled()
}
