package merge_test

import (
	"path/filepath"
	"regexp"
	"strconv"
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
	w.GH.Inject(githubtest.RouteDeleteRef, githubtest.Fault{Status: 502, Times: 4})
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
	if n := w.GH.Count(githubtest.RouteDeleteRef); n < 5 || w.GH.BranchDeletions() != 1 {
		t.Fatalf("%d deletions asked, %d made; want the four GitHub did not answer, then one more that deleted it", n, w.GH.BranchDeletions())
	}
}

// otherFilesBoth are a config both sides extended in hunks GitHub merges
// cleanly: GitHub merges the rest on opsbot's temporary branch.
var otherFilesBoth = map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}}

// conflictMergingTheRest is a conflict world where GitHub merges the rest.
func conflictMergingTheRest(t *testing.T, clock *movingClock) *world {
	t.Helper()
	w := conflictWorld(t, clock, otherFilesBoth)
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	return w
}

// Someone makes a branch under the name the status comment gave before
// opsbot makes it: opsbot's making is refused, the merge stops, and the
// other's branch stays, said to be not opsbot's.
func TestMergeWithReuseConflictBranchNameTakenIsLeftAlone(t *testing.T) {
	t.Parallel()
	w := conflictMergingTheRest(t, e2e.NewClock())
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/git/refs")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "opsbot never made its branch")
	temp := tempNamed(t, w)
	w.GH.SetBranchTip(theRepo, temp, e2e.SHA("c1")) // someone's, at someone's commit
	release()
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "the branch `"+temp+"` is not opsbot's any more", "opsbot leaves it")
	if tip := w.GH.Branches(theRepo)[temp]; tip != e2e.SHA("c1") {
		t.Fatalf("the branch someone made under opsbot's name is at %q; want it left at c1", tip)
	}
}

// A cancel stored while the merge makes its commit: the branch is never
// made, and the status comment never says it was deleted.
func TestMergeWithReuseConflictBranchNeverMadeIsNotSaidDeleted(t *testing.T) {
	t.Parallel()
	w := conflictMergingTheRest(t, e2e.NewClock())
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/git/commits")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "opsbot never made its commit")
	w.cancelNoSettle() // answered 202: stored before the commit's answer
	release()
	st := w.WaitStatus("the branch accounted for", "⛔ stopped: cancelled", "is not on GitHub (never made, or gone already)")
	if n := w.GH.Count("POST /repos/{owner}/{repo}/git/refs"); n != 0 || strings.Contains(st, "is deleted") {
		t.Fatalf("%d branches made; status:\n%s", n, st)
	}
}

// After a restart between making the branch and GitHub's merge on it,
// GitHub refuses to delete it (a ruleset restricting deletions): the merge
// stops at once, saying to delete it by hand, instead of failing every
// wake-up until its deadline.
func TestMergeWithReuseConflictBranchDeletionRefusedStops(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := conflictMergingTheRest(t, clock)
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/merges")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "GitHub was never asked to merge the rest")
	temp := leftBranch(t, w)
	w.Srv.Stop(t)
	release()
	w.GH.Inject(githubtest.RouteDeleteRef, githubtest.Fault{Status: 200,
		Body: `{"data":null,"errors":[{"type":"UNPROCESSABLE","message":"Repository rule violations found: Cannot delete this branch"}]}`})
	w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
	st := w.WaitStatus("the merge stopped", "⛔ stopped", "opsbot could not make its temporary branch `"+temp+"` again")
	e2e.MustContain(t, "status", st, "⚠️ opsbot could not delete its branch `"+temp+"`", "delete it by hand")
	if n := w.GH.Count(githubtest.RouteDeleteRef); n != 1 {
		t.Fatalf("%d deletions asked; want the one GitHub refused", n)
	}
}

