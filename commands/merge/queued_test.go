package merge_test

import (
	"encoding/json"
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

const routeGraphQL = "POST /graphql"

// groupAsk is a merge_group ask's JSON body.
func groupAsk(ref, commit string) string {
	raw, _ := json.Marshal(map[string]any{"repo": theRepo, "event": "merge_group", "ref": ref, "sha": commit})
	return string(raw)
}

// The gate answers a merge group's commit by the PR's decision: a group
// with exactly the files of a head whose sweep reused a run skips its
// sweep on that run; a group whose files differ (the base moved under the
// PR), or of a head that swept, sweeps; a ref that is not a group's is
// refused, and a ref naming another PR gains nothing.
func TestGateAnswersAMergeGroupByThePRsDecision(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml")
	ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	out := w.GateFlags("--event", "merge_group", "--ref", ref, "--sha", e2e.SHA("f1"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-source-pr-number"] != "2512" ||
		!strings.Contains(out["reuse-reason"], "has exactly the files of its head c2c2c2c") {
		t.Fatalf("gate for the group of c2 = %v", out)
	}
	// The base moved under the PR: the group's files are not the head's.
	ref = w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f2"), false)
	out = w.GateFlags("--event", "merge_group", "--ref", ref, "--sha", e2e.SHA("f2"))
	if out["skip-pr-sweep"] != "false" || out["reuse-source-run-id"] != "" || !strings.Contains(out["reuse-reason"], "its files are not those of the PR's head c2c2c2c") {
		t.Fatalf("gate for a group of other files = %v", out)
	}
	// A group ref is the asker's word: another PR's number in it reads that PR.
	other := strings.Replace(ref, "/pr-2512-", "/pr-7-", 1)
	rep := w.Call("POST", "/api/v1/gate", groupAsk(other, e2e.SHA("f1")))
	if rep.Code == 200 && strings.Contains(rep.Body, "skip-pr-sweep=true") {
		t.Fatalf("a group ref naming another PR answered %d %s", rep.Code, rep.Body)
	}
	// A group branch naming another base than the PR's gains nothing
	// either, though its files are the head's.
	ref = w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f4"), true)
	out = w.GateFlags("--event", "merge_group", "--ref", strings.Replace(ref, "gh-readonly-queue/main/", "gh-readonly-queue/release/", 1), "--sha", e2e.SHA("f4"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "the group's branch names the base release, the PR merges into main") {
		t.Fatalf("gate for a group branch of another base = %v", out)
	}
	rep = w.Call("POST", "/api/v1/gate", groupAsk("refs/heads/kimi-tune", e2e.SHA("f1")))
	if rep.Code != 400 || !strings.Contains(rep.Body, "is not a merge group's branch") {
		t.Fatalf("a ref that is no group's = %d %s", rep.Code, rep.Body)
	}
	// A head that swept: its group sweeps too.
	w.Push("c3", "perf-changelog.yaml")
	ref = w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f3"), true)
	out = w.GateFlags("--event", "merge_group", "--ref", ref, "--sha", e2e.SHA("f3"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "the PR's head c3c3c3c was not skipped") {
		t.Fatalf("gate for the group of a swept head = %v", out)
	}
}

// lostEnqueue asks the merge, and GitHub queues the PR but its answer to
// the enqueue is lost (the first GraphQL request is the queue read before
// it).
func (w *world) lostEnqueue() {
	w.T.Helper()
	w.GH.Inject(routeGraphQL, githubtest.Fault{Lost: true, Times: 1, Skip: 1})
	// The queue's read back, right after, fails: whether it was queued
	// is not known until the next step reads it.
	w.GH.Inject(routeGraphQL, githubtest.Fault{Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("unanswered", "GitHub did not answer adding the PR to the merge queue")
}

// groupTested queues the PR; the queue makes its group f1 of exactly the
// head and asks for its checks, and the status comment tells it. It
// returns the group's branch.
func (w *world) groupTested(clock *movingClock) string {
	w.T.Helper()
	w.mergeQueued()
	ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f1"), ref)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the group told", "the merge queue tests the group `f1f1f1f`")
	return ref
}

// queueMerges merges the PR as its queue does, with GitHub's events: the
// group destroyed as merged, the PR closed merged.
func (w *world) queueMerges(group, ref string) {
	w.T.Helper()
	w.GH.MergeByQueue(theRepo, thePR, group)
	w.SendMergeGroup("destroyed", "merged", group, ref)
	w.ClosedMerged(group)
}

// queueWorld is a merge world whose default branch takes its merges
// through GitHub's merge queue, the PR's head up to date and green.
func queueWorld(t *testing.T, clock *movingClock) *world {
	t.Helper()
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GH.SetBranchRules(theRepo, "main", "merge_queue")
	w.GreenChecks(e2e.SHA("c1"))
	return w
}

// mergeQueued asks the merge and waits until the head is in the queue.
func (w *world) mergeQueued() {
	w.T.Helper()
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("queued", "added to the merge queue of `main`")
}

// A default branch whose rules require a merge queue: /merge-with-reuse
// adds the decided head to the queue (naming it) instead of merging; the
// queue's group of exactly that head is answered skip on the pinned run
// (its gate status, opsbot/reuse-ready and the workflow's ask), the status
// comment tells the group and the queue's merge, and the default branch's
// push reuses the run.
func TestMergeWithReuseGoesThroughTheMergeQueue(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("queued", "added to the merge queue of `main`", "⏳ in the merge queue (queued")
	if n := len(w.GH.Merges()); n != 0 {
		t.Fatalf("merged through the API with a merge queue required: %d merges", n)
	}
	if q := w.GH.Enqueues(); len(q) != 1 || q[0] != e2e.SHA("c1") || w.GH.Queued(theRepo, thePR) == "" {
		t.Fatalf("enqueues %v, queued %q; want c1 queued once", q, w.GH.Queued(theRepo, thePR))
	}
	ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f1"), ref)
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("the group told", "the merge queue tests the group `f1f1f1f`")
	e2e.MustContain(t, "status", st, "has exactly the files of its head c1c1c1c, for which @maintainer pinned run 31147925932")
	var gateSt, ready string
	groupStatuses := func() bool {
		for _, s := range w.GH.Statuses(theRepo, e2e.SHA("f1")) {
			switch s.Context {
			case "opsbot/sweep-gate":
				gateSt = s.Description
			case "opsbot/reuse-ready":
				ready = s.State + " " + s.Description
			}
		}
		return gateSt != "" && ready != ""
	}
	testkit.Eventually(t, "the group's statuses", groupStatuses)
	if gateSt != "skip: reusing run 31147925932, authorized by @maintainer" || !strings.HasPrefix(ready, "success merge group of c1c1c1c: merge will reuse run 31147925932") {
		t.Fatalf("the group's statuses: gate %q, reuse-ready %q", gateSt, ready)
	}
	out := w.GateFlags("--event", "merge_group", "--ref", ref, "--sha", e2e.SHA("f1"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("gate for the group = %v", out)
	}
	// The queue's checks pass: it moves main to the group and closes the PR.
	w.queueMerges(e2e.SHA("f1"), ref)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("merged", "🎉 the merge queue merged `c1c1c1c` as `f1f1f1f`")
	out = w.GateFlags("--event", "push", "--sha", e2e.SHA("f1"))
	if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("push gate after the queue's merge = %v", out)
	}
	if n := len(w.GH.Merges()); n != 0 {
		t.Fatalf("%d merges through the API", n)
	}
}

// Where a queued merge can be interrupted: GitHub's answer to the enqueue
// lost (the queue is read, never asked again blindly), a branch whose
// classic protection requires the queue (GitHub refuses the merge, and the
// next step enqueues), the deadline while queued (taken out of the
// queue), and a push while queued.
func TestMergeWithReuseQueueFaults(t *testing.T) {
	t.Parallel()
	t.Run("enqueue answer lost", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.lostEnqueue()
		w.PassTime(clock, merge.MergeWait/4)
		st := w.WaitStatus("found queued", "`c1c1c1c` is in the merge queue of `main` (found queued)")
		if q := w.GH.Enqueues(); len(q) != 1 {
			t.Fatalf("enqueued %d times (%v); want once\n%s", len(q), q, st)
		}
	})
	t.Run("enqueue answer lost, read back at once", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.GH.Inject(routeGraphQL, githubtest.Fault{Lost: true, Times: 1, Skip: 1})
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		st := w.WaitStatus("found queued", "`c1c1c1c` is in the merge queue of `main` (found queued after an answer that did not say)")
		if q := w.GH.Enqueues(); len(q) != 1 || strings.Contains(st, "did not answer") {
			t.Fatalf("enqueued %d times (%v); want once, found by the read back\n%s", len(q), q, st)
		}
	})
	t.Run("classic protection", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := mergeWorld(t, "", clock)
		w.GH.SetClassicQueue(theRepo, "main")
		w.GreenChecks(e2e.SHA("c1"))
		w.Comment(maintainer, "/merge-with-reuse 31147925932")
		st := w.WaitStatus("queued", "added to the merge queue of `main`")
		e2e.MustContain(t, "status", st, "🚦 GitHub takes merges into `main` through its merge queue (", "Changes must be made through the merge queue")
		if q := w.GH.Enqueues(); len(q) != 1 || q[0] != e2e.SHA("c1") || len(w.GH.Merges()) != 0 {
			t.Fatalf("enqueues %v, merges %v", q, w.GH.Merges())
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.mergeQueued()
		w.PassTime(clock, merge.DefaultChecksTimeout+time.Minute)
		w.WaitStatus("stopped", "⛔ stopped: it did not finish within 2h of adding it to the merge queue (in the merge queue). It is taken out of the merge queue")
		if q := w.GH.Queued(theRepo, thePR); q != "" {
			t.Fatalf("still queued (%s) after the deadline", q)
		}
	})
	t.Run("a push while queued", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.mergeQueued()
		w.GH.LeaveQueue(theRepo, thePR) // GitHub takes a PR pushed to out of its queue
		w.Push("c2", "perf-changelog.yaml")
		w.PassTime(clock, record.WakeGap)
		w.WaitStatus("stopped", "⛔ stopped: a new push (head c2c2c2c) came after c1c1c1c, the head queued")
	})
}

// A restart while the enqueue is under way: whether GitHub queued the PR
// is read from its queue entry by the next process, never asked blindly.
// Made before the stop (its answer lost): found queued, asked once. Never
// made: not queued a minute later, so marked anew and asked once by the
// new process.
func TestMergeWithReuseQueueAfterARestart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		made  bool
		asked int
		want  string
	}{
		{"enqueue made, its answer lost", true, 1, "(found queued)"},
		{"enqueue never made", false, 1, "merge queue of `main`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
			w := queueWorld(t, clock)
			// The first GraphQL request is the queue read before the enqueue.
			hold := w.GH.HoldAfter
			if c.made {
				hold = w.GH.HoldAnswerAfter
			}
			arrived, release := hold(routeGraphQL, 1)
			t.Cleanup(release)
			mergeHeld(t, w, arrived, "the PR was never enqueued")
			w.Srv.Stop(t)
			release()
			w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
			w.PassTime(clock, time.Minute)
			if !c.made {
				w.PassTime(clock, merge.MergeWait)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Log(w.MergeStatus())
				}
			})
			st := w.WaitStatus("queued", c.want, "⏳ in the merge queue")
			if q := w.GH.Enqueues(); len(q) != c.asked {
				t.Fatalf("enqueued %d times (%v); want %d\n%s", len(q), q, c.asked, st)
			}
		})
	}
}

