package merge_test

import (
	"fmt"
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

const routeMoveBranch = "POST /graphql" // updateRefs: the conflict tests send no other GraphQL (a deletion is githubtest.RouteDeleteRef)

// entry is a changelog entry as the benchmark repository writes one.
func entry(key, link string) string {
	return fmt.Sprintf("- config-keys:\n    - %s\n  description:\n    - \"Update %s\"\n  pr-link: %s\n", key, key, link)
}

const mainTip = "ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1m"

// conflictWorld is a merge world, opsbot a GitHub App, whose PR and default branch both
// appended to the changelog since the PR's base (so update-branch cannot
// merge them): the PR also changed its benchmark script, the default
// branch its README. more are files both sides changed besides.
func conflictWorld(t *testing.T, clock *movingClock, more map[string][2]string) *world {
	t.Helper()
	w := newWorldOpts(t, worldOpts{App: true, Repo: "    merge:\n      min_role: write\n    main_sweeps: false\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	link := func(n int) string { return fmt.Sprintf("https://github.com/%s/pull/%d", theRepo, n) }
	base := entry("base-config", link(1))
	files := func(side int) map[string]string {
		out := map[string]string{"README.md": "readme\n", "benchmarks/kimi.sh": "run\n"}
		switch side {
		case 1: // the PR
			out["perf-changelog.yaml"] = base + "\n" + entry("pr-config", "XXX")
			out["benchmarks/kimi.sh"] = "run faster\n"
		case 2: // the default branch
			out["perf-changelog.yaml"] = base + "\n" + entry("main-config", link(41))
			out["README.md"] = "readme, newer\n"
		default:
			out["perf-changelog.yaml"] = base
		}
		for name, sides := range more {
			if side > 0 {
				out[name] = sides[side-1]
			} else {
				out[name] = "the base's\n"
			}
		}
		return out
	}
	w.GH.GitCommit(theRepo, e2e.SHA("b0"), nil, files(0))
	w.GH.GitCommit(theRepo, e2e.SHA("c1"), []string{e2e.SHA("b0")}, files(1))
	w.GH.GitCommit(theRepo, mainTip, []string{e2e.SHA("b0")}, files(2))
	w.GH.SetBranchTip(theRepo, "main", mainTip)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.UpdateConflict = true })
	return w
}

// The changelog conflict, merged on GitHub's side: the branch conflicts
// with its base only in the append-only changelog, so opsbot makes the
// merge itself (the base's files, the PR's own changes, the changelog by
// the append-only rule: main's bytes whole, then the PR's entry linked to
// the PR), moves the branch to it, and that push, the one the pin covers,
// skips its sweep; the checks pass and the head merges. The pin covers
// that commit by its SHA, whoever GitHub records as its committer: GitHub
// itself, or the App's bot (GitHub documents only that it signs an App's
// commit made with no author, not whom it names).
func TestMergeWithReuseMergesAConflictingChangelog(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		byApp bool
	}{{"committed by GitHub", false}, {"committed by the App's bot", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mergesAConflictingChangelog(t, c.byApp)
		})
	}
}

