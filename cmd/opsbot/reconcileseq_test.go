package main

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A lost `deleted` webhook of the comment that started a live sequence is
// recovered by reconcile, as it is for a comment that made an active pin:
// an approval under way is revoked before it dispatches anything, and a
// merge whose pin the update's push has used (so no active pin leads to the
// comment) stops before it merges.
func TestReconcileTakesBackASequenceWhoseCommentWasDeleted(t *testing.T) {
	t.Parallel()
	t.Run("an approval under way", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := approveWorld(t, "", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
		c := w.Comment(maintainer, "/approve-sweep "+sha("c1"))
		w.WaitApproval("waiting for the merge commit", "GitHub is still making")
		w.GH.DeleteComment(c.ID) // its webhook never comes
		rep := w.reconcile()
		if got := ids(rep, "sequences_taken_back"); len(got) != 1 || got[0] != thePR {
			t.Fatalf("reconcile report %v; want PR %d's approval taken back", rep, thePR)
		}
		w.WaitApproval("the approval revoked", "revoked:")
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
		clock.Add(time.Hour)
		w.Settle()
		if n := len(w.GH.WorkflowDispatches()); n != 0 {
			t.Fatalf("%d dispatches for an approval whose comment was deleted", n)
		}
	})
	t.Run("a merge after its pin was used", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
		c := w.Comment(maintainer, "/merge-with-reuse 31147925932")
		w.WaitStatus("the update asked", "update asked")
		updated := w.GH.PRHead(theRepo, thePR)
		w.GH.SetCheckRun(theRepo, updated, "lint", "in_progress", "")
		w.SendSync(updated, "") // the update's push uses the pin
		w.PassTime(clock, record.WakeGap)
		w.WaitStatus("waiting for the checks", "waiting for the checks of `"+updated[:7]+"`")
		w.GH.DeleteComment(c.ID) // its webhook never comes
		rep := w.reconcile()
		if got := ids(rep, "sequences_taken_back"); len(got) != 1 || got[0] != thePR {
			t.Fatalf("reconcile report %v; want PR %d's merge taken back", rep, thePR)
		}
		w.WaitStatus("the merge stopped", "⛔ stopped: someone (found by recovery: a lost webhook) deleted the comment that asked for it")
		w.GH.SetCheckRun(theRepo, updated, "lint", "completed", "success")
		clock.Add(time.Minute)
		w.CheckEvent(updated)
		if m := w.GH.Merges(); len(m) != 0 {
			t.Fatalf("merged %+v after its comment was deleted", m)
		}
	})
}

// A deletion whose webhook came and was processed is not recovered again:
// someone below the command's role deleted the approval's comment, the
// approval was kept (audited), and a reconcile, which finds the comment
// gone, does not revoke it in the webhook's place.
func TestReconcileLeavesAKeptTakeBack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
	c := w.Comment(maintainer, "/approve-sweep "+sha("c1"))
	w.WaitApproval("waiting for the merge commit", "GitHub is still making")
	w.GH.DeleteComment(c.ID)
	w.CommentEvent("deleted", maintainer, reader, c.ID, c.Body, "") // a reader's deletion: kept
	rep := w.reconcile()
	if got, _ := rep["sequences_taken_back"].([]any); len(got) != 0 {
		t.Fatalf("reconcile took back %v after the deletion's webhook was processed", got)
	}
	if st := w.ApprovalStatus(); strings.Contains(st, "revoked:") {
		t.Fatalf("reconcile revoked an approval the deletion's webhook kept:\n%s", st)
	}
	var kept bool
	for _, r := range w.audit() {
		kept = kept || (r["kind"] == "approval" && r["outcome"] == "kept")
	}
	if !kept {
		t.Fatalf("the reader's deletion is not audited as kept: %v", w.trail())
	}
}