// GitHub's queue says the group merged before the PR reads merged: the
// merge waits and reads again, and records the merge, never "left the
// queue without being merged".
func TestMergeWithReuseQueueMergeSeenLate(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	ref := w.groupTested(clock)
	w.GH.LeaveQueue(theRepo, thePR)
	w.SendMergeGroup("destroyed", "merged", e2e.SHA("f1"), ref)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("waiting for the merge's record", "the merge queue merged the PR: waiting for GitHub's record of it")
	w.GH.MergeByQueue(theRepo, thePR, e2e.SHA("f1"))
	w.ClosedMerged(e2e.SHA("f1"))
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("merged", "🎉 the merge queue merged `c1c1c1c` as `f1f1f1f`")
	if strings.Contains(st, "without being merged") {
		t.Fatalf("status:\n%s", st)
	}
}

// The group of a head that swept itself before the pin was granted at it
// (the usual up-to-date PR): the pin stands in, so the group skips.
func TestGateAnswersTheGroupOfAPinnedHeadThatSwept(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.SendSync(e2e.SHA("c1"), "") // c1's own push: it sweeps (no pin yet)
	w.mergeQueued()
	ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	out := w.GateFlags("--event", "merge_group", "--ref", ref, "--sha", e2e.SHA("f1"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("the group of the pinned head that swept = %v", out)
	}
}

// The deadline ends a queued merge even while GitHub's GraphQL API refuses
// everything: the stop says the PR may still merge.
func TestMergeWithReuseQueueDeadlineWithoutGraphQL(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.mergeQueued()
	w.GH.Inject(routeGraphQL, githubtest.Fault{Status: 200, Body: `{"data":null,"errors":[{"type":"FORBIDDEN","message":"Resource not accessible by integration"}]}`})
	w.PassTime(clock, merge.DefaultChecksTimeout+time.Minute)
	w.WaitStatus("stopped", "⛔ stopped: it did not finish within 2h", "could not take the PR out of the merge queue", "it may still merge")
}

// After a lost enqueue answer, a PR someone took out of the queue is not
// queued again: GitHub's timeline shows it was added since (no group made,
// no event), or a group of it was tested since.
func TestMergeWithReuseDoesNotQueueAgainWhatLeft(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("group seen %v", group), func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := queueWorld(t, clock)
			w.lostEnqueue()
			if group {
				ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
				w.SendMergeGroup("checks_requested", "", e2e.SHA("f1"), ref)
			}
			w.GH.LeaveQueue(theRepo, thePR) // a maintainer takes it out
			w.PassTime(clock, merge.MergeWait/4)
			w.WaitStatus("read again", "the PR left the merge queue: reading whether it merged")
			w.PassTime(clock, merge.MergeWait)
			st := w.WaitStatus("stopped", "⛔ stopped: the PR left the merge queue without being merged")
			if q := w.GH.Enqueues(); len(q) != 1 || w.GH.Queued(theRepo, thePR) != "" {
				t.Fatalf("enqueued %d times, queued now %q\n%s", len(q), w.GH.Queued(theRepo, thePR), st)
			}
		})
	}
}

