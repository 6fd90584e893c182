package events

import (
	"context"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// IgnoredNotAGroup is a merge_group event whose branch names no PR.
const IgnoredNotAGroup = "a merge group whose branch names no pull request"

// mergeGroups classifies a merge_group event by the PR its group's branch
// names (the payload names no PR). The branch is GitHub's: only the merge
// queue makes gh-readonly-queue branches.
func mergeGroups(_ *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
	if env.MergeGroup == nil {
		return IgnoredNotAGroup, nil
	}
	pr, _, ok := gate.GroupPR(env.MergeGroup.HeadRef)
	if !ok {
		return IgnoredNotAGroup, nil
	}
	if _, sha := gate.CanonicalSHA(env.MergeGroup.HeadSHA); !sha {
		return IgnoredNotAGroup, nil
	}
	d.PR = pr
	return "", nil
}

// mergeGroupPayload is the part of a merge_group event opsbot reads.
type mergeGroupPayload struct {
	Action     string     `json:"action"`
	Reason     string     `json:"reason"` // destroyed's: merged, invalidated, dequeued
	MergeGroup mergeGroup `json:"merge_group"`
}

// handleMergeGroup records what the merge queue did with the PR, for its
// merge to tell (the delivery wakes it). A group whose checks are
// requested is answered as the gate answers its ask: its sweep gate
// status, and opsbot/reuse-ready as the PR's head has it (the
// group's commit becomes the default branch's, and a required status must
// be on it).
func (h *Handler) handleMergeGroup(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var ev mergeGroupPayload
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	group, _ := gate.CanonicalSHA(ev.MergeGroup.HeadSHA)
	qe := &record.QueueEvent{Action: ev.Action, Reason: ev.Reason, Group: group}
	var decided *state.Decision
	var head string
	switch ev.Action {
	case "checks_requested":
		info, err := h.State.PRInfo(rc.Name, d.PR)
		if err != nil {
			return "", nil, err
		}
		if info == nil {
			return "ignored-merge-group", nil, nil // a PR opsbot never heard of: nothing of it is decided
		}
		gh, err := h.Clients.For(info.Installation)
		if err != nil {
			return "", nil, worker.Permanent(err)
		}
		_, base, _ := gate.GroupPR(ev.MergeGroup.HeadRef)
		decided, head, err = h.Gate.Group(ctx, gh, rc.Name, d.PR, base, group)
		if err != nil {
			return "", nil, err
		}
		qe.Said = decided.Reason
	case "destroyed":
	default:
		return "ignored-merge-group", nil, nil
	}
	out := "merge-group-" + ev.Action
	if decided != nil {
		out += "-" + string(decided.Decision)
	}
	return out, func(tx *state.Tx) error {
		info, err := tx.PRInfo(rc.Name, d.PR)
		if err != nil || info == nil {
			return err
		}
		qe.At = tx.Now() // the sequences' clock: a merge reads only what came after its enqueue
		old := info.Queue
		switch {
		case old != nil && old.Action == "destroyed" && old.Reason == "merged":
			// The queue merged the PR: no event of another group,
			// delivered late, says otherwise.
		case old != nil && old.Group == qe.Group && old.Action == "destroyed" && qe.Action != "destroyed":
			// A group's checks_requested delivered after its destroyed
			// does not hide why it left.
		default:
			info.Queue = qe
		}
		if err := tx.PutPRInfo(info); err != nil {
			return err
		}
		if decided == nil {
			return nil
		}
		rec := state.AuditRecord{Kind: record.AuditDecision, Outcome: string(decided.Decision), DeliveryID: d.ID, Repo: rc.Name, PR: d.PR,
			HeadSHA: group, RunID: decided.RunID, ActorLogin: decided.ActorLogin, ActorID: decided.ActorID, Reason: decided.Reason}
		if err := tx.Audit(rec); err != nil {
			return err
		}
		if h.Notices == nil {
			return nil
		}
		words := notices.StatusText(decided)
		if decided.Decision != state.Skip {
			words = mdtext.Clip(mdtext.Line("sweep: "+decided.Reason), 140)
		}
		if err := h.Notices.Status(tx, rc.Name, d.PR, info.Installation, group, words, decided.RunURL); err != nil {
			return err
		}
		if rc.SweepsOnMain() || head == "" {
			return nil
		}
		// The PR's head as GitHub gave it (the webhooks may not have).
		at := *info
		at.HeadSHA = head
		r, err := reuseReadinessOf(tx, rc, &at)
		if err != nil {
			return err
		}
		return h.Notices.ReadyStatus(tx, rc.Name, d.PR, info.Installation, group, r.state,
			mdtext.Clip("merge group of "+mdtext.ShortSHA(head)+": "+r.words, 140), r.url)
	}, nil
}
