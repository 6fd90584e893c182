package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// leftQueue is a PR no longer in its merge queue: merged (read again: the
// queue's merge and the PR's record are not one write at GitHub), waited
// for while the queue's word is that it merged, else stopped once
// MergeWait passed since it was first found gone (saying why when GitHub
// said).
func (st *stepper) leftQueue(ctx context.Context, q *record.QueueEvent) (plan.Plan, string, error) {
	again, err := st.gh.PullRequest(ctx, st.cur.Repo, st.cur.PR)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if again.GetMerged() && strings.EqualFold(again.GetHead().GetSHA(), st.data.Decided) {
		return st.merged(again.GetMergeCommitSHA(), true)
	}
	if again.GetState() == "open" && q != nil && q.Action == "destroyed" && q.Reason == "merged" {
		// GitHub's queue said it merged the PR: its record on the PR
		// follows. Waited for until the deadline, which records the
		// queue's word (expire).
		return st.waitFor(st.cur.Step, "⏳ the merge queue merged the PR: waiting for GitHub's record of it", "merge-queue-merged", MergeWait/4)
	}
	if again.GetState() == "open" {
		// Whatever the queue's last word (events of two groups may come
		// in any order), GitHub's record of a merge may follow the
		// queue's: read again for MergeWait first.
		if st.data.QueueGone.IsZero() {
			st.data.QueueGone = st.now
		}
		if st.now.Sub(st.data.QueueGone) < MergeWait {
			return st.waitFor(st.cur.Step, "⏳ the PR left the merge queue: reading whether it merged", "merge-queue-left", MergeWait/4)
		}
	}
	why := "the PR left the merge queue without being merged"
	if q != nil && q.Action == "destroyed" && q.Reason != "merged" {
		why += ": its group was " + queueWords(q.Reason)
	}
	return st.stopped("dequeued", why+". Run `/merge-with-reuse` again to queue it again")
}

// leaveResult is what taking a merge's PR out of its merge queue found.
type leaveResult int

// leave is leaveQueue's answer: what it found, what a stop or a reply
// adds (words), and for leftMerged the group the queue merged.
type leave struct {
	result leaveResult
	words  string
	group  string
}

// leaveQueue takes a merge's PR out of its merge queue when the merge may
// have queued it, and says what it found; err is opsbot stopping only.
func (h *Handler) leaveQueue(ctx context.Context, cur *record.Sequence, data Data) (leave, error) {
	if !data.Queue || data.MergeMark == "" {
		return leave{}, nil
	}
	unknown := func(err error) (leave, error) {
		if ctx.Err() != nil {
			return leave{}, err
		}
		h.log().Warn("taking a PR out of its merge queue is not confirmed", "repo", cur.Repo, "pr", cur.PR, "err", err)
		return leave{result: leftUnknown, words: fmt.Sprintf(" ⚠️ opsbot could not take the PR out of the merge queue (%s): it may still merge; "+
			"remove it from the queue by hand.", mdtext.Text(err.Error()))}, nil
	}
	gh, err := h.Clients(data.Installation)
	if err != nil {
		return unknown(err)
	}
	pr, err := gh.PullRequest(ctx, cur.Repo, cur.PR)
	if err != nil {
		return unknown(err)
	}
	if pr.GetState() != "open" {
		return leave{}, nil
	}
	err = gh.Dequeue(ctx, pr.GetNodeID())
	if err == nil {
		return leave{result: leftOut, words: " It is taken out of the merge queue."}, nil
	}
	if ctx.Err() != nil {
		return leave{}, err
	}
	e, rerr := gh.QueueEntryOf(ctx, cur.Repo, cur.PR)
	if rerr != nil {
		return unknown(fmt.Errorf("%w; then %w", err, rerr))
	}
	var ref *ghclient.Refusal
	switch {
	case e.State != "" && errors.As(err, &ref):
		return leave{result: leftRefused, words: fmt.Sprintf(" ⚠️ GitHub refused to take the PR out of the merge queue (%s): it may still merge; "+
			"remove it from the queue by hand.", mdtext.Text(ref.Message))}, nil
	case e.State != "":
		return unknown(err) // not answered, still queued
	}
	// Out of the queue: taken out by this ask (its answer lost), by
	// someone, or merged by the queue a moment ago.
	q, qerr := queueEventOf(h.State, cur, data)
	if qerr != nil {
		return unknown(qerr)
	}
	switch {
	case q != nil && q.Action == "destroyed" && q.Reason == "merged":
		return leave{result: leftMerged, group: q.Group}, nil
	case errors.As(err, &ref) && q == nil && e.Added <= data.AddedBefore:
		return leave{}, nil // never queued: nothing to take out
	}
	return leave{result: leftGone, words: " It is out of the merge queue."}, nil
}