// Two groups' events in any order: the queue merged the later group, the
// earlier group's invalidation arrives after, and the PR shows the merge a
// moment later: the merge records the merge, never "without being merged".
func TestMergeWithReuseQueueEventsOutOfOrder(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.mergeQueued()
	ref1 := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f1"), ref1)
	ref2 := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f2"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f2"), ref2)
	w.GH.LeaveQueue(theRepo, thePR)
	w.SendMergeGroup("destroyed", "merged", e2e.SHA("f2"), ref2)
	w.SendMergeGroup("destroyed", "invalidated", e2e.SHA("f1"), ref1)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("read again", "the merge queue merged the PR: waiting for GitHub's record of it")
	w.GH.MergeByQueue(theRepo, thePR, e2e.SHA("f2"))
	w.ClosedMerged(e2e.SHA("f2"))
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("merged", "🎉")
	if strings.Contains(st, "without being merged") {
		t.Fatalf("status:\n%s", st)
	}
}

// The queue said it merged the PR, and GitHub's record of the merge never
// shows on the PR before the deadline: the merge is recorded as the
// queue's (its group the merge commit), never as a PR that left the queue
// unmerged.
func TestMergeWithReuseQueueWordOfAMergeStands(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	ref := w.groupTested(clock)
	w.GH.LeaveQueue(theRepo, thePR)
	w.SendMergeGroup("destroyed", "merged", e2e.SHA("f1"), ref)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("waiting for the record", "the merge queue merged the PR: waiting for GitHub's record of it")
	w.PassTime(clock, merge.MergeWait*2)
	if st := w.MergeStatus(); strings.Contains(st, "⛔") {
		t.Fatalf("stopped while the queue's word is that it merged:\n%s", st)
	}
	w.PassTime(clock, merge.DefaultChecksTimeout)
	w.WaitStatus("merged", "🎉 the merge queue merged `c1c1c1c` as `f1f1f1f`")
}

