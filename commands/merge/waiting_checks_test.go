package merge_test

import (
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A branch already up to date goes straight to its checks: a cancelled
// check does not count as failed, and the head itself is merged; nothing
// asks GitHub to update the branch.
func TestMergeWithReuseUpToDateTakesCancelledChecksAsNotFailed(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    merge:\n      min_role: write\n      method: rebase\n", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.GH.SetCheckRun(theRepo, e2e.SHA("c1"), "sweep / evals", "completed", "cancelled")
	w.Comment(maintainer, "/merge-with-reuse")
	st := w.WaitStatus("the merge", "merged")
	e2e.MustContain(t, "status", st, ", the newest real sweep run of this PR (", "up to date with its base (head `c1c1c1c`)", "🎉 merged `c1c1c1c`")
	if m := w.GH.Merges(); len(m) != 1 || m[0].SHA != e2e.SHA("c1") || m[0].Method != "rebase" {
		t.Fatalf("merges %+v; want one rebase of c1", m)
	}
	if n := w.GH.Count(routeUpdateBranch); n != 0 {
		t.Fatalf("update-branch asked %d times for a branch up to date", n)
	}
}

// A head whose checks do not exist yet waits: opsbot's own status is not
// a check, and a workflow run still queued (a check suite with no check run
// yet) keeps it waiting until it completes.
func TestMergeWithReuseWaitsForChecksToExist(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	updated := w.GH.PRHead(theRepo, thePR)
	w.SendSync(updated, "") // opsbot's own status on the update: skipped
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("waiting, with no check yet", "(none yet;")
	w.GH.SetCheckSuite(theRepo, updated, "sweep", "queued", "")
	w.PassTime(clock, merge.Poll) // read again: the queued workflow is running
	if n := len(w.GH.Merges()); n != 0 {
		t.Fatalf("merged a head whose checks did not exist: %+v", w.GH.Merges())
	}
	w.GH.SetCheckSuite(theRepo, updated, "sweep", "completed", "success")
	w.GreenChecks(updated)
	w.CheckEvent(updated)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the merge", "🎉 merged")
}

// A merge reuses its run only while its pin stands: a pin cancelled (by
// anyone allowed to pin) while the merge waits stops it before it merges;
// editing the command to another run stops it too.
func TestMergeWithReuseNeedsItsPinToMerge(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.PendingChecks()
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	w.GreenChecks(e2e.SHA("c1"))
	w.CheckEvent(e2e.SHA("c1"))
	w.PassTime(clock, merge.Poll)
	st := w.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "the pin the merge took was revoked or replaced")
	if len(w.GH.Merges()) != 0 {
		t.Fatal("merged without its pin")
	}

	w2 := mergeWorld(t, "", clock)
	w2.PendingChecks()
	c := w2.Comment(maintainer, "/merge-with-reuse 31147925932")
	w2.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
	w2.CommentEvent("edited", maintainer, maintainer, c.ID, "/merge-with-reuse 31147925933", c.Body)
	st = w2.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "@maintainer edited away the command that asked for it")
}
