package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

// failedConclusions are the check run conclusions that fail a merge; a
// cancelled check does not (as the repository's merge helper treats it).
var failedConclusions = []string{"failure", "timed_out", "action_required", "startup_failure", "stale"}

// checks looks at the decided head's checks: a failed one stops the merge,
// pending ones wait, and green ones merge, when GitHub says the PR can be
// merged without bypassing anything. The merge is marked first (the head
// it is for is in the record before GitHub is asked) and asked by the next
// step, once, in this process; one that may have been asked is found by
// reading the PR, never asked again blindly.
func (st *stepper) checks(ctx context.Context, head string) (plan.Plan, string, error) {
	cur := st.cur
	all, err := st.gh.HeadChecks(ctx, cur.Repo, head)
	if errors.Is(err, ghclient.ErrTooManyChecks) {
		return st.stopped("too_many_checks", fmt.Sprintf("%s has more checks than opsbot reads, so it cannot tell that they all passed: merge it by hand",
			mdtext.ShortSHA(head)))
	}
	if err != nil {
		return plan.Plan{}, "", err
	}
	var checks []ghclient.Check
	for _, c := range all {
		if c.IsStatus && (c.Name == notices.StatusContext || c.Name == notices.ReadyContext) {
			continue // opsbot's own: they say what opsbot decided, not that anything ran
		}
		if !c.IsStatus && !c.IsSuite && c.Name == notices.StatusContext && st.h.AppID != 0 && c.AppID == st.h.AppID {
			continue // opsbot's own check run, likewise (a check run of that name by anyone else counts)
		}
		checks = append(checks, c)
	}
	var failed, pending []string
	for _, c := range checks {
		switch {
		case c.IsStatus && (c.Status == "failure" || c.Status == "error"),
			!c.IsStatus && c.Status == "completed" && slices.Contains(failedConclusions, c.Conclusion):
			failed = append(failed, mdtext.Code(c.Name))
		case c.IsStatus && c.Status != "success", !c.IsStatus && c.Status != "completed":
			pending = append(pending, mdtext.Code(c.Name))
		}
	}
	if len(failed) > 0 {
		return st.stopped("check_failed", fmt.Sprintf("%s failed on %s", listed(failed), mdtext.ShortSHA(head)))
	}
	if len(pending) > 0 || len(checks) == 0 {
		now := fmt.Sprintf("⏳ waiting for the checks of %s (%d running; until %s)", mdtext.Code(mdtext.ShortSHA(head)), len(pending),
			cur.Deadline.UTC().Format("15:04 UTC"))
		if len(checks) == 0 {
			now = fmt.Sprintf("⏳ waiting for the checks of %s (none yet; until %s)", mdtext.Code(mdtext.ShortSHA(head)), cur.Deadline.UTC().Format("15:04 UTC"))
		}
		if !st.data.Queue {
			st.data.MergeMark = "" // a merge marked while the checks were green is not asked now
		}
		return st.wait(StepChecks, now, "merge-waiting-checks")
	}
	if p, out, err := st.mergeable(ctx); out != "" || err != nil {
		return p, out, err
	}
	// The merge reuses its run only while its pin stands: still active
	// (consumed by the merge's own push to the default branch), or used by
	// the update's push, which the gate skipped on it.
	pin, err := st.pin()
	if err != nil {
		return plan.Plan{}, "", err
	}
	if pin == nil {
		d, err := st.h.State.Decision(cur.Repo, cur.PR, head)
		if err != nil {
			return plan.Plan{}, "", err
		}
		if d == nil || !d.Skipped() || d.RunID != st.data.RunID || st.data.PinID == 0 || d.PinID != st.data.PinID {
			return st.stopped("no_pin", "the pin the merge took was revoked or replaced: a merge now would reuse nothing")
		}
	}
	if err := st.noteQueueBefore(ctx); err != nil {
		return plan.Plan{}, "", err
	}
	mark := st.data.MergeMark
	switch {
	case mark == "":
		return st.markMerge()
	case st.h.acts.Fresh(mark) && st.now.Sub(st.data.MergeAsked) > MarkFresh:
		// This process's mark, never sent, but old (steps that yielded, a
		// backlog): marked anew, so a crash after the merge finds a mark
		// whose time is the merge's.
		if !st.data.Queue {
			st.data.MergeTries-- // marked anew, not asked again (an enqueue counts when sent)
		}
		return st.markMerge()
	case !st.h.acts.Fresh(mark) && st.data.Queue:
		return st.queueAsked(ctx, head)
	case !st.h.acts.Fresh(mark):
		// Marked before a restart, or asked with its answer lost: the PR
		// read above is open at the decided head, so GitHub has not merged
		// it yet. GitHub's merge is made or refused within its answer: a
		// minute after the mark, it was not made, and is marked anew.
		if st.now.Sub(st.data.MergeAsked) < MergeWait {
			return st.waitFor(StepChecks, "⏳ GitHub did not answer the merge: reading the PR again", "merge-merge-unanswered", MergeWait/4)
		}
		if st.data.MergeTries >= MaxMergeTries {
			return st.stopped("merge_lost", fmt.Sprintf("GitHub answered none of %d merges of %s, and the PR is not merged: merge it by hand",
				st.data.MergeTries, mdtext.ShortSHA(head)))
		}
		return st.markMerge()
	}
	return st.merge(ctx, head, mark)
}

