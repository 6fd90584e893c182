package merge_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// gateSwept says the gate's last opsbot/sweep-gate status on commit name
// says it sweeps.
func (w *world) gateSwept(name string) bool {
	var last string
	for _, st := range w.Statuses(name) {
		if st.Context == "opsbot/sweep-gate" {
			last = st.Description
		}
	}
	return strings.HasPrefix(last, "sweep")
}

// A merge's pin covers only GitHub's own merge of the base into the head
// opsbot read, by its content: whoever can push to the branch can have
// GitHub sign a commit with the parents opsbot recorded (the Git database
// API with a workflow's token) and any tree. Such a commit sweeps and
// stops the merge; a commit with those parents and the very tree GitHub's
// merge makes is that merge, whoever made it. A refused update (a fork
// GitHub will not update) revokes the pin: no push made by hand is one the
// pin covers.
func TestMergeWithReusePinCoversOnlyTheContentOfGitHubsMerge(t *testing.T) {
	t.Parallel()
	crafted := e2e.SHA("e1")
	t.Run("a crafted merge instead of the update", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "    main_sweeps: false\n", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
		// GitHub takes the update (202) and has not pushed it yet.
		w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 202, Body: `{"message":"Updating pull request branch."}`})
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		w.WaitStatus("the update asked", "update asked")
		w.GH.CraftMerge(theRepo, thePR, crafted, e2e.SHA("b0"), "f00dbabe00000000000000000000000000000000", "benchmarks/kimi.sh")
		w.GreenChecks(crafted)
		w.SendSync(crafted, "")
		if !w.gateSwept("e1") {
			t.Fatalf("the crafted merge's status = %+v; want a sweep", w.Statuses("e1"))
		}
		w.PassTime(clock, record.WakeGap)
		w.WaitStatus("the merge stopped", "⛔ stopped", "did not reuse run 31147925932")
		if m := w.GH.Merges(); len(m) != 0 {
			t.Fatalf("merged %+v: a crafted commit was taken for GitHub's update", m)
		}
		w.ClosedMerged(e2e.SHA("e2"))
		if out := w.GateFlags("--event", "push", "--sha", e2e.SHA("e2")); out["reuse-enabled"] == "true" {
			t.Fatalf("the push to main after a crafted merge reused a run: %v", out)
		}
	})
	t.Run("GitHub's own merge, by its content", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
		w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 202, Body: `{"message":"Updating pull request branch."}`})
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		w.WaitStatus("the update asked", "update asked")
		// The maintainer pressed GitHub's own "Update branch": the same merge.
		w.GH.CraftMerge(theRepo, thePR, crafted, e2e.SHA("b0"), "")
		w.GreenChecks(crafted)
		w.SendSync(crafted, "")
		if w.gateSwept("e1") {
			t.Fatalf("GitHub's merge of the recorded parents swept: %+v", w.Statuses("e1"))
		}
		w.PassTime(clock, record.WakeGap)
		w.WaitStatus("the merge", "🎉 merged `e1e1e1e`")
	})
	t.Run("a refused update revokes the pin", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
		w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 422, Body: `{"message":"Cannot update the branch of a fork you cannot push to"}`})
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		w.WaitStatus("the merge stopped", "⛔ stopped: GitHub refused to update the branch", "then pin a run again", "revoked")
		w.GH.CraftMerge(theRepo, thePR, crafted, e2e.SHA("b0"), "f00dbabe00000000000000000000000000000000")
		w.SendSync(crafted, "")
		if !w.gateSwept("e1") {
			t.Fatalf("a push after a refused update = %+v; want a sweep: the merge's pin covers no push made by hand", w.Statuses("e1"))
		}
	})
}

// A cancel stored while the merge's step reads the checks goes first: the
// step, before it merges, sees the cancel waiting for the PR and yields;
// the cancel stops the merge and revokes its pin, and nothing is merged.
func TestMergeWithReuseYieldsToACancelBeforeMerging(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	// The first read of the checks marks the merge; the second, in the
	// step that asks it, is held while the cancel comes.
	arrived, release := w.GH.HoldAfter(routeCheckRuns, 1)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the merging step reads the checks")
	cancel := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse cancel")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, cancel.ID, cancel.Body, ""))
	release()
	w.WaitStatus("the merge cancelled", "⛔ stopped: cancelled by @maintainer")
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("merged %+v after an acknowledged cancel", m)
	}
	e2e.MustContain(t, "cancel's reply", strings.Join(w.Replies(), "\n"), "@maintainer cancelled the merge of this PR asked by @maintainer")
	if !w.PinRevoked() {
		t.Fatalf("the merge's pin was not revoked: %v", w.Trail())
	}
}

// A merge GitHub made whose answer was lost (a proxy's 502) is merged: the
// client never sends a merge again (sent again, GitHub answers 405 "not
// mergeable", which read as a refusal revoked the pin); the PR read again
// shows it merged at the decided head, its pin stands, and the push to
// the default branch reuses the run.
func TestMergeWithReuseLostAnswerIsReadNotResent(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.GH.Inject(routeMerge, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	testkit.Eventually(t, "the merge asked", func() bool { return w.GH.Count(routeMerge) == 1 })
	w.PassTime(clock, merge.MergeWait)
	st := w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge was asked %d times; want once", n)
	}
	if strings.Contains(st, "refused") || w.PinRevoked() {
		t.Fatalf("a merge GitHub made was taken as refused:\n%s\n%v", st, w.Trail())
	}
	m := w.GH.Merges()
	w.ClosedMerged(m[0].Commit)
	if out := w.GateFlags("--event", "push", "--sha", m[0].Commit); out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("push gate after the merge = %v", out)
	}
}

