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
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const (
	routeUpdateBranch = "PUT /repos/{owner}/{repo}/pulls/{n}/update-branch"
	routeMerge        = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
)

// What stops a merge, each said in the status comment, with nothing
// merged: GitHub refusing the update (the pin is revoked: it covers only
// the update opsbot asks for), a
// failed check (named), a push by someone else, cancel (which revokes the
// pin the merge took), closing the PR, the deadline, branch protection
// wanting a review, and GitHub refusing the merge.
func TestMergeWithReuseStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		// act happens once the merge waits for the checks (or, for the
		// update's refusal, nothing).
		act  func(w *world, clock *movingClock)
		want []string
	}{
		{"update refused", func(w *world) {
			w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
			w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 422, Body: `{"message":"merge conflict between base and head"}`})
		}, nil, []string{"⛔ stopped: GitHub refused to update the branch (merge conflict between base and head). Update the branch by hand, then pin a run again. The pin of run [31147925932](",
			"it took is revoked: the next push sweeps"}},
		{"failed check", func(w *world) {
			w.GreenChecks(e2e.SHA("c1"))
			w.GH.SetCheckRun(theRepo, e2e.SHA("c1"), "sweep / benchmarks", "completed", "failure")
		}, nil, []string{"⛔ stopped: `sweep / benchmarks` failed on c1c1c1c"}},
		{"a failed status", func(w *world) {
			w.GreenChecks(e2e.SHA("c1"))
			w.GH.SetStatus(theRepo, e2e.SHA("c1"), "ci/external", "error")
		}, nil, []string{"⛔ stopped: `ci/external` failed on c1c1c1c"}},
		{"a push by someone else", (*world).PendingChecks, func(w *world, clock *movingClock) {
			w.Push("c2")
			w.PassTime(clock, record.WakeGap)
		}, []string{"⛔ stopped: a new push (head c2c2c2c) came after c1c1c1c"}},
		{"cancel", (*world).PendingChecks, func(w *world, _ *movingClock) {
			w.Comment(maintainer, "/merge-with-reuse cancel")
			e2e.MustContain(w.T, "cancel reply", w.LastReply(), "@maintainer cancelled the merge of this PR asked by @maintainer. The pin of run [31147925932](")
		}, []string{"⛔ stopped: cancelled by @maintainer"}},
		{"the PR closed", (*world).PendingChecks, func(w *world, clock *movingClock) {
			w.ClosePR(false, "")
			w.PassTime(clock, record.WakeGap)
		}, []string{"⛔ stopped: the PR was closed"}},
		{"the deadline", (*world).PendingChecks, func(w *world, clock *movingClock) {
			w.PassTime(clock, 2*time.Hour+time.Minute)
		}, []string{"⛔ stopped: it did not finish within 2h of the command (waiting for the checks)"}},
		{"the PR retargeted", (*world).PendingChecks, func(w *world, clock *movingClock) {
			w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.BaseRef = "release-unprotected" })
			w.PassTime(clock, merge.Poll)
		}, []string{"⛔ stopped: the PR now merges into `release-unprotected`, not `main`"}},
		{"a review wanted", func(w *world) {
			w.GreenChecks(e2e.SHA("c1"))
			w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.ReviewRequired = true })
		}, nil, []string{"⛔ stopped: the checks are green, but branch protection blocks the merge", "opsbot does not bypass it"}},
		{"the merge refused", func(w *world) {
			w.GreenChecks(e2e.SHA("c1"))
			w.GH.Inject(routeMerge, githubtest.Fault{Status: 405, Body: `{"message":"Repository rule violations found"}`})
		}, nil, []string{"⛔ stopped: GitHub refused the merge of c1c1c1c (405: Repository rule violations found)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := mergeWorld(t, "", clock)
			tc.setup(w)
			w.Comment(maintainer, "/merge-with-reuse 31147925932")
			if tc.act != nil {
				w.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
				tc.act(w, clock)
			}
			st := w.WaitStatus("the stop", "⛔ stopped")
			e2e.MustContain(t, "status", st, tc.want...)
			if m := w.GH.Merges(); len(m) != 0 {
				t.Fatalf("merged %+v", m)
			}
			var stopped bool
			for _, r := range w.AuditRecords() {
				if r["kind"] == "merge" && r["outcome"] == "stopped" {
					stopped = true
				}
			}
			if !stopped {
				t.Fatal("the audit has no stopped merge")
			}
		})
	}
}

// A merge survives a restart in each waiting state: what it waited for is
// read again when its wake-up comes.
func TestMergeWithReuseResumesAfterARestart(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := mergeWorld(t, "", clock)
	restart := func() {
		w.Srv.Stop(t)
		w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
	}
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	restart() // waiting for the update's push
	updated := w.GH.PRHead(theRepo, thePR)
	w.GH.SetCheckRun(theRepo, updated, "lint", "in_progress", "")
	w.SendSync(updated, "")
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("waiting for the checks", "waiting for the checks of `"+updated[:7]+"`")
	restart() // waiting for the checks
	w.GH.SetCheckRun(theRepo, updated, "lint", "completed", "success")
	w.CheckEvent(updated)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the merge", "🎉 merged")
	if m := w.GH.Merges(); len(m) != 1 || m[0].SHA != updated {
		t.Fatalf("merges %+v; want one of %s", m, updated)
	}
}