// The append-only files change between opsbot's commit without the PR's
// changes to them and GitHub's merge on it (a reload, a restart): the
// commit is made anew for the files the configuration names now, so no
// change of the PR's is dropped; here GitHub's merge of the file that left
// the list conflicts, and the merge stops saying so.
func TestMergeWithReuseConflictCommitMadeAnewWhenTheAppendOnlyFilesChange(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	two := "append_only: [perf-changelog.yaml, notes-changelog.yaml]"
	w := conflictMergingTheRest(t, clock)
	// A second changelog both sides appended to, on every side's commit.
	notes := entry("n-base", "https://github.com/"+theRepo+"/pull/1")
	for commit, add := range map[string]string{e2e.SHA("b0"): "", e2e.SHA("c1"): entry("n-pr", "XXX"), mainTip: entry("n-main", "https://github.com/"+theRepo+"/pull/42")} {
		files := w.GH.GitFiles(theRepo, commit)
		files["notes-changelog.yaml"] = notes
		if add != "" {
			files["notes-changelog.yaml"] = notes + "\n" + add
		}
		parents := []string{e2e.SHA("b0")}
		if commit == e2e.SHA("b0") {
			parents = nil
		}
		w.GH.GitCommit(theRepo, commit, parents, files)
	}
	w.Restart(func(cfg string) string {
		return strings.Replace(cfg, "min_role: write\n", "min_role: write\n      "+two+"\n", 1)
	}, nil)
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/git/refs")
	t.Cleanup(release)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.MergeStatus())
		}
	})
	mergeHeld(t, w, arrived, "opsbot never made its branch")
	w.Srv.Stop(t)
	release()
	w.Restart(func(cfg string) string {
		if !strings.Contains(cfg, two) {
			t.Fatalf("the configuration lost the append-only files:\n%s", cfg)
		}
		return strings.Replace(cfg, two, "append_only: [perf-changelog.yaml]", 1)
	}, func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond })
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "GitHub's merge of `configs/a-master.yaml`, `notes-changelog.yaml`, which both changed, conflicts too")
	if head := w.GH.PRHead(theRepo, thePR); head != e2e.SHA("c1") {
		t.Fatalf("the branch moved to %s", head)
	}
}

// tempNamed is the temporary branch the status comment names.
func tempNamed(t *testing.T, w *world) string {
	t.Helper()
	re := regexp.MustCompile("temporary branch `(opsbot-merge-[0-9]+-[0-9a-f]+)`")
	var name string
	testkit.Eventually(t, "the status comment naming the branch", func() bool {
		if m := re.FindStringSubmatch(w.MergeStatus()); m != nil {
			name = m[1]
		}
		return name != ""
	})
	return name
}

// A merge that ended while GitHub did not answer the deletion of its
// temporary branch holds it, and waits for its next try; a reconcile lists
// what opsbot holds on GitHub and tries the deletion at once, with no time
// passing.
func TestMergeWithReuseConflictBranchLeftIsFoundByReconcile(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictMergingTheRest(t, clock)
	const deleteRoute = githubtest.RouteDeleteRef
	w.GH.Inject(deleteRoute, githubtest.Fault{Status: 502})
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/merges")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "GitHub was never asked to merge the rest")
	temp := leftBranch(t, w)
	w.cancelNoSettle()
	release()
	w.WaitStatus("the merge cancelled", "⛔ stopped: cancelled", "`"+temp+"` may still be on GitHub")
	testkit.Eventually(t, "the cleanup tried", func() bool { return strings.Contains(w.Srv.Stderr.String(), `"outcome":"merge-left-kept"`) })
	w.GH.Heal(deleteRoute)
	r := w.Call("POST", "/api/v1/reconcile", `{"repo":"`+theRepo+`"}`)
	if r.Code != 200 || !strings.Contains(r.Body, `"branches_left":["#`+strconv.Itoa(thePR)+` `+temp+`"]`) {
		t.Fatalf("reconcile answered %d %s; want the branch listed", r.Code, r.Body)
	}
	st := w.WaitStatus("the branch deleted", "🧹 opsbot's temporary branch `"+temp+"` is deleted")
	if _, ok := w.GH.Branches(theRepo)[temp]; ok {
		t.Fatalf("the branch %s is still on GitHub:\n%s", temp, st)
	}
}

// Someone pushes to opsbot's temporary branch between opsbot's read of it
// and its deletion: the deletion is a compare-and-swap on the commit read
// (updateRefs with beforeOid), so GitHub refuses it (with an untyped
// error), opsbot reads the branch again, and the push stays, said to be
// someone else's; the merge goes on.
func TestMergeWithReuseConflictBranchPushedBeforeItsDeletionStays(t *testing.T) {
	t.Parallel()
	w := conflictMergingTheRest(t, e2e.NewClock())
	arrived, release := w.GH.Hold(githubtest.RouteDeleteRef)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "opsbot never deleted its branch")
	temp := leftBranch(t, w)
	w.GH.SetBranchTip(theRepo, temp, e2e.SHA("c1")) // someone's push, after opsbot read the branch
	release()
	st := w.WaitStatus("the branch said", "the branch `"+temp+"` is not opsbot's any more", "opsbot leaves it")
	if tip := w.GH.Branches(theRepo)[temp]; tip != e2e.SHA("c1") {
		t.Fatalf("the branch someone pushed to is at %q; want it left at c1\n%s", tip, st)
	}
	if n := w.GH.BranchDeletions(); n != 0 {
		t.Fatalf("%d branches deleted", n)
	}
}
