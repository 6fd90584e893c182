package events

import (
	"context"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// mergeGroupPayload is the part of a merge_group event opsbot reads.
type mergeGroupPayload struct {
	Action     string     `json:"action"`
	Reason     string     `json:"reason"` // destroyed's: merged, invalidated, dequeued
	MergeGroup mergeGroup `json:"merge_group"`
}

// handleMergeGroup is the gate's part of a merge_group delivery, which a
// kind's route finds the PR of and records what the queue did with (the
// merge's, commands/merge): a group whose checks are requested is answered
// as the gate answers its ask: its sweep gate status, and
// opsbot/reuse-ready as the PR's head has it (the group's commit becomes
// the default branch's, and a required status must be on it).
func (h *Handler) handleMergeGroup(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var ev mergeGroupPayload
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	if ev.Action != "checks_requested" {
		return "", nil, nil
	}
	group, ok := gate.CanonicalSHA(ev.MergeGroup.HeadSHA)
	_, base, isGroup := ghclient.GroupPR(ev.MergeGroup.HeadRef)
	if !ok || !isGroup {
		return "ignored-merge-group", nil, nil // the route's Find stores only a group's
	}
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
	decided, head, err := h.Gate.Group(ctx, gh, rc.Name, d.PR, base, group)
	if err != nil {
		return "", nil, err
	}
	return "merge-group-gated-" + string(decided.Decision), func(tx *state.Tx) error {
		info, err := tx.PRInfo(rc.Name, d.PR)
		if err != nil || info == nil {
			return err
		}
		if q := info.Queue; q != nil && q.Group == group && q.Action == "checks_requested" && q.Said != decided.Reason {
			// What the gate said of the group, beside what the queue did
			// (the merge's route recorded it): a queued merge says both.
			q.Said = decided.Reason
			if err := tx.PutPRInfo(info); err != nil {
				return err
			}
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
