package record

import "time"

// Tx is one transaction as the code deciding a delivery sees it: what it
// reads and what it changes commit together or not at all. The store's
// *state.Tx implements it; the smaller interfaces name each part.
type Tx interface {
	Now() time.Time
	// OverrideDecision marks the skip decided for a PR's head overridden
	// by login (Sweep anyway): an error when the head has no skip.
	OverrideDecision(repo string, pr int, sha, login string) error
	// OfferButtons records an offer of buttons, giving it a new nonce
	// (o.Nonce) and its time.
	OfferButtons(o *Offer) error
	// UseButton uses up one button of an offer, whatever its click did:
	// an error wrapping ErrButtonUnknown when no such button was offered,
	// ErrButtonUsed when it was used before.
	UseButton(repo, nonce string, u ButtonUse) error
	Auditor
	Outbox
	PRs
	Pins
	Comments
	Budgets
	Stages
	Sequences
	Approvals
}

// Sequences are the multi-step requests, one per PR and kind.
type Sequences interface {
	Sequence(repo string, pr int, kind string) (*Sequence, error)
	// PutSequence writes s as the next version of the PR's sequence of its
	// kind, provided it is still at version read (0: none, or a done one).
	PutSequence(s *Sequence, read uint64) error
	// WakeSequences makes every sequence of the PR that is not done due by
	// at, when it waits for events or is due later: what it waits for may
	// have happened. One due by then already is left as it is, so a burst
	// of events wakes it once, and none is made due sooner than WakeGap
	// after its last write, so a stream of events wakes it at most once a
	// WakeGap.
	WakeSequences(repo string, pr int, at time.Time) error
}

// Auditor appends to the audit.
type Auditor interface {
	// Audit appends a record; time and the delivery id are filled in when empty.
	Audit(r AuditRecord) error
}

// Outbox holds the notices opsbot owes GitHub and Slack.
type Outbox interface {
	// Enqueue adds a notice (its ID is set).
	Enqueue(n *Notice) error
	// Withdraw takes back a notice not yet sent (nor tried): false when it was.
	Withdraw(id uint64) (bool, error)
}

// PRs is what opsbot remembers of each PR.
type PRs interface {
	PRInfo(repo string, pr int) (*PRInfo, error)
	PutPRInfo(p *PRInfo) error
}

// Pins are the reuse authorizations, one active per PR at most.
type Pins interface {
	ActivePin(repo string, pr int) (*Pin, error)
	// Grant stores p as the PR's active pin and returns the pin it superseded.
	Grant(p *Pin, c PinChange) (superseded *Pin, err error)
	// Transition moves the active pin p to a closed state.
	Transition(p *Pin, to PinState, c PinChange) error
	// ExpectUpdate records on the PR's active pin id (a merge's) the base
	// tip of the branch update the merge is about to ask for, the tree its
	// merge makes and, for a merge opsbot made itself, its commit: the one
	// push the pin then covers.
	ExpectUpdate(repo string, pr int, id uint64, base, tree, commit string) error
}

// Comments are the marks of what opsbot has seen of each comment.
type Comments interface {
	CommentMark(repo string, commentID int64) (CommentMark, error)
	// CommentSeen reports whether a `created` delivery of the comment was
	// processed before, and marks it processed.
	CommentSeen(repo string, commentID int64) (bool, error)
}

// Budgets are the rolling hourly budgets of replies and reactions.
type Budgets interface {
	TakeReply(repo string, userID int64, limit int) (bool, error)
	TakeReaction(repo string, userID int64, perUser, perRepo int) (bool, error)
}

// Stages are the stage requests of each repository, in order.
type Stages interface {
	AddStageRequest(r *StageRequest) error
	// StageRequestByOrigin finds the request an origin made (its kind and
	// id: a comment's and a click's never meet).
	StageRequestByOrigin(repo string, o Origin) (*StageRequest, error)
	// MoveStageRequest stores r, whose State is the state it moves to,
	// provided the stored request is r (its Seq) and still in from, and
	// the move is one StageMoves allows; otherwise ErrStageMoved and
	// nothing is written.
	MoveStageRequest(r *StageRequest, from StageState) error
	StageRequestByComment(repo string, commentID int64) (*StageRequest, error)
	StageRequests(repo string) ([]StageRequest, error)
	SlotHolder(repo string) (*StageRequest, error)
	SetSlotHolder(r *StageRequest) error
}

// Reader is what a command's handler reads before it plans, outside the
// transaction (the store's views, or a transaction in memory in tests);
// the plan names what it relied on as facts, checked when it is written.
type Reader interface {
	ActivePin(repo string, pr int) (*Pin, error)
	PRInfo(repo string, pr int) (*PRInfo, error)
	StageRequestByComment(repo string, commentID int64) (*StageRequest, error)
	StageRequests(repo string) ([]StageRequest, error)
	// Sequence is the PR's sequence of a kind (nil: none).
	Sequence(repo string, pr int, kind string) (*Sequence, error)
}
