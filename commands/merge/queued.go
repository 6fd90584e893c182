package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
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

// QueueRoute is the merge queue's event: a merge_group delivery names no
// PR, so its group's branch (gh-readonly-queue/<base>/pr-<N>-<the base's
// tip>, a branch only GitHub's merge queue makes) finds it, and its record
// notes on the PR's record what the queue did (record.QueueEvent), for a
// queued merge to read and say. The gate gives a tested group its statuses
// (events).
var QueueRoute = seq.Route{Event: "merge_group", Why: "a queued /merge-with-reuse says what the queue did", Find: groupOf, Record: recordQueue}

// ignoredNotAGroup is a merge_group event whose branch names no PR.
const ignoredNotAGroup = "a merge group whose branch names no pull request"

// queuePayload is the part of a merge_group event the merge reads.
type queuePayload struct {
	Action     string `json:"action"`
	Reason     string `json:"reason"` // destroyed's: merged, invalidated, dequeued
	MergeGroup *struct {
		HeadSHA string `json:"head_sha"`
		HeadRef string `json:"head_ref"`
	} `json:"merge_group"`
}

// group reads a merge_group delivery: the PR and the group's commit, or
// ok false when it is not a merge queue's group.
func group(body []byte) (ev queuePayload, pr int, sha string, ok bool, err error) {
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, 0, "", false, fmt.Errorf("reading a merge_group delivery: %w", err)
	}
	if ev.MergeGroup == nil {
		return ev, 0, "", false, nil
	}
	pr, _, isGroup := ghclient.GroupPR(ev.MergeGroup.HeadRef)
	sha = strings.ToLower(strings.TrimSpace(ev.MergeGroup.HeadSHA))
	return ev, pr, sha, isGroup && ghclient.FullSHA(sha), nil
}

// groupOf finds the PR a merge group's branch names.
func groupOf(_ string, body []byte) (seq.Found, error) {
	_, pr, _, ok, err := group(body)
	if err != nil || !ok {
		return seq.Found{Ignored: ignoredNotAGroup}, err
	}
	return seq.Found{PR: pr}, nil
}

// recordQueue notes a group's checks_requested or destroyed on the PR's
// record, keeping what a late delivery would hide: once the queue merged
// the PR, no event of another group says otherwise; a group's
// checks_requested delivered after its destroyed does not hide why it
// left; and another group's end (but a merge) does not hide the group
// under test.
func recordQueue(_ context.Context, _ *config.Repo, d seq.Delivered) (string, seq.Write, error) {
	ev, _, sha, ok, err := group(d.Body)
	if err != nil || !ok {
		return "", nil, err
	}
	if ev.Action != "checks_requested" && ev.Action != "destroyed" {
		return "ignored-merge-group", nil, nil
	}
	qe := &record.QueueEvent{Action: ev.Action, Reason: ev.Reason, Group: sha}
	return "merge-group-" + ev.Action, func(tx record.Tx) error {
		info, err := tx.PRInfo(d.Repo, d.PR)
		if err != nil || info == nil {
			return err // a PR opsbot never heard of: no merge of it waits
		}
		qe.At = tx.Now() // the sequences' clock: a merge reads only what came after its enqueue
		old := info.Queue
		switch {
		case old != nil && old.Action == "destroyed" && old.Reason == "merged":
		case old != nil && old.Group == qe.Group && old.Action == "destroyed" && qe.Action != "destroyed":
		case old != nil && old.Group != qe.Group && old.Action == "checks_requested" && qe.Action == "destroyed" && qe.Reason != "merged":
			// Another group's end, delivered out of order: the group
			// under test stays what the queue does (its own end comes).
		default:
			info.Queue = qe
		}
		return tx.PutPRInfo(info)
	}, nil
}

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
func (st *stepper) enqueue(ctx context.Context, head, mark string) (plan.Plan, string, error) {
	cur := st.cur
	st.data.MergeTries++ // an ask sent: only these count
	var found ghclient.QueueEntry
	a, stop := st.send(ctx, seq.Act{Mark: mark, Do: func(ctx context.Context) error { return st.gh.Enqueue(ctx, st.pr.GetNodeID(), head) },
		Verify: func(ctx context.Context) (seq.Shown, error) {
			// In the queue now: queued (by this ask, or since). Not in
			// it: GitHub may still add it; read again later.
			e, err := st.gh.QueueEntryOf(ctx, cur.Repo, cur.PR)
			if err != nil || e.State == "" {
				return seq.NotShown, err
			}
			found = e
			return seq.ShownTaken, nil
		}})
	if stop != nil {
		return plan.Plan{}, "", stop // a cancel or a push waits, or the step ended (opsbot stopping, its time up): the next step finds the mark, and reads the queue
	}
	err := a.Err
	if a.Unclear() && a.Taken() {
		return st.inQueue(head, found, "found queued after an answer that did not say")
	}
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