// mergeable says whether GitHub would merge the PR now without bypassing
// anything ("" out: it would), learning on the way whether the base takes
// its merges through a merge queue; else the step it comes to.
func (st *stepper) mergeable(ctx context.Context) (plan.Plan, string, error) {
	cur := st.cur
	if !st.data.Queue {
		rules, err := st.gh.BranchRules(ctx, cur.Repo, st.data.Base)
		if err != nil {
			return plan.Plan{}, "", err
		}
		st.data.Queue = slices.Contains(rules, ghclient.RuleMergeQueue)
	}
	switch state := st.pr.GetMergeableState(); state {
	case "clean", "unstable", "has_hooks":
	case "blocked":
		if !st.data.Queue {
			return st.stopped("blocked", "the checks are green, but branch protection blocks the merge (a required review, or a required check "+
				"that has not passed): opsbot does not bypass it")
		}
		// A branch whose merges go through its queue may say blocked
		// for that alone: the enqueue is refused, said why, if anything
		// else blocks it.
	case "", "unknown":
		return st.wait(StepChecks, "⏳ checks green; GitHub is still working out whether the PR can be merged", "merge-waiting-mergeable")
	case "behind":
		return st.stopped("behind", "the base branch moved on while the checks ran; run `/merge-with-reuse` again")
	case "dirty":
		return st.stopped("conflict", "the branch has conflicts with its base: resolve them by hand")
	case "draft":
		return st.stopped("draft", "the PR is a draft")
	default:
		return st.stopped("not_mergeable", fmt.Sprintf("GitHub says the PR cannot be merged (%s)", mdtext.Text(state)))
	}
	return plan.Plan{}, "", nil
}

// markMerge records the merge's mark, with the head it is for, before the
// merge is asked: the next step asks it.
func (st *stepper) markMerge() (plan.Plan, string, error) {
	st.data.MergeMark, st.data.MergeAsked = st.h.acts.New(), st.now
	if !st.data.Queue {
		st.data.MergeTries++ // an enqueue counts when it is sent (queued.go)
	}
	if st.data.Queue && st.data.EnqueueAt.IsZero() {
		st.data.EnqueueAt = st.now
	}
	next := *st.cur
	next.Step = StepChecks
	next.WakeAt = st.now
	next.Data, _ = json.Marshal(st.data) // plain fields: cannot fail
	return plan.Plan{Require: []plan.Fact{st.guard()}, Steps: []plan.Step{plan.PutSequence{Seq: next, Read: st.cur.Version}}}, "merge-marked", nil
}

// MarkFresh is how long this process asks an update or a merge it marked
// and has not asked: an older mark is made anew first.
const MarkFresh = time.Minute

// MergeWait is how long a merge whose answer was lost (or that was marked
// before a restart) waits, reading the PR, before it is asked again: GitHub
// makes or refuses a merge within its answer.
const MergeWait = time.Minute

// MaxMergeTries bounds the merges of one sequence GitHub did not answer.
const MaxMergeTries = 3

// listed names at most three checks, then how many more.
func listed(names []string) string {
	if len(names) <= 3 {
		return mdtext.List(names)
	}
	return fmt.Sprintf("%s and %d more", mdtext.List(names[:3]), len(names)-3)
}
