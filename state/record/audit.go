package record

import (
	"time"
)

// AuditRecord is one line of the append-only audit.
type AuditRecord struct {
	V          int       `json:"v"`
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Kind       AuditKind `json:"kind"`
	Outcome    string    `json:"outcome"`           // accepted, denied, usage_error, active, superseded, skip, sweep, ...
	Command    string    `json:"command,omitempty"` // canonical command name
	DeliveryID string    `json:"delivery_id,omitempty"`
	Repo       string    `json:"repo"`
	PR         int       `json:"pr,omitempty"`
	HeadSHA    string    `json:"head_sha,omitempty"`
	RunID      int64     `json:"run_id,omitempty"`
	PinID      uint64    `json:"pin_id,omitempty"`
	ActorID    int64     `json:"actor_id,omitempty"`
	ActorLogin string    `json:"actor_login,omitempty"`
	Role       string    `json:"role,omitempty"`
	// OriginRef is the record's origin (the comment, or a click).
	OriginRef
	Reason string `json:"reason,omitempty"`
	// Jobs and JobsSucceeded are a pinned or reused run's coverage (the jobs
	// that ran, and those that succeeded); RunnerSeconds and GPUSeconds its
	// runner and GPU time, which a skip saved.
	Jobs          int   `json:"jobs,omitempty"`
	JobsSucceeded int   `json:"jobs_succeeded,omitempty"`
	RunnerSeconds int64 `json:"runner_seconds,omitempty"`
	GPUSeconds    int64 `json:"gpu_seconds,omitempty"`
}

// AuditKind is what an audit record is about.
type AuditKind string

// Audit kinds, as stored.
const (
	AuditCommand  AuditKind = "command"  // a command line and its outcome
	AuditPin      AuditKind = "pin"      // a pin's change of state
	AuditDecision AuditKind = "decision" // a gate decision
	AuditStage    AuditKind = "stage"    // a stage request's change of state
	AuditCallback AuditKind = "callback" // a staging side's report
	AuditEdit     AuditKind = "edit"     // commands an edit added, not run
	AuditRecovery AuditKind = "recovery" // what recovery found of a lost webhook
	AuditReaction AuditKind = "reaction" // a reaction held back by its budget
	AuditReply    AuditKind = "reply"    // a reply held back by its budget
	AuditNotice   AuditKind = "notice"   // a notice given up
	AuditMerge    AuditKind = "merge"    // a merge request's step
	AuditApproval AuditKind = "approval" // an external PR's approved sweep, step by step
	// AuditAfterMerge is a merged PR's main-side run, followed to its end.
	AuditAfterMerge AuditKind = "after_merge"
)

// AuditKinds are every kind, in the order `opsbot audit --kind` lists them.
var AuditKinds = []AuditKind{AuditCommand, AuditPin, AuditDecision, AuditStage, AuditCallback, AuditEdit, AuditRecovery,
	AuditReaction, AuditReply, AuditNotice, AuditMerge, AuditApproval, AuditAfterMerge}

// Audit outcomes shared by several kinds (each kind has its own besides:
// a command's Outcome, a pin's state, a decision's verdict, a stage
// request's state).
const (
	Suppressed = "suppressed" // a reply or reaction held back by its budget
	Kept       = "kept"       // a take-back refused: the pin or the request stays
	Refused    = "refused"    // a report that matched no request, or whose sender or token was wrong
)
