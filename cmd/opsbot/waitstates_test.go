package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/approve"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

const (
	routePR      = "GET /repos/{owner}/{repo}/pulls/{n}"
	routeRunRead = "GET /repos/{owner}/{repo}/actions/runs/{id}"
)

// waitingState is one state a sequence waits in, for the engine's tests.
type waitingState struct {
	name string
	// world builds the world; enter brings the sequence to the state and
	// waits until its status says so.
	world func(t *testing.T, deps func(*app.Deps)) *world
	enter func(w *world, clock *movingClock)
	// deadline passes the sequence's deadline from the state; ended is
	// what its status says then.
	deadline time.Duration
	ended    []string
	// fail is a GitHub read the state's step makes (empty: the step reads
	// nothing of GitHub); moved, after it heals, makes what the step waits
	// for happen and waits until the sequence moved on.
	fail  string
	moved func(w *world, clock *movingClock)
	// poll is how long the state waits before it reads GitHub again.
	poll time.Duration
}

// engineDeps are the server's dependencies in the engine's tests: the
// test's clock, due sequences looked for often, a failing delivery given
// up on at once, and one try of each GitHub read.
func engineDeps(clock *movingClock) func(*app.Deps) {
	return func(d *app.Deps) {
		d.Now, d.SeqEvery, d.Worker = clock.Now, 10*time.Millisecond, quickWorkers
		d.GitHub = func(o *ghclient.Options) { o.MaxTries = 1 }
	}
}

func waitingStates() []waitingState {
	mergeW := func(t *testing.T, deps func(*app.Deps)) *world {
		return newWorldOpts(t, worldOpts{Repo: "    merge:\n      min_role: write\n", Deps: deps})
	}
	approveW := func(t *testing.T, deps func(*app.Deps)) *world {
		w := newWorldOpts(t, worldOpts{Repo: "    external:\n      workflow: " + e2e.ExternalWorkflow + "\n", Deps: deps})
		w.GH.AddWorkflow(theRepo, "e2e-tests.yml", e2e.ExternalWorkflowID)
		w.GH.SetRole(theRepo, maintLog, "maintain")
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = e2e.ForkRepoID, e2e.ForkRepo })
		return w
	}
	return []waitingState{
		{name: "merge: waiting for GitHub's mergeability", world: mergeW,
			enter: func(w *world, _ *movingClock) {
				w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
				w.Comment(maintainer, "/merge-with-reuse 31147925932")
				w.WaitStatus("waiting for mergeability", "GitHub is still working out whether the branch can be merged")
			},
			deadline: merge.DefaultChecksTimeout, ended: []string{"⛔ stopped: it did not finish within 2h of the command (about to look at the branch)"},
			fail: routePR,
			poll: merge.Poll,
			moved: func(w *world, clock *movingClock) {
				w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
				w.GreenChecks(sha("c1"))
				w.PassTime(clock, merge.Poll)
				w.WaitStatus("the merge", "🎉 merged `c1c1c1c`")
			}},
		{name: "merge: waiting for the update's push", world: mergeW,
			enter: func(w *world, _ *movingClock) {
				w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
				w.GH.Inject(routeUpdateBranch, githubtest.Fault{Status: 202, Body: `{"message":"Updating pull request branch."}`})
				w.Comment(maintainer, "/merge-with-reuse 31147925932")
				w.WaitStatus("the update asked", "update asked")
			},
			deadline: merge.DefaultChecksTimeout, ended: []string{"⛔ stopped: it did not finish within 2h of the command (updating the branch)"},
			fail: routePR, poll: merge.Poll,
			moved: func(w *world, _ *movingClock) {
				// No push came within the wait: the merge says so.
				w.WaitStatus("the update given up", "⛔ stopped: GitHub made no push 10m after the update was asked")
			}},
		{name: "merge: waiting for the checks", world: mergeW,
			enter: func(w *world, _ *movingClock) {
				w.PendingChecks()
				w.Comment(maintainer, "/merge-with-reuse 31147925932")
				w.WaitStatus("waiting for the checks", "waiting for the checks of `c1c1c1c`")
			},
			deadline: merge.DefaultChecksTimeout, ended: []string{"⛔ stopped: it did not finish within 2h of the command (waiting for the checks)"},
			fail: routeCheckRuns, poll: merge.Poll,
			moved: func(w *world, clock *movingClock) {
				w.GH.SetCheckRun(theRepo, sha("c1"), "sweep / benchmarks", "completed", "success")
				w.PassTime(clock, merge.Poll)
				w.WaitStatus("the merge", "🎉 merged `c1c1c1c`")
			}},
		{name: "approval: waiting for GitHub's merge commit", world: approveW,
			enter: func(w *world, _ *movingClock) {
				w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
				w.Comment(maintainer, "/approve-sweep "+sha("c1"))
				w.WaitApproval("waiting for the merge commit", "GitHub is still making")
			},
			deadline: approve.DefaultRunTimeout, ended: []string{"expired: it was not dispatched within 12h of the approval"},
			fail: routePR, poll: approve.Poll,
			moved: func(w *world, clock *movingClock) {
				w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
				w.PassTime(clock, approve.Poll)
				w.DispatchedRun()
				w.WaitApproval("the run bound", "waiting for the run")
			}},
		{name: "approval: waiting for its run", world: approveW,
			enter: func(w *world, _ *movingClock) {
				w.Comment(maintainer, "/approve-sweep "+sha("c1"))
				w.DispatchedRun()
				w.WaitApproval("the run bound", "waiting for the run")
			},
			deadline: approve.DefaultRunTimeout, ended: []string{"expired: its run", "did not finish within 12h of the approval"},
			fail: routeRunRead, poll: approve.RunPoll,
			moved: func(w *world, clock *movingClock) {
				w.GH.CompleteRun(theRepo, w.GH.WorkflowDispatches()[0].RunID, "success", resultArtifacts)
				w.PassTime(clock, approve.RunPoll)
				w.WaitApproval("the approval completed", "completed:")
			}},
		{name: "stage: waiting for the staging side's report",
			world: func(t *testing.T, deps func(*app.Deps)) *world {
				w := newWorldOpts(t, worldOpts{Repo: stageCfg + "      report_timeout: 2h\n", Deps: deps})
				w.GH.AddRepo(stagingRepo, "stage.yml", 500)
				return w
			},
			enter: func(w *world, _ *movingClock) {
				w.Comment(maintainer, "/stage-results 31147925932")
				w.Settle()
			},
			deadline: 2 * time.Hour, ended: []string{"did not report within 2h0m0s"}},
	}
}

