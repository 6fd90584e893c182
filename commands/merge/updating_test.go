package merge_test

import (
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A push on top of the branch update (or instead of it) is not the push a
// merge's pin covers: it sweeps, the pin is invalid, and the merge stops.
func TestMergeWithReuseTakesNoOtherPushForTheUpdate(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	w.GH.Push(theRepo, thePR, []string{e2e.SHA("e9")}, []string{"benchmarks/evil.sh"})
	w.GreenChecks(e2e.SHA("e9"))
	w.SendSync(e2e.SHA("e9"), "") // its synchronize comes first
	if !w.Swept("e9") {
		t.Fatalf("the push on top of the update skipped its sweep: %+v", w.Statuses("e9"))
	}
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "a push by someone else")
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("merged %+v", m)
	}
}

// A merge's pin covers only GitHub's own update of the branch: on a branch
// up to date it covers no push, and a merge commit the author crafted (its
// parents the head and the base's tip, but not made by GitHub) is not the
// update either. Each sweeps, the pin is invalid, the merge stops.
func TestMergeWithReusePinCoversOnlyGitHubsUpdate(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.PendingChecks()
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
	w.GH.PushMerge(theRepo, thePR, e2e.SHA("e7"), e2e.SHA("b0"), "benchmarks/evil.sh")
	w.GreenChecks(e2e.SHA("e7"))
	w.SendSync(e2e.SHA("e7"), "")
	if !w.Swept("e7") {
		t.Fatalf("a crafted merge on a branch up to date skipped its sweep: %+v", w.Statuses("e7"))
	}
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the stop", "⛔ stopped")
	if len(w.GH.Merges()) != 0 {
		t.Fatal("merged")
	}

	w2 := mergeWorld(t, "", clock)
	w2.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	// GitHub accepts the update but makes it late; the author pushes a
	// merge of their own first.
	w2.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 202, Body: `{"message":"Updating pull request branch."}`, Times: 1})
	w2.Comment(maintainer, "/merge-with-reuse 31147925932")
	w2.WaitStatus("the update asked", "update asked")
	w2.GH.PushMerge(theRepo, thePR, e2e.SHA("e8"), e2e.SHA("b0"), "benchmarks/evil.sh")
	w2.GreenChecks(e2e.SHA("e8"))
	w2.SendSync(e2e.SHA("e8"), "")
	if !w2.Swept("e8") {
		t.Fatalf("a merge the author made skipped its sweep: %+v", w2.Statuses("e8"))
	}
	w2.PassTime(clock, record.WakeGap)
	st := w2.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "is not the branch update opsbot asked for")
	if len(w2.GH.Merges()) != 0 {
		t.Fatal("merged")
	}
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
