package merge_test

import (
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A queued merge stops when the queue drops its group (said why), and a
// cancel takes the PR out of the queue: nothing merges after it.
func TestMergeWithReuseLeavesTheMergeQueue(t *testing.T) {
	t.Parallel()
	t.Run("invalidated", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.mergeQueued()
		ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
		w.GH.LeaveQueue(theRepo, thePR)
		w.SendMergeGroup("destroyed", "invalidated", e2e.SHA("f1"), ref)
		w.PassTime(clock, record.WakeGap)
		w.WaitStatus("read again", "the PR left the merge queue: reading whether it merged")
		w.PassTime(clock, merge.MergeWait)
		w.WaitStatus("stopped", "⛔ stopped: the PR left the merge queue without being merged: its group was invalidated")
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		clock := e2e.NewClock()
		w := queueWorld(t, clock)
		w.mergeQueued()
		w.Comment(maintainer, "/merge-with-reuse cancel")
		w.WaitStatus("cancelled", "⛔ stopped: cancelled by @maintainer. It is taken out of the merge queue")
		e2e.MustContain(t, "reply", w.LastReply(), "cancelled the merge of this PR asked by @maintainer. It is taken out of the merge queue.")
		if q := w.GH.Queued(theRepo, thePR); q != "" {
			t.Fatalf("the PR is still in the queue (%s) after the cancel", q)
		}
	})
}

// A queued PR's enqueue whose answer was lost, then a check that runs
// again: the queue is read before any check (the PR is found queued), so
// a cancel still takes it out of the queue.
func TestMergeWithReuseCancelAfterALostEnqueue(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.lostEnqueue()
	w.GH.SetCheckRun(theRepo, e2e.SHA("c1"), "lint", "in_progress", "")
	w.PassTime(clock, merge.MergeWait/4)
	w.WaitStatus("found queued", "(found queued)")
	w.Comment(maintainer, "/merge-with-reuse cancel")
	w.WaitStatus("cancelled", "cancelled by @maintainer. It is taken out of the merge queue")
	if q := w.GH.Queued(theRepo, thePR); q != "" {
		t.Fatalf("cancelled, but the PR is still in the merge queue (%s)", q)
	}
	if n := len(w.GH.Enqueues()); n != 1 {
		t.Fatalf("enqueued %d times; want once", n)
	}
}

// A cancel read while GitHub records the queue's merge (the queue said the
// group merged; the PR does not show it yet) is too late, and says so: the
// merge goes on reading and records the merge.
func TestMergeWithReuseCancelWhileTheQueueMerges(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	ref := w.groupTested(clock)
	w.GH.LeaveQueue(theRepo, thePR)
	w.SendMergeGroup("destroyed", "merged", e2e.SHA("f1"), ref)
	w.Comment(maintainer, "/merge-with-reuse cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "too late: GitHub's merge queue merged this PR")
	w.GH.MergeByQueue(theRepo, thePR, e2e.SHA("f1"))
	w.ClosedMerged(e2e.SHA("f1"))
	w.PassTime(clock, record.WakeGap)
	st := w.WaitStatus("merged", "🎉 the merge queue merged `c1c1c1c` as `f1f1f1f`")
	if strings.Contains(st, "cancelled") {
		t.Fatalf("status:\n%s", st)
	}
}

// A cancel whose dequeue GitHub did not confirm is taken at once (the pin
// revoked, the reply saying the PR is being taken out), and the merge
// keeps taking the PR out: a 502 throughout the cancel, then GitHub back:
// taken out; a dequeue made with its answer lost: out of the queue, and
// not merged within a minute, so stopped as cancelled.
func TestMergeWithReuseCancelDequeueFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fault githubtest.Fault
		want  string
	}{
		{"GitHub down", githubtest.Fault{Status: 502, Body: `{"message":"Bad Gateway"}`}, "⛔ stopped: cancelled by @maintainer. It is taken out of the merge queue"},
		{"answer lost", githubtest.Fault{Lost: true, Times: 1}, "⛔ stopped: cancelled by @maintainer. It is out of the merge queue"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := queueWorld(t, clock)
			w.mergeQueued()
			w.GH.Inject(routeGraphQL, c.fault)
			w.Comment(maintainer, "/merge-with-reuse cancel")
			e2e.MustContain(t, "reply", w.LastReply(), "cancelled the merge of this PR asked by @maintainer. The PR is being taken out of the merge queue",
				"is revoked; the next push sweeps")
			w.WaitStatus("leaving", "✋ cancelled by @maintainer: taking the PR out of the merge queue")
			w.GH.Heal(routeGraphQL)
			w.PassTime(clock, merge.MergeWait/4)
			if c.fault.Lost {
				w.PassTime(clock, merge.MergeWait)
			}
			st := w.WaitStatus("stopped", c.want)
			if q := w.GH.Queued(theRepo, thePR); q != "" || strings.Contains(st, "may still merge") {
				t.Fatalf("queued %q after the cancel:\n%s", q, st)
			}
		})
	}
}

// A cancel read while the queue merges the PR, before any word of it came
// (the PR is out of the queue, GitHub shows no merge yet): taken as a
// cancel being carried out, and when GitHub shows the merge, the merge is
// recorded, never "cancelled".
func TestMergeWithReuseCancelBeforeTheQueuesWord(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := queueWorld(t, clock)
	w.mergeQueued()
	ref := w.GH.MergeGroup(theRepo, thePR, e2e.SHA("f1"), true)
	w.GH.LeaveQueue(theRepo, thePR)
	w.Comment(maintainer, "/merge-with-reuse cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "The PR is being taken out of the merge queue")
	w.queueMerges(e2e.SHA("f1"), ref)
	w.PassTime(clock, merge.MergeWait/4)
	st := w.WaitStatus("merged", "🎉")
	if strings.Contains(st, "⛔") {
		t.Fatalf("status:\n%s", st)
	}
}