// A crash right after GitHub merged, before opsbot wrote the step: the head
// being merged was recorded before the merge was asked, so the restart
// finds the PR merged at that head, says so, and keeps the pin (before, it
// took the merge for someone else's and revoked the pin).
func TestMergeWithReuseCrashAfterGitHubMerged(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GreenChecks(e2e.SHA("c1"))
	arrived, release := w.GH.HoldAnswer(routeMerge)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "GitHub merged")
	w.Srv.Stop(t) // the step never wrote what GitHub did
	release()
	w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
	w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge was asked %d times; want once", n)
	}
	if w.PinRevoked() {
		t.Fatalf("the pin of a merge opsbot made was revoked: %v", w.Trail())
	}
	m := w.GH.Merges()
	w.ClosedMerged(m[0].Commit)
	if out := w.GateFlags("--event", "push", "--sha", m[0].Commit); out["reuse-enabled"] != "true" {
		t.Fatalf("push gate after the merge = %v", out)
	}
}

// A merge lands on the default branch, recorded when the command runs: a
// PR into another branch is refused at once, and one its author retargets
// before the merge's first step stops there (before, the base was read at
// the first step, and the PR merged into the branch the author chose).
func TestMergeWithReuseKeepsTheDefaultBranch(t *testing.T) {
	t.Parallel()
	t.Run("a PR into another branch", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "", clock)
		w.GreenChecks(e2e.SHA("c1"))
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.BaseRef = "release" })
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		e2e.MustContain(t, "reply", w.LastReply(), "I did not start the merge: this PR merges into `release`, not the default branch `main`")
		if st := w.MergeStatus(); st != "" || len(w.GH.Merges()) != 0 {
			t.Fatalf("a merge into another branch started: %s", st)
		}
	})
	t.Run("retargeted before the first step", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		// No wake-up runs until the restart: the retarget comes between the
		// command and the merge's first step.
		w := newWorldOpts(t, worldOpts{Repo: "    merge:\n      min_role: write\n", Deps: func(d *app.Deps) {
			d.Now, d.SeqEvery = clock.Now, time.Hour
		}})
		w.GreenChecks(e2e.SHA("c1"))
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.BaseRef = "release" })
		w.Srv.Stop(t)
		w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond })
		w.WaitStatus("the merge stopped", "⛔ stopped: the PR now merges into `release`, not `main`")
		if m := w.GH.Merges(); len(m) != 0 {
			t.Fatalf("merged %+v into the branch the author chose", m)
		}
	})
}

// A merge takes only a skip made on its own pin for the update's push: a
// user who may pin but not merge replaces the merge's pin with a plain pin
// of the same run (which covers any push), then pushes a commit GitHub
// signed with the head as its first parent and any content; the plain pin
// skips it, and the merge stops instead of merging it.
func TestMergeWithReuseTakesNoSkipMadeOnAnotherPin(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    main_sweeps: false\n    merge:\n      min_role: maintain\n", clock)
	w.GH.SetRole(theRepo, maintLog, "maintain")
	writer := user{Login: "writer", ID: 424242, Kind: "User"}
	w.GH.AddUser(writer.Login, writer.ID, "User")
	w.GH.SetRole(theRepo, writer.Login, "write") // may pin, may not merge
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 202, Body: `{"message":"Updating pull request branch."}`})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	w.Comment(writer, "/reuse-sweep-run 31147925932") // replaces the merge's pin
	crafted := e2e.SHA("e1")
	w.GH.CraftMerge(theRepo, thePR, crafted, e2e.SHA("b0"), "f00dbabe00000000000000000000000000000000", "benchmarks/kimi.sh")
	w.GreenChecks(crafted)
	w.SendSync(crafted, "")
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("merged %+v: a commit skipped on another pin was taken for the update\n%s", m, st)
	}
}

// A cancel, or the deadline, read while a merge whose answer was lost may
// have been made: the PR is read first, and a PR GitHub merged at the
// decided head is recorded as merged, its pin kept, and the cancel told it
// came too late (not "cancelled").
func TestMergeWithReuseCancelAfterALostMergeAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		act  func(w *world, clock *movingClock)
		told string
	}{
		{"cancel", func(w *world, _ *movingClock) { w.Comment(maintainer, "/merge-with-reuse cancel") },
			"@maintainer too late: the merge asked by @maintainer was made before this cancel was read"},
		{"deadline", func(w *world, clock *movingClock) { w.PassTime(clock, merge.DefaultChecksTimeout+time.Second) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := mergeWorld(t, "    main_sweeps: false\n", clock)
			w.GreenChecks(e2e.SHA("c1"))
			w.GH.Inject(routeMerge, githubtest.Fault{Lost: true, Status: 502, Times: 1})
			w.Comment(maintainer, "/merge-with-reuse 31147925932")
			testkit.Eventually(t, "the merge asked", func() bool { return w.GH.Count(routeMerge) == 1 })
			w.Settle()
			tc.act(w, clock)
			st := w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
			if strings.Contains(st, "⛔") || w.PinRevoked() {
				t.Fatalf("a merge GitHub made was ended as stopped, or its pin revoked:\n%s\n%v", st, w.Trail())
			}
			if tc.told != "" {
				e2e.MustContain(t, "the cancel's reply", w.LastReply(), tc.told)
			}
		})
	}
}