// A reader cannot merge: the command is refused before anything is pinned
// or asked of GitHub.
func TestMergeWithReuseRefusesAReader(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.Comment(reader, "/merge-with-reuse 31147925932")
	clock.Add(time.Minute)
	w.Settle()
	if st := w.MergeStatus(); st != "" {
		t.Fatalf("a reader started a merge: %s", st)
	}
	if len(w.GH.Merges()) != 0 || w.GH.Count(routeUpdateBranch) != 0 {
		t.Fatal("a reader's command reached GitHub's merge")
	}
	var refused bool
	for _, r := range w.AuditRecords() {
		if r["kind"] == "command" && r["command"] == "merge-with-reuse" && r["outcome"] == "denied" {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("no denied merge-with-reuse in the audit: %v", w.Trail())
	}
}

// A pin and a merge in one comment each grant the PR's one pin: the last
// line of the two runs and the earlier is answered as not run, as two pins
// in one comment are, in either order.
func TestMergeWithReuseAndAPinInOneComment(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.Comment(maintainer, "/reuse-sweep-run 31147925932\n\n/merge-with-reuse 31147925932")
	w.WaitStatus("the merge", "🎉 merged")
	e2e.MustContain(t, "reply", strings.Join(w.Replies(), "\n"), "`/reuse-sweep-run 31147925932` (line 1) was not run: `/merge-with-reuse` later in this comment wins")

	w2 := mergeWorld(t, "", clock)
	w2.Comment(maintainer, "/merge-with-reuse 31147925932\n\n/use 31147925932")
	e2e.MustContain(t, "reply", strings.Join(w2.Replies(), "\n"), "`/merge-with-reuse 31147925932` (line 1) was not run: `/reuse-sweep-run` later in this comment wins", "📌 @maintainer pinned run")
	if st := w2.MergeStatus(); st != "" {
		t.Fatalf("a merge started although a later pin won: %s", st)
	}
}

// Under allowed_paths, the update's merge of the default branch brings the
// default branch's files into the PR, which do not count: the update's
// push still skips its sweep on the pin, and the merge goes on.
func TestMergeWithReuseUnderAllowedPaths(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\"]\n", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) {
		p.Behind, p.UpdateFiles = true, []string{"benchmarks/other.sh", "utils/merge.py"}
	})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	updated := w.GH.PRHead(theRepo, thePR)
	w.GreenChecks(updated)
	w.SendSync(updated, "")
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("the merge", "🎉 merged")
	e2e.MustContain(t, "status", st, "its sweep is skipped, reusing run")
	if got := w.GH.Statuses(theRepo, updated); len(got) == 0 || !strings.HasPrefix(got[len(got)-1].Description, "skip") {
		t.Fatalf("the update's push was not skipped: statuses %+v", got)
	}
}

// A merge that stops revokes the pin it took while no push has used it:
// the next push sweeps. Deleting the command's comment stops the merge.
func TestMergeWithReuseStopsTakeTheirPinBack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.GH.SetCheckRun(theRepo, e2e.SHA("c1"), "lint", "completed", "failure")
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "`lint` failed on c1c1c1c. The pin of run [31147925932](", "is revoked: the next push sweeps")
	w.Push("c2")
	if !w.Swept("c2") {
		t.Fatalf("a push after a stopped merge skipped its sweep: %+v", w.Statuses("c2"))
	}

	w2 := mergeWorld(t, "", clock)
	w2.PendingChecks()
	c := w2.Comment(maintainer, "/merge-with-reuse 31147925932")
	w2.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
	w2.CommentEvent("deleted", maintainer, maintainer, c.ID, c.Body, "")
	st = w2.WaitStatus("the stop", "⛔ stopped")
	e2e.MustContain(t, "status", st, "@maintainer deleted the comment that asked for it")
}

// Merging pins a run: someone allowed to merge but not to pin is refused.
func TestMergeWithReuseNeedsTheRoleToPin(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    reuse:\n      min_role: maintain\n", clock)
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	e2e.MustContain(t, "reply", w.LastReply(), "I did not start the merge: it pins a run, which needs")
	if st := w.MergeStatus(); st != "" {
		t.Fatalf("a merge started: %s", st)
	}
}

// A push that comes while the merge has not looked at the branch yet (GitHub
// still working out whether it can be merged) stops the merge, and the stop
// says what the gate did with that push (a merge's pin covers only the
// update opsbot asks for: it swept), never that the pin covers it.
func TestMergeWithReuseStoppedByAPushSaysWhatThePushDid(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the merge waits for GitHub", "GitHub is still working out whether the branch can be merged")
	w.Push("c2")
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("the merge stopped", "⛔ stopped")
	e2e.MustContain(t, "status", st, "a new push (head c2c2c2c) came before the branch was looked at; opsbot's gate decided it sweeps (")
	if strings.Contains(st, "the pin covers that push") || !w.Swept("c2") {
		t.Fatalf("the stop of a push the gate swept:\n%s\n%+v", st, w.Statuses("c2"))
	}
}
