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

// opsbot stops while GitHub merges the rest on its temporary branch (the
// branch made, its merge asked, no answer read), and the merge is then
// stopped by a push, a cancel, a close or its deadline: the status comment
// named the branch meanwhile, the stop says it may still be there, and the
// engine deletes it once the merge is done.
func TestMergeWithReuseConflictBranchLeftByAStopIsDeleted(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"push", "cancel", "close", "deadline"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			more := map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}}
			clock := e2e.NewClock()
			deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
			w := conflictWorld(t, clock, more)
			w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
			arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/merges")
			t.Cleanup(release)
			mergeHeld(t, w, arrived, "GitHub was never asked to merge the rest")
			temp := leftBranch(t, w)
			testkit.Eventually(t, "the status comment naming the branch", func() bool {
				return strings.Contains(w.MergeStatus(), "opsbot's temporary branch `"+temp+"`")
			})
			switch how {
			case "push":
				w.GH.Push(theRepo, thePR, []string{e2e.SHA("c2")})
				w.PostNoSettle("pull_request", w.SyncPayload(e2e.SHA("c2")))
			case "cancel":
				w.cancelNoSettle()
			case "close":
				w.GH.ClosePR(theRepo, thePR, false, "")
				p := w.ClosedPayload(false, "")
				e2e.SetPath(p, "pull_request.head.sha", e2e.SHA("c1"))
				w.PostNoSettle("pull_request", p)
			case "deadline":
				clock.Add(merge.DefaultChecksTimeout + time.Minute)
			}
			w.Srv.Stop(t)
			release() // GitHub merges on the branch; the process that asked is gone
			if _, ok := w.GH.Branches(theRepo)[temp]; !ok {
				t.Fatalf("the branch %s is not on GitHub after the stop; the test holds nothing\n%s", temp, w.Srv.Stderr.String())
			}
			w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
			t.Cleanup(func() {
				if t.Failed() {
					t.Log(w.Srv.Stderr.String())
				}
			})
			st := w.WaitStatus("the branch deleted", "⛔ stopped", "🧹 opsbot's temporary branch `"+temp+"` is deleted")
			e2e.MustContain(t, "status", st, "`"+temp+"` may still be on GitHub: opsbot deletes it now")
			if _, ok := w.GH.Branches(theRepo)[temp]; ok {
				t.Fatalf("the branch %s is still on GitHub", temp)
			}
			if n := w.GH.Count(routeMoveBranch); n != 0 {
				t.Fatalf("the PR's branch was asked to move %d times", n)
			}
		})
	}
}

// leftBranch is opsbot's temporary branch on the conflict world's GitHub.
func leftBranch(t *testing.T, w *world) string {
	t.Helper()
	for b := range w.GH.Branches(theRepo) {
		if strings.HasPrefix(b, "opsbot-merge-") {
			return b
		}
	}
	t.Fatal("opsbot made no temporary branch")
	return ""
}

// A deletion of the temporary branch GitHub does not answer is tried
// again, by the merge's next steps and, once it merged, by the engine's
// cleanup, until GitHub confirms it gone; the status comment says the
// branch may still be there until then.
func TestMergeWithReuseConflictBranchDeletionIsTriedAgain(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}})
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	w.GH.Inject("DELETE /repos/{owner}/{repo}/git/refs/{ref...}", githubtest.Fault{Status: 502, Times: 4})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	temp := leftBranch(t, w)
	merged := w.GH.PRHead(theRepo, thePR)
	w.GreenChecks(merged)
	w.SendSync(merged, "")
	w.PassTime(clock, record.WakeGap)
	for i := 0; i < merge.MaxCleanupTries && !strings.Contains(w.MergeStatus(), "is deleted"); i++ {
		w.PassTime(clock, merge.Poll)
	}
	st := w.WaitStatus("the branch deleted", "🎉 merged `"+merged[:7]+"`", "🧹 opsbot's temporary branch `"+temp+"` is deleted")
	e2e.MustContain(t, "status", st, "`"+temp+"` may still be on GitHub: opsbot deletes it now")
	if _, ok := w.GH.Branches(theRepo)[temp]; ok {
		t.Fatalf("the branch %s is still on GitHub", temp)
	}
	if n := w.GH.Count("DELETE /repos/{owner}/{repo}/git/refs/{ref...}"); n < 5 {
		t.Fatalf("%d deletions asked; want the four GitHub did not answer, then one more", n)
	}
}
