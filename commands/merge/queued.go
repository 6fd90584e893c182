package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// GitHub's merge queue: a base branch whose rules require one takes its
// merges only through it. The merge's act is then the enqueue of the
// decided head (GitHub's enqueuePullRequest, naming that head), marked and
// asked once as a merge is; the queue tests a group commit of the PR on
// the base's tip (the gate answers it by the PR's decision, package gate)
// and moves the base branch to it, or drops it. The merge waits in
// StepQueued, told by merge_group events and polls, and says each on its
// status comment. Cancelling it, taking its command back or its deadline
// takes the PR out of the queue.

// noteQueueBefore records, before the enqueue is first marked, how many
// times GitHub's timeline shows the PR added to a merge queue: one more
// later is the PR queued since, whoever asked.
func (st *stepper) noteQueueBefore(ctx context.Context) error {
	if !st.data.Queue || !st.data.EnqueueAt.IsZero() {
		return nil
	}
	e, err := st.gh.QueueEntryOf(ctx, st.cur.Repo, st.cur.PR)
	if err != nil {
		return err
	}
	st.data.AddedBefore = e.Added
	return nil
}

// enqueue adds the decided head to the merge queue; its mark is tried.
func (st *stepper) enqueue(ctx context.Context, head string) (plan.Plan, string, error) {
	cur := st.cur
	st.data.MergeTries++ // an ask sent: only these count
	err := st.gh.Enqueue(ctx, st.pr.GetNodeID(), head)
	var ref *ghclient.Refusal
	if errors.As(err, &ref) {
		// Queued already (an earlier enqueue whose answer was lost)?
		e, rerr := st.gh.QueueEntryOf(ctx, cur.Repo, cur.PR)
		if rerr != nil {
			return plan.Plan{}, "", rerr // read again at the next step, which finds the mark tried
		}
		if e.State != "" {
			return st.inQueue(head, e, "found queued")
		}
		return st.stopped("enqueue_refused", fmt.Sprintf("%s of %s (%s)", refusedWords(ref, "add the PR to the merge queue"),
			mdtext.ShortSHA(head), mdtext.Text(ref.Message)))
	}
	if err != nil && ctx.Err() != nil {
		return plan.Plan{}, "", err // opsbot is stopping: the next process finds the mark, and reads the queue
	}
	if err != nil {
		// Whether GitHub queued it is not known: the queue is read again,
		// and the enqueue is never asked again blindly.
		st.h.log().Warn("adding a PR to the merge queue got no answer; reading the queue again", "repo", cur.Repo, "pr", cur.PR, "err", err)
		st.data.MergeAsked = st.now
		return st.waitFor(StepChecks, "⏳ GitHub did not answer adding the PR to the merge queue: reading it again", "merge-enqueue-unanswered", MergeWait/4)
	}
	return st.inQueue(head, ghclient.QueueEntry{State: "QUEUED"}, "")
}

// queueAsked is an enqueue marked before a restart, or asked with its
// answer lost: a PR in the queue waits there; one not in it (and open at
// the decided head, as read) was not queued, and is marked anew after
// MergeWait, at most MaxMergeTries times.
func (st *stepper) queueAsked(ctx context.Context, head string) (plan.Plan, string, error) {
	e, err := st.gh.QueueEntryOf(ctx, st.cur.Repo, st.cur.PR)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if e.State != "" {
		return st.inQueue(head, e, "found queued")
	}
	q, err := st.queueEvent()
	if err != nil {
		return plan.Plan{}, "", err
	}
	if q != nil || e.Added > st.data.AddedBefore {
		// It was queued since the enqueue was marked (GitHub's timeline
		// counts one more addition, or the queue told of it) and has
		// left the queue: asked again, it would undo whoever took it out.
		return st.leftQueue(ctx, q)
	}
	if st.now.Sub(st.data.MergeAsked) < MergeWait {
		return st.waitFor(StepChecks, "⏳ GitHub did not answer adding the PR to the merge queue: reading it again", "merge-enqueue-unanswered", MergeWait/4)
	}
	if st.data.MergeTries >= MaxMergeTries {
		return st.stopped("enqueue_lost", fmt.Sprintf("GitHub answered none of %d asks to add %s to the merge queue, and it is not queued: "+
			"add it by hand", st.data.MergeTries, mdtext.ShortSHA(head)))
	}
	return st.markMerge()
}