func mergesAConflictingChangelog(t *testing.T, byApp bool) {
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.SetBranchRules(theRepo, "kimi-tune", "required_signatures") // GitHub signs what the App makes
	if byApp {
		w.GH.CommitAsTheApp(theRepo)
	}
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	testkit.Eventually(t, "the branch moved", func() bool { return w.GH.Count(routeMoveBranch) == 1 })
	st := w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	e2e.MustContain(t, "status", st, "the branch conflicted with its base in `perf-changelog.yaml`")
	merged := w.GH.PRHead(theRepo, thePR)
	if merged == e2e.SHA("c1") {
		t.Fatal("the PR's head did not move")
	}
	got := w.GH.GitFiles(theRepo, merged)
	link := func(n int) string { return fmt.Sprintf("https://github.com/%s/pull/%d", theRepo, n) }
	want := map[string]string{
		"perf-changelog.yaml": entry("base-config", link(1)) + "\n" + entry("main-config", link(41)) + "\n" + entry("pr-config", link(thePR)),
		"README.md":           "readme, newer\n",
		"benchmarks/kimi.sh":  "run faster\n",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the merge holds\n%q\nwant\n%q", got, want)
	}
	if n := w.GH.Count(routeUpdateBranch); n != 0 {
		t.Fatalf("update-branch asked %d times on a conflicting branch", n)
	}
	// GitHub sends the push's synchronize: the pin covers it.
	w.GreenChecks(merged)
	w.SendSync(merged, "")
	w.PassTime(clock, record.WakeGap)
	st = w.WaitStatus("the merge", "🎉 merged")
	e2e.MustContain(t, "status", st, "branch updated to `"+merged[:7]+"`: its sweep is skipped, reusing run [31147925932](", "🎉 merged `"+merged[:7]+"`")
	if ms := w.GH.Merges(); len(ms) != 1 || ms[0].SHA != merged {
		t.Fatalf("merges %+v; want one of %s", ms, merged)
	}
	var gate []string
	for _, s := range w.GH.Statuses(theRepo, merged) {
		if s.Context == "opsbot/sweep-gate" {
			gate = append(gate, s.Description)
		}
	}
	if len(gate) == 0 || !strings.HasPrefix(gate[len(gate)-1], "skip: reusing run 31147925932") {
		t.Fatalf("the gate's statuses on the merge opsbot made: %q", gate)
	}
}

// What the conflict merge will not do: another file both sides changed
// stops it, naming the file, and nothing is made or moved; a changelog the
// rule refuses stops it saying why.
func TestMergeWithReuseConflictItCannotMerge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		more map[string][2]string
		pr   func(w *world)
		want string
	}{
		{"another file that conflicts", map[string][2]string{"configs/a-master.yaml": {"the PR's\n", "main's\n"}}, nil,
			"GitHub's merge of `configs/a-master.yaml`, which both changed, conflicts too (Merge conflict): update the branch by hand"},
		{"a changelog made a symlink", nil, func(w *world) {
			files := w.GH.GitFiles(theRepo, e2e.SHA("c1"))
			w.GH.GitCommitModes(theRepo, e2e.SHA("c1"), []string{e2e.SHA("b0")}, files, map[string]string{"perf-changelog.yaml": "120000"})
		}, "which is not a plain file on every side"},
		{"a changelog the rule refuses", nil, func(w *world) {
			// The PR rewrote a historical entry as well as appending.
			files := w.GH.GitFiles(theRepo, e2e.SHA("c1"))
			files["perf-changelog.yaml"] = strings.Replace(files["perf-changelog.yaml"], "Update base-config", "Rewritten", 1)
			w.GH.GitCommit(theRepo, e2e.SHA("c1"), []string{e2e.SHA("b0")}, files)
		}, "which the append-only rule cannot merge (entry 1 changed; existing entries are immutable"},
		{"a branch requiring signatures, GitHub signing nothing", nil, func(w *world) {
			w.GH.SetBranchRules(theRepo, "kimi-tune", "required_signatures")
			w.GH.SignNothing(theRepo)
		}, "the branch `kimi-tune` requires signed commits, and GitHub did not sign the merge opsbot made"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := conflictWorld(t, clock, c.more)
			if c.pr != nil {
				c.pr(w)
			}
			w.Comment(maintainer, "/merge-with-reuse 31147925932")
			st := w.WaitStatus("the merge stopped", "⛔ stopped")
			e2e.MustContain(t, "status", st, c.want, "The pin of run [31147925932](", "is revoked")
			if n := w.GH.Count(routeMoveBranch); n != 0 || w.GH.PRHead(theRepo, thePR) != e2e.SHA("c1") {
				t.Fatalf("a conflict opsbot cannot merge moved the branch %d times", n)
			}
			for b := range w.GH.Branches(theRepo) {
				if strings.HasPrefix(b, "opsbot-merge-") {
					t.Fatalf("the branch %s is left behind", b)
				}
			}
		})
	}
}