// The engine's retry and deadline, for every kind of sequence, with a
// restart in each state it waits in: after the restart the deadline fires
// (whatever GitHub answers, before GitHub is read), and a step that fails
// for good (GitHub down longer than the worker's tries: dead-lettered) is
// woken again in the next retry window and moves on. The weekly digest has
// no deadline and reads nothing of GitHub; its restarts are
// TestWeeklyDigestOncePerWeekAcrossRestarts'.
func TestEveryKindRetriesAndExpiresAfterARestart(t *testing.T) {
	t.Parallel()
	for _, s := range waitingStates() {
		t.Run(s.name+": deadline", func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			deps := engineDeps(clock)
			w := s.world(t, deps)
			s.enter(w, clock)
			w.Srv.Stop(t)
			w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
			if s.fail != "" {
				w.GH.Inject(s.fail, githubtest.Fault{Status: 502}) // the end needs nothing of GitHub
			}
			w.PassTime(clock, s.deadline+time.Second)
			testkit.Eventually(t, "the end at the deadline", func() bool {
				for _, r := range w.Replies() {
					if containsAll(r, s.ended...) {
						return true
					}
				}
				return false
			})
		})
		if s.fail == "" {
			continue
		}
		t.Run(s.name+": a step failed for good", func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			deps := engineDeps(clock)
			w := s.world(t, deps)
			s.enter(w, clock)
			w.Srv.Stop(t)
			w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
			w.GH.Inject(s.fail, githubtest.Fault{Status: 502})
			dead := w.deadLetters()
			clock.Add(s.poll)
			testkit.Eventually(t, "the failing step dead-lettered", func() bool { return w.deadLetters() > dead })
			w.GH.Heal(s.fail)
			w.PassTime(clock, seq.Retry)
			s.moved(w, clock)
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
