package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// ErrPinNotActive is a transition of a pin that is no longer active (or was
// never stored).
var ErrPinNotActive = errors.New("state: pin is not active")

// ErrPinTransition is a transition to a state a pin cannot move to.
var ErrPinTransition = errors.New("state: illegal pin transition")

// Transition moves the PR's active pin p to a closed state and writes the
// pin's audit record, in the transaction. The pin must be the one stored
// as active ([ErrPinNotActive] otherwise: a consumed pin cannot be revoked,
// an expired one cannot be consumed) and to a closed state
// ([ErrPinTransition]). On success p holds the stored pin.
func (t *Tx) Transition(p *Pin, to PinState, c PinChange) error {
	if !to.Closed() {
		return fmt.Errorf("%w: pin %d to %q", ErrPinTransition, p.ID, to)
	}
	cur, err := activePin(t.tx, p.Repo, p.PR)
	if err != nil {
		return err
	}
	if cur == nil || cur.ID != p.ID {
		return fmt.Errorf("%w: pin %d of %s#%d, to %s", ErrPinNotActive, p.ID, p.Repo, p.PR, to)
	}
	b, err := prBucket(t.tx, p.Repo, p.PR, true)
	if err != nil {
		return err
	}
	p.State, p.ClosedReason, p.ClosedAt = to, c.Reason, t.now()
	if to == PinConsumed {
		p.ConsumedBy = c.HeadSHA
	}
	if err := putJSON(b, pinKey(p.ID), p); err != nil {
		return err
	}
	if cur := b.Get(kActive); cur != nil && binary.BigEndian.Uint64(cur) == p.ID {
		if err := b.Delete(kActive); err != nil {
			return err
		}
	}
	return t.auditPin(p, to, c)
}

// Grant stores p as the PR's active pin, giving it an id, and audits it. A
// pin that was active is superseded by it (audited first, with the same
// actor) and returned.
func (t *Tx) Grant(p *Pin, c PinChange) (superseded *Pin, err error) {
	old, err := t.ActivePin(p.Repo, p.PR)
	if err != nil {
		return nil, err
	}
	b, err := prBucket(t.tx, p.Repo, p.PR, true)
	if err != nil {
		return nil, err
	}
	id, err := t.tx.Bucket(bPRs).NextSequence()
	if err != nil {
		return nil, err
	}
	p.V, p.ID, p.State = 1, id, PinActive
	if p.CreatedAt.IsZero() {
		p.CreatedAt = t.now()
	}
	if err := putJSON(b, pinKey(id), p); err != nil {
		return nil, err
	}
	if err := t.knowHead(p.Repo, p.PR, p.PRHeadAtGrant); err != nil {
		return nil, err
	}
	if old != nil {
		// The old pin is retired before the new one becomes the PR's active
		// pin: a PR never has two.
		old.SupersededBy = p.ID
		oc := c
		oc.HeadSHA, oc.Role = "", ""
		oc.Reason = fmt.Sprintf("superseded by pin %d (run %d)", p.ID, p.RunID)
		if err := t.Transition(old, PinSuperseded, oc); err != nil {
			return nil, err
		}
	}
	if err := b.Put(kActive, u64(id)); err != nil {
		return nil, err
	}
	c.HeadSHA, c.Role = p.PRHeadAtGrant, p.Role
	if c.Reason == "" {
		c.Reason = "pinned for the next push"
	}
	return old, t.auditPin(p, PinActive, c)
}

func (t *Tx) auditPin(p *Pin, s PinState, c PinChange) error {
	r := AuditRecord{Kind: record.AuditPin, Outcome: string(s), DeliveryID: c.DeliveryID, Repo: p.Repo, PR: p.PR,
		HeadSHA: c.HeadSHA, RunID: p.RunID, PinID: p.ID, ActorID: c.ActorID, ActorLogin: c.ActorLogin, Role: c.Role, Reason: c.Reason, OriginRef: c.OriginRef}
	if s == PinActive && p.Coverage != nil {
		r.Jobs, r.JobsSucceeded = p.Coverage.Jobs, p.Coverage.Succeeded
		r.RunnerSeconds, r.GPUSeconds = p.Coverage.RunnerSeconds, p.Coverage.GPUSeconds
	}
	return t.Audit(r)
}

// knowHead records head, the PR's head GitHub gave when a pin was
// granted, for a PR whose head opsbot does not know (opened before opsbot
// served the repository, its webhooks lost), so opsbot/reuse-ready can be
// set on it; a head a webhook gave stays (HeadAt zero: any push's webhook
// moves it).
func (t *Tx) knowHead(repo string, pr int, head string) error {
	if head == "" {
		return nil
	}
	info, err := t.PRInfo(repo, pr)
	if err != nil {
		return err
	}
	if info == nil {
		info = &PRInfo{Repo: repo, PR: pr, State: "open"}
	}
	if info.HeadSHA != "" {
		return nil
	}
	info.HeadSHA = strings.ToLower(head)
	return t.PutPRInfo(info)
}

// ExpectUpdate records the base tip a merge's branch update will merge, the
// tree the merge makes and, for a merge opsbot made itself, its commit, on
// the PR's active pin id (record.Pins).
func (t *Tx) ExpectUpdate(repo string, pr int, id uint64, base, tree, commit string) error {
	cur, err := activePin(t.tx, repo, pr)
	if err != nil {
		return err
	}
	if cur == nil || cur.ID != id || cur.ExpectParent == "" {
		return fmt.Errorf("%w: pin %d of %s#%d is not a merge's active pin", ErrPinNotActive, id, repo, pr)
	}
	b, err := prBucket(t.tx, repo, pr, true)
	if err != nil {
		return err
	}
	cur.ExpectBase, cur.ExpectTree, cur.ExpectCommit = strings.ToLower(base), strings.ToLower(tree), strings.ToLower(commit)
	return putJSON(b, pinKey(id), cur)
}