// A push between opsbot's read and its move wins: GitHub refuses to move
// the branch anything but forward, the merge stops, and the pin is
// revoked (the next push sweeps).
func TestMergeWithReuseConflictMergeLosesToAPush(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.Inject(routeMoveBranch, githubtest.Fault{Status: 200, Body: `{"data":null,"errors":[{"type":"UNPROCESSABLE","message":"Update is not a fast forward"}]}`})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "Update is not a fast forward", "a push since opsbot read c1c1c1c wins", "is revoked: the next push sweeps")
	if h := w.GH.PRHead(theRepo, thePR); h != e2e.SHA("c1") {
		t.Fatalf("the branch moved to %s", h)
	}
}

// A force-push that sets the branch back to an older commit after opsbot
// read it and before its move: the move is a compare-and-swap from the
// head opsbot read (updateRefs' beforeOid), so GitHub refuses it although
// opsbot's merge follows the older commit too, with its generic error that
// says nothing; opsbot reads the branch back, and says what it found:
// nothing moved, the push wins.
func TestMergeWithReuseConflictMergeLosesToAForcePushBack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	arrived, release := w.GH.Hold(routeMoveBranch)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "the branch was never asked to move")
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Commits = []string{e2e.SHA("b0")} })
	release()
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "the branch is at b0b0b0b, neither opsbot's merge", "nor c1c1c1c, the head it read: a push since wins")
	if h := w.GH.PRHead(theRepo, thePR); h != e2e.SHA("b0") || w.GH.BranchMoves() != 0 {
		t.Fatalf("the branch is at %s after %d moves; want the force-push's b0 and no move", h, w.GH.BranchMoves())
	}
}

// The move's answer lost (the branch moved, GitHub's answer did not come
// back): opsbot never moves it again; it waits for the push, which its pin
// covers, and merges.
func TestMergeWithReuseConflictMergeAnswerLost(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.Inject(routeMoveBranch, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the lost answer, the branch read back", "opsbot merged it by the append-only rule", "GitHub's answer did not say so; the branch read back did")
	merged := w.GH.PRHead(theRepo, thePR)
	w.PassTime(clock, time.Minute)
	if n := w.GH.Count(routeMoveBranch); n != 1 {
		t.Fatalf("the branch was moved %d times", n)
	}
	w.GreenChecks(merged)
	w.SendSync(merged, "")
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the merge", "🎉 merged `"+merged[:7]+"`")
}

// A restart between the mark and the move: the new process does not know
// whether the branch moved, so it never moves it; it waits for the push,
// and gives up (pin revoked) when none comes.
func TestMergeWithReuseConflictMergeAfterARestart(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := conflictWorld(t, clock, nil)
	// The move is held, unanswered, until the test ends: the mark is
	// written, and the process stops while the move is under way.
	arrived, release := w.GH.Hold(routeMoveBranch)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "the branch was never asked to move")
	w.Srv.Stop(t)
	// The default branch moves on meanwhile: still, the branch is never
	// moved again.
	files := w.GH.GitFiles(theRepo, mainTip)
	files["README.md"] = "readme, newest\n"
	w.GH.GitCommit(theRepo, "ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2m", []string{mainTip}, files)
	w.GH.SetBranchTip(theRepo, "main", "ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2ma2m")
	w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(w.Srv.Stderr.String())
		}
	})
	w.PassTime(clock, time.Minute)
	w.WaitStatus("waiting for the push", "was about to be pushed when opsbot stopped; waiting for its push")
	w.PassTime(clock, 11*time.Minute)
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "is revoked")
	// The new process never asked: a move it asked would be held too, and
	// its worker would never have stopped the merge.
	if log := w.Srv.Stderr.String(); strings.Contains(log, `"outcome":"merge-conflict-pushed"`) || strings.Contains(log, `"outcome":"merge-conflict-unanswered"`) {
		t.Fatalf("the process after the restart moved the branch:\n%s", log)
	}
	if made := w.GH.GitMadeCommits(theRepo); len(made) != 1 {
		t.Fatalf("%d merges made; the process after the restart made another", len(made))
	}
}