// A cancel stored while the step that adds the PR to the merge queue reads
// the checks goes first: the enqueue is sent through the engine's act
// path, whose stop check is the last thing before it; the cancel stops the
// merge and nothing is queued.
func TestMergeWithReuseYieldsToACancelBeforeEnqueueing(t *testing.T) {
	t.Parallel()
	w := queueWorld(t, e2e.NewClock())
	// The first read of the checks marks the enqueue; the second, in the
	// step that sends it, is held while the cancel comes.
	arrived, release := w.GH.HoldAfter(routeCheckRuns, 1)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the enqueueing step reads the checks")
	w.cancelNoSettle()
	release()
	w.WaitStatus("the merge cancelled", "⛔ stopped: cancelled by @maintainer")
	if q := w.GH.Enqueues(); len(q) != 0 || w.GH.Queued(theRepo, thePR) != "" {
		t.Fatalf("enqueued %v after an acknowledged cancel", q)
	}
}

// An older group's end delivered after a newer group's start (GitHub does
// not promise their order): the group under test stays what the merge
// says, not hidden by the older group's invalidation.
func TestMergeWithReuseLateEndOfAnOlderGroupKeepsTheNewer(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.mergeQueued()
	ref1 := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f1"), ref1)
	ref2 := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f2"), true)
	w.SendMergeGroup("checks_requested", "", e2e.SHA("f2"), ref2)
	w.SendMergeGroup("destroyed", "invalidated", e2e.SHA("f1"), ref1)
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("the newer group told", "the merge queue tests the group `f2f2f2f`")
}