// leaving is a wake-up of a merge stopped (cancelled, its command taken
// back) while its PR may still be in the merge queue: it stops once the
// PR is out (taken out, or gone and not merged within MergeWait) or
// GitHub refuses; merged first, the merge is recorded as merged.
func (st *stepper) leaving(ctx context.Context) (plan.Plan, string, error) {
	l, err := st.h.leaveQueue(ctx, st.cur, st.data)
	if err != nil {
		return plan.Plan{}, "", err
	}
	code, why := st.data.LeaveCode, st.data.LeaveWhy
	switch l.result {
	case leftMerged:
		return st.waitFor(StepLeaving, "⏳ the merge queue merged the PR before it could be taken out: waiting for GitHub's record of it",
			"merge-leaving-merged", MergeWait/4)
	case leftUnknown:
		return st.waitFor(StepLeaving, "⏳ taking the PR out of the merge queue (GitHub has not confirmed it yet)", "merge-leaving", MergeWait/4)
	case leftGone:
		if st.data.QueueGone.IsZero() {
			st.data.QueueGone = st.now
		}
		if st.now.Sub(st.data.QueueGone) < MergeWait {
			return st.waitFor(StepLeaving, "⏳ the PR is out of the merge queue: reading whether it merged first", "merge-leaving-gone", MergeWait/4)
		}
	}
	return st.stopped(code, withLeft(why, l.words))
}

// leaveLater is a cancel or a take-back whose taking the PR out of the
// merge queue is not confirmed: the merge waits in StepLeaving (its pin
// revoked with it), and says so.
func (h *Handler) leaveLater(cur *record.Sequence, data Data, code, why string) plan.PutSequence {
	next := *cur
	next.Step = StepLeaving
	next.WakeAt = h.now().Add(MergeWait / 4)
	data.LeaveCode, data.LeaveWhy = code, why
	data.Trail = append(data.Trail, "✋ "+why+": taking the PR out of the merge queue")
	data.Now = "⏳ taking the PR out of the merge queue (GitHub has not confirmed it yet)"
	next.Data, _ = json.Marshal(data) // plain fields: cannot fail
	edit := h.statusEdit(&next, data, data.Now)
	rec := record.AuditRecord{Kind: record.AuditMerge, Outcome: StepLeaving, Repo: cur.Repo, PR: cur.PR, RunID: data.RunID,
		HeadSHA: data.Decided, ActorID: cur.ActorID, ActorLogin: cur.ActorLogin, Reason: code + ": " + mdtext.Plain(mdtext.Parse(why))}
	rec.SetOrigin(cur.Origin())
	return plan.PutSequence{Seq: next, Read: cur.Version, Edit: &edit, Audit: rec}
}

// withLeft is a stop's words with what leaveQueue said.
func withLeft(why, left string) string {
	if left == "" {
		return why
	}
	return why + "." + strings.TrimSuffix(left, ".")
}

const (
	leftNothing leaveResult = iota // nothing was queued: nothing to say
	leftOut                        // taken out by this ask
	leftRefused                    // GitHub refused while the PR is still queued: it may still merge
	leftUnknown                    // not confirmed: still queued after a failure, or a read failed
	leftGone                       // out of the queue with no word why (an answer lost, or the queue merging it)
	leftMerged                     // the queue said it merged the PR; GitHub records it on the PR next
)