// A fork's branch is not opsbot's to push to: its conflict stops the merge,
// saying to update it by hand, and nothing is made.
func TestMergeWithReuseConflictOfAForkIsLeftToItsAuthor(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = e2e.ForkRepoID, e2e.ForkRepo })
	const forkRun = int64(31200000077)
	w.GH.AddRun(theRepo, githubtest.Run{ID: forkRun, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: e2e.SHA("c1"), HeadBranch: "kimi-tune", HeadRepoID: e2e.ForkRepoID, HeadRepo: e2e.ForkRepo, Artifacts: resultArtifacts,
		CreatedAt: time.Now().Add(-time.Hour)})
	w.Comment(maintainer, fmt.Sprintf("/merge-with-reuse %d", forkRun))
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "it is a fork's, which opsbot does not push to: update the branch by hand")
	if len(w.GH.GitMadeCommits(theRepo)) != 0 || w.GH.Count(routeMoveBranch) != 0 {
		t.Fatal("a fork's conflict made a commit or moved a branch")
	}
}

// The PR's own changes come whole into the merge: a file it removed stays
// removed, a file it added keeps its mode (an executable script), and a
// file only the base changed is the base's.
func TestMergeWithReuseConflictMergeKeepsThePRsFiles(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	files := w.GH.GitFiles(theRepo, e2e.SHA("c1"))
	files["tools/run.sh"] = "#!/bin/sh\n"
	delete(files, "README.md") // the PR removes what the base changed: a conflict of its own
	w.GH.GitCommitModes(theRepo, e2e.SHA("c1"), []string{e2e.SHA("b0")}, files, map[string]string{"tools/run.sh": "100755"})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "GitHub's merge of `README.md`, which both changed, conflicts too")

	w2 := conflictWorld(t, e2e.NewClock(), nil)
	files = w2.GH.GitFiles(theRepo, e2e.SHA("c1"))
	files["tools/run.sh"] = "#!/bin/sh\n"
	delete(files, "benchmarks/kimi.sh")
	w2.GH.GitCommitModes(theRepo, e2e.SHA("c1"), []string{e2e.SHA("b0")}, files, map[string]string{"tools/run.sh": "100755"})
	w2.Comment(maintainer, "/merge-with-reuse 31147925932")
	w2.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	got := w2.GH.GitFiles(theRepo, w2.GH.PRHead(theRepo, thePR))
	if _, ok := got["benchmarks/kimi.sh"]; ok || got["tools/run.sh"] != "#!/bin/sh\n" || got["README.md"] != "readme, newer\n" {
		t.Fatalf("the merge holds %q", got)
	}
}

// Both sides changed another file too, in hunks GitHub merges cleanly (a
// config both extended): GitHub merges the rest (on a branch of opsbot's,
// deleted after, its pushes running no workflow), opsbot writes the
// changelog onto that merge, and the push it makes skips.
func TestMergeWithReuseConflictMergeLetsGitHubMergeTheRest(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}})
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	merged := w.GH.PRHead(theRepo, thePR)
	got := w.GH.GitFiles(theRepo, merged)
	link := func(n int) string { return fmt.Sprintf("https://github.com/%s/pull/%d", theRepo, n) }
	if got["configs/a-master.yaml"] != "main line\nbase\npr line\n" || got["README.md"] != "readme, newer\n" || got["benchmarks/kimi.sh"] != "run faster\n" ||
		got["perf-changelog.yaml"] != entry("base-config", link(1))+"\n"+entry("main-config", link(41))+"\n"+entry("pr-config", link(thePR)) {
		t.Fatalf("the merge holds %q", got)
	}
	for b := range w.GH.Branches(theRepo) {
		if strings.HasPrefix(b, "opsbot-merge-") {
			t.Fatalf("the merge's branch %s is left behind", b)
		}
	}
	w.GreenChecks(merged)
	w.SendSync(merged, "")
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the merge", "🎉 merged `"+merged[:7]+"`")
}

// Whoever can push may move opsbot's merge branch before GitHub merges it
// (the branch is public): GitHub's merge is then not of opsbot's commit,
// and the merge stops before anything is pushed.
func TestMergeWithReuseConflictMergeBranchMovedByAnother(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}})
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/merges")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "GitHub was never asked to merge")
	var temp string
	for b := range w.GH.Branches(theRepo) {
		if strings.HasPrefix(b, "opsbot-merge-") {
			temp = b
		}
	}
	undone := w.GH.Branches(theRepo)[temp]
	files := w.GH.GitFiles(theRepo, undone)
	files["tools/evil.sh"] = "something nobody reviewed\n"
	w.GH.GitCommit(theRepo, "ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1e", []string{undone}, files)
	w.GH.SetBranchTip(theRepo, temp, "ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1ev1e")
	release()
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "was moved meanwhile", "is revoked")
	if n := w.GH.Count(routeMoveBranch); n != 0 || w.GH.PRHead(theRepo, thePR) != e2e.SHA("c1") {
		t.Fatalf("the branch moved (%d asks)", n)
	}
}

