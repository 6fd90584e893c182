package record

import (
	"errors"
	"fmt"
	"time"
)

// ApprovalState is where an approval of an external PR's head is.
type ApprovalState string

// An approval is active until opsbot dispatches its run, dispatched until
// the run finishes, then completed (the run succeeded with result
// artifacts) or failed; a push before the dispatch expires it, as does its
// deadline, and /approve-sweep cancel (or the approval's comment taken
// back) revokes it.
const (
	ApprovalActive     ApprovalState = "active"
	ApprovalDispatched ApprovalState = "dispatched"
	ApprovalCompleted  ApprovalState = "completed"
	ApprovalFailed     ApprovalState = "failed"
	ApprovalExpired    ApprovalState = "expired"
	ApprovalRevoked    ApprovalState = "revoked"
)

// Approval is a maintainer's approval of one head of a PR whose head is in
// another repository (/approve-sweep): opsbot dispatches the trusted
// workflow for that head, and the run it binds to the approval counts as a
// sweep of that head, for that PR only. The binding comes from this
// record, never from the run's own fields (a dispatched run's head is the
// default branch's).
type Approval struct {
	ID   string `json:"id"`
	Repo string `json:"repo"`
	PR   int    `json:"pr"`
	// Head is the head commit approved: the PR's head when the maintainer
	// named it.
	Head     string        `json:"head"`
	Workflow string        `json:"workflow"`
	State    ApprovalState `json:"state"`
	// RunID is the run dispatched for it (0: none bound yet).
	RunID  int64  `json:"run_id,omitempty"`
	RunURL string `json:"run_url,omitempty"`
	// RunAttempt is the run's attempt that completed the approval: only
	// that attempt counts (a re-run after it is another measurement).
	RunAttempt    int       `json:"run_attempt,omitempty"`
	ApproverID    int64     `json:"approver_id"`
	ApproverLogin string    `json:"approver_login"`
	At            time.Time `json:"at"`
	Updated       time.Time `json:"updated,omitzero"`
}

// Counts reports whether the approval's run may stand for a sweep of its
// head: its run finished with its results while the approval stood. A run
// of an approval that expired, failed or was revoked counts for nothing,
// even if it (or a re-run of it) succeeds later.
func (a *Approval) Counts() bool {
	return a != nil && a.RunID != 0 && a.State == ApprovalCompleted
}

// ApprovalMoves are the moves an approval may make, from each state: it is
// dispatched (its run bound), or ends before (a push, a close, the
// deadline, a refused dispatch, a revocation); a dispatched one completes,
// fails, expires or is revoked; a completed one can only be revoked. A
// write in the same state (a run bound, a mark) is no move. Every other
// move is refused, so a stale step never ends an approval twice or brings
// one back.
var ApprovalMoves = map[ApprovalState][]ApprovalState{
	ApprovalActive:     {ApprovalDispatched, ApprovalFailed, ApprovalExpired, ApprovalRevoked},
	ApprovalDispatched: {ApprovalCompleted, ApprovalFailed, ApprovalExpired, ApprovalRevoked},
	ApprovalCompleted:  {ApprovalRevoked},
}

// ErrApprovalMoved is an approval's move that ApprovalMoves does not allow.
var ErrApprovalMoved = errors.New("record: the approval cannot make that move")

// CheckApprovalMove says whether an approval stored in state now may be
// written in state to.
func CheckApprovalMove(now, to ApprovalState) error {
	if now == to && now != ApprovalCompleted {
		return nil // a run bound, a mark: the same state
	}
	for _, ok := range ApprovalMoves[now] {
		if ok == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %s cannot become %s", ErrApprovalMoved, now, to)
}

// ErrRunBound is a run that is bound to another approval already.
var ErrRunBound = errors.New("state: the run is bound to another approval")

// Approvals are the approvals of external PRs' heads.
type Approvals interface {
	// PutApproval stores a (a new one, or its next state). A run is bound
	// to one approval only: binding a's run when another approval holds it
	// is ErrRunBound; a move ApprovalMoves does not allow is
	// ErrApprovalMoved.
	PutApproval(a *Approval) error
	Approval(repo, id string) (*Approval, error)
}