// inQueue is the decided head in the merge queue: the merge waits for the
// queue as long as it waited for the checks.
func (st *stepper) inQueue(head string, e ghclient.QueueEntry, how string) (plan.Plan, string, error) {
	line := fmt.Sprintf("🚦 the checks of %s passed: added to the merge queue of %s", mdtext.Code(mdtext.ShortSHA(head)), mdtext.Code(st.data.Base))
	if how != "" {
		line = fmt.Sprintf("🚦 %s is in the merge queue of %s (%s)", mdtext.Code(mdtext.ShortSHA(head)), mdtext.Code(st.data.Base), how)
	}
	st.data.Trail = append(st.data.Trail, line)
	st.cur.Deadline = st.now.Add(Section.Of(st.rc).ChecksTimeout)
	return st.wait(StepQueued, st.queueNow(e), "merge-queued")
}

func (st *stepper) queueNow(e ghclient.QueueEntry) string {
	pos := ""
	if e.Position > 0 {
		pos = fmt.Sprintf(", position %d", e.Position)
	}
	return fmt.Sprintf("⏳ in the merge queue (%s%s; until %s)", strings.ToLower(strings.ReplaceAll(e.State, "_", " ")), pos,
		st.cur.Deadline.UTC().Format("15:04 UTC"))
}

// queued is a wake-up of a queued merge whose PR is open at the decided
// head: a group the queue tests is told; a PR out of the queue (and not
// merged, read again) stops the merge, saying why when GitHub said.
func (st *stepper) queued(ctx context.Context) (plan.Plan, string, error) {
	cur := st.cur
	q, err := st.queueEvent()
	if err != nil {
		return plan.Plan{}, "", err
	}
	if q != nil && q.Action == "checks_requested" && q.Group != "" && q.Group != st.data.QueueGroup {
		st.data.QueueGroup = q.Group
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("🧪 the merge queue tests the group %s: %s", mdtext.Code(mdtext.ShortSHA(q.Group)), q.Said))
	}
	e, err := st.gh.QueueEntryOf(ctx, cur.Repo, cur.PR)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if e.State != "" {
		st.data.QueueGone = time.Time{}
		return st.wait(StepQueued, st.queueNow(e), "merge-waiting-queue")
	}
	return st.leftQueue(ctx, q)
}

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

// queueEvent is what the merge queue last did with the PR since this
// merge asked to add it (nil: nothing, or only before).
func (st *stepper) queueEvent() (*record.QueueEvent, error) {
	return queueEventOf(st.h.State, st.cur, st.data)
}

func queueEventOf(s commands.State, cur *record.Sequence, data Data) (*record.QueueEvent, error) {
	if s == nil {
		return nil, nil
	}
	info, err := s.PRInfo(cur.Repo, cur.PR)
	if err != nil {
		return nil, err
	}
	if info == nil || info.Queue == nil || info.Queue.At.Before(data.EnqueueAt) {
		return nil, nil
	}
	return info.Queue, nil
}

// queueWords says a merge_group destroyed's reason.
func queueWords(reason string) string {
	switch reason {
	case "invalidated":
		return "invalidated (its checks failed, or the base branch changed under it)"
	case "dequeued":
		return "dequeued (taken out of the queue)"
	}
	return "destroyed (" + mdtext.Text(reason) + ")"
}

// leaveResult is what taking a merge's PR out of its merge queue found.
type leaveResult int

const (
	leftNothing leaveResult = iota // nothing was queued: nothing to say
	leftOut                        // taken out by this ask
	leftRefused                    // GitHub refused while the PR is still queued: it may still merge
	leftUnknown                    // not confirmed: still queued after a failure, or a read failed
	leftGone                       // out of the queue with no word why (an answer lost, or the queue merging it)
	leftMerged                     // the queue said it merged the PR; GitHub records it on the PR next
)

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