// GitHub's refusals of its merge of the rest say what they are: only a
// 409 is a conflict; a refusal for want of the Workflows permission says
// which permission.
func TestMergeWithReuseConflictMergeRefusedForWorkflows(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}})
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	w.GH.Inject("POST /repos/{owner}/{repo}/merges", githubtest.Fault{Status: 403,
		Body: `{"message":"refusing to allow a GitHub App to create or update workflow .github/workflows/x.yml without workflows permission"}`})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "without workflows permission", "needs the App's Workflows permission (`opsbot github app-manifest --merge`)")
	if strings.Contains(st, "conflicts too") {
		t.Fatalf("a refusal for a permission said to be a conflict:\n%s", st)
	}
}

// opsbot's merge branch is not left behind: not when the answer to its
// making was lost (it is deleted, and the merge made again), and when it
// cannot be deleted, the status comment says to delete it by hand.
func TestMergeWithReuseConflictMergeBranchIsCleanedUp(t *testing.T) {
	t.Parallel()
	more := map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}}
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, more)
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	w.GH.Inject("POST /repos/{owner}/{repo}/git/refs", githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	for b := range w.GH.Branches(theRepo) {
		if strings.HasPrefix(b, "opsbot-merge-") {
			t.Fatalf("the merge's branch %s is left behind", b)
		}
	}

	w2 := conflictWorld(t, e2e.NewClock(), more)
	w2.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	// The deletion of opsbot's branch (a compare-and-swap) is refused.
	w2.GH.Inject(githubtest.RouteDeleteRef, githubtest.Fault{Status: 200,
		Body: `{"data":null,"errors":[{"type":"FORBIDDEN","message":"Resource not accessible by integration"}]}`})
	w2.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w2.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	e2e.MustContain(t, "status", st, "⚠️ opsbot could not delete its branch `opsbot-merge-", "delete it by hand")
}

// A branch of opsbot's that a process killed between making and deleting
// it left behind (its commit opsbot's: "[skip ci] opsbot: #N without its
// changes …") is deleted by the next merge of the PR, which makes its own
// and pushes; another's branch of that name pattern, on a commit that is
// not opsbot's, stays.
func TestMergeWithReuseConflictMergeSweepsABranchLeftByACrash(t *testing.T) {
	t.Parallel()
	more := map[string][2]string{"configs/a-master.yaml": {"base\npr line\n", "main line\nbase\n"}}
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, more)
	w.GH.CleanMerge(theRepo, "configs/a-master.yaml", "main line\nbase\npr line\n")
	leftover := "1eff1eff1eff1eff1eff1eff1eff1eff1eff1eff"
	w.GH.GitCommit(theRepo, leftover, []string{e2e.SHA("c1")}, w.GH.GitFiles(theRepo, e2e.SHA("c1")))
	w.GH.SetCommitMessage(theRepo, leftover, fmt.Sprintf("[skip ci] opsbot: #%d without its changes to perf-changelog.yaml, to merge the rest", thePR))
	w.GH.SetBranchTip(theRepo, fmt.Sprintf("opsbot-merge-%d-1eff1ef", thePR), leftover)
	w.GH.SetBranchTip(theRepo, fmt.Sprintf("opsbot-merge-%d-someone", thePR), e2e.SHA("c1"))
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	var still []string
	for b := range w.GH.Branches(theRepo) {
		if strings.HasPrefix(b, "opsbot-merge-") {
			still = append(still, b)
		}
	}
	if len(still) != 1 || still[0] != fmt.Sprintf("opsbot-merge-%d-someone", thePR) {
		t.Fatalf("branches left: %v; want only the one that is not opsbot's", still)
	}
}

