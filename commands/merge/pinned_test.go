package merge_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// The happy path: a branch behind its base is updated by opsbot, the
// update's push skips its sweep on the pin the command took, the checks
// pass and opsbot merges exactly that head with the configured method; one
// status comment tells each step and the audit keeps them with who asked.
func TestMergeWithReuseUpdatesWaitsAndMerges(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	testkit.Eventually(t, "the branch update", func() bool { return w.GH.Count(routeUpdateBranch) == 1 })
	st := w.WaitStatus("the update asked", "update asked")
	e2e.MustContain(t, "status", st, "pinned run [31147925932](", "asked by @maintainer", "`squash`")
	if n := len(w.GH.Merges()); n != 0 {
		t.Fatalf("merged before the update's push: %d merges", n)
	}
	// GitHub makes the merge commit and sends its synchronize.
	updated := w.GH.PRHead(theRepo, thePR)
	w.GreenChecks(updated)
	w.SendSync(updated, "")
	w.PassTime(clock, record.WakeGap) // an event wakes a sequence at most once a WakeGap after its last step
	st = w.WaitStatus("the merge", "merged")
	e2e.MustContain(t, "status", st, "branch updated to `"+updated[:7]+"`: its sweep is skipped, reusing run [31147925932](",
		"checks of `"+updated[:7]+"` passed", "🎉 merged `"+updated[:7]+"`")
	merges := w.GH.Merges()
	if len(merges) != 1 || merges[0].SHA != updated || merges[0].Method != "squash" {
		t.Fatalf("merges %+v; want one squash of %s", merges, updated)
	}
	if n := w.GH.Count(routeUpdateBranch); n != 1 {
		t.Fatalf("update-branch asked %d times", n)
	}
	var outcomes []string
	for _, r := range w.AuditRecords() {
		if r["kind"] == "merge" {
			outcomes = append(outcomes, r["outcome"].(string))
			if r["actor_login"] != maintLog {
				t.Errorf("merge audit record without who asked: %v", r)
			}
		}
	}
	if strings.Join(outcomes, " ") != "pinned updating merged" {
		t.Fatalf("merge audit %v; want pinned updating merged", outcomes)
	}
	// GitHub tells the merge; the push to the default branch then reuses
	// the run the merge's pin covered.
	w.ClosedMerged(merges[0].Commit)
	out := w.GateFlags("--event", "push", "--sha", merges[0].Commit)
	if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" {
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