// A push to the branch while opsbot made its merge: the branch is read
// right before the move, and the push wins.
func TestMergeWithReuseConflictMergeYieldsToAPushBeforeTheMove(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	// The move's step reads the base's branch, then the PR's: the PR's
	// read is held while the author pushes.
	arrived, release := w.GH.HoldAfter("GET /repos/{owner}/{repo}/branches/{branch}", 2)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "the branch was never read before the move")
	w.GH.Push(theRepo, thePR, []string{e2e.SHA("c2")}, nil)
	release()
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "the branch moved to c2c2c2c while opsbot made its merge from c1c1c1c: a push since wins")
	if n := w.GH.Count(routeMoveBranch); n != 0 {
		t.Fatalf("the branch was moved %d times over the push", n)
	}
}

// A cancel delivered while the move's step reads the branch, the last
// GitHub read before the move: the cancel goes first, and the branch is
// never moved (the stop check is the last thing before the act).
func TestMergeWithReuseConflictMergeYieldsToACancelDuringTheLastRead(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	arrived, release := w.GH.HoldAfter("GET /repos/{owner}/{repo}/branches/{branch}", 2)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "the branch was never read before the move")
	w.cancelNoSettle()
	testkit.Eventually(t, "the cancel stored", func() bool { return w.Metrics()["opsbot_inbox_depth"] != "0" })
	release()
	w.WaitStatus("the merge stopped", "⛔ stopped: cancelled by @maintainer")
	if n := w.GH.Count(routeMoveBranch); n != 0 || w.GH.PRHead(theRepo, thePR) != e2e.SHA("c1") {
		t.Fatalf("the branch moved (%d asks) after the cancel was acknowledged", n)
	}
}

// GitHub answers the move with an untyped GraphQL error (as it answers a
// move that timed out inside) and the branch read back is still at the
// head: that says nothing yet. The status says what GitHub answered and
// what the read showed (never that the answer was lost, or that opsbot
// merged it), waits for the push, never asks again, and stops when no
// push comes.
func TestMergeWithReuseConflictMoveRefusedUntyped(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.Inject(routeMoveBranch, githubtest.Fault{Status: 200, Body: `{"data":null,"errors":[{"message":"Something went wrong while executing your query."}]}`, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the untyped answer", "GitHub answered with an error that does not say whether it did", "Something went wrong while executing your query",
		"the branch was still at `c1c1c1c` when read back", "⏳ waiting for the push of opsbot's merge")
	for _, lie := range []string{"answer was lost", "opsbot merged it by the append-only rule as", "stopped"} {
		if strings.Contains(st, lie) {
			t.Fatalf("the status says %q of a branch GitHub has not moved:\n%s", lie, st)
		}
	}
	w.PassTime(clock, merge.UpdateWait+time.Minute)
	w.WaitStatus("the merge stopped", "⛔ stopped: no push of opsbot's merge came")
	if n := w.GH.Count(routeMoveBranch); n != 1 || w.GH.PRHead(theRepo, thePR) != e2e.SHA("c1") {
		t.Fatalf("%d moves asked, the branch at %s; want one ask and c1", n, w.GH.PRHead(theRepo, thePR))
	}
}

// cancelNoSettle comments /merge-with-reuse cancel without waiting for the
// server (a step it runs is held on a request).
func (w *world) cancelNoSettle() {
	w.T.Helper()
	c := w.GH.AddComment(theRepo, thePR, maintainer.Login, "/merge-with-reuse cancel")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
}

// mergeHeld comments /merge-with-reuse without waiting for the server to
// settle (a request it makes is held) and waits until the held request
// arrives; never is what a test says when it does not.
func mergeHeld(t *testing.T, w *world, arrived <-chan struct{}, never string) {
	t.Helper()
	c := w.GH.AddComment(theRepo, thePR, maintainer.Login, "/merge-with-reuse 31147925932")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	select {
	case <-arrived:
	case <-testkit.Expired(t):
		t.Fatal(never)
	}
}

// With a token, opsbot does not make the merge: its commit would be the
// token's user's, not GitHub's, and its push could not reuse the run.
func TestMergeWithReuseConflictNeedsAnApp(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.UpdateConflict = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "opsbot merges them only as a GitHub App", "update the branch by hand")
	if len(w.GH.GitMadeCommits(theRepo)) != 0 || w.GH.Count(routeMoveBranch) != 0 {
		t.Fatal("a token made a merge")
	}
}

// A cancel delivered while opsbot builds its merge goes first: the move
// yields to it, and nothing is pushed.
func TestMergeWithReuseConflictMergeYieldsToACancel(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	arrived, release := w.GH.Hold("POST /repos/{owner}/{repo}/git/commits")
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "opsbot never made its merge")
	w.cancelNoSettle()
	release()
	w.WaitStatus("the merge stopped", "⛔ stopped: cancelled by @maintainer")
	var said bool
	for _, r := range w.Replies() {
		said = said || strings.Contains(r, "cancelled the merge of this PR asked by @maintainer. The pin of run")
	}
	if !said {
		t.Fatalf("no reply says the cancel revoked the pin: %q", w.Replies())
	}
	if n := w.GH.Count(routeMoveBranch); n != 0 || w.GH.PRHead(theRepo, thePR) != e2e.SHA("c1") {
		t.Fatalf("the branch moved (%d asks) after the cancel", n)
	}
}

// A read GitHub fails while the merge is built is read again at the next
// try: the merge goes on, made once more harmlessly, pushed once.
func TestMergeWithReuseConflictMergeSurvivesAFailedRead(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.Inject("GET /repos/{owner}/{repo}/git/trees/{sha}", githubtest.Fault{Status: 502, Skip: 3, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge pushed", "opsbot merged it by the append-only rule")
	if n := w.GH.Count(routeMoveBranch); n != 1 {
		t.Fatalf("the branch was moved %d times", n)
	}
}

// The move's answer lost, and the branch cannot be read back either:
// opsbot says only that it asked, never that the branch moved, waits for
// the push (which its pin covers), never moves the branch again, and
// merges.
func TestMergeWithReuseConflictMoveUnansweredAndUnread(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	arrived, release := w.GH.HoldAnswer(routeMoveBranch)
	t.Cleanup(release)
	mergeHeld(t, w, arrived, "the branch was never moved")
	// GitHub moved the branch; its answer will be lost, and reading the
	// branch back fails too (the client's own retries included).
	w.GH.Inject("GET /repos/{owner}/{repo}/branches/{branch}", githubtest.Fault{Status: 502, Times: 8})
	release()
	st := w.WaitStatus("the unanswered move", "GitHub's answer did not say whether it did, and the branch could not be read back")
	if strings.Contains(st, "opsbot merged it by the append-only rule as") {
		t.Fatalf("the status says the branch moved, which opsbot does not know:\n%s", st)
	}
	merged := w.GH.PRHead(theRepo, thePR)
	w.PassTime(clock, time.Minute)
	if n := w.GH.Count(routeMoveBranch); n != 1 {
		t.Fatalf("the branch was moved %d times", n)
	}
	w.GreenChecks(merged)
	w.SendSync(merged, "")
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the merge", "🎉 merged `"+merged[:7]+"`")
}

// The move's answer is lost (a proxy's 502) before GitHub moved the
// branch, as it may still do: the branch read back at once is at the head
// read, which says nothing yet. opsbot says so, waits for the push of its
// merge, never asks again, and stops when no push comes.
func TestMergeWithReuseConflictMoveAnswerLostBranchNotMovedYet(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := conflictWorld(t, clock, nil)
	w.GH.Inject(routeMoveBranch, githubtest.Fault{Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the lost answer", "GitHub's answer was lost, and the branch was still at `c1c1c1c` when read back",
		"⏳ waiting for the push of opsbot's merge")
	if strings.Contains(st, "stopped") || strings.Contains(st, "did not move the branch") {
		t.Fatalf("a lost answer read back at the old head was said final:\n%s", st)
	}
	w.PassTime(clock, merge.UpdateWait+time.Minute)
	w.WaitStatus("the merge stopped", "⛔ stopped: no push of opsbot's merge came")
	if n := w.GH.Count(routeMoveBranch); n != 1 {
		t.Fatalf("the move was asked %d times; want once", n)
	}
}
