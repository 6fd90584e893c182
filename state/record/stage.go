package record

import (
	"errors"
	"fmt"
	"time"
)

// StageState is where a stage request is.
type StageState string

// Stage request states, as stored and audited.
const (
	StageRequested StageState = "requested" // acknowledged and dispatched
	StageStarted   StageState = "started"   // the staging side said it began
	StageStaged    StageState = "staged"    // completed and succeeded: the run is on the staging site
	StageFailed    StageState = "failed"    // completed and failed
	StageReplaced  StageState = "replaced"  // a newer request took the shared slot before this one finished
	StageUnstaged  StageState = "unstaged"  // was staged; a newer run took the shared slot
	StageCancelled StageState = "cancelled" // its comment was deleted (or its command edited away) before the dispatch was sent
)

// StageMoves are the moves a stage request may make, from each state: a
// request is asked (requested: acknowledged, its dispatch queued), the
// staging side starts it and reports it staged or failed, a newer request
// in a shared slot replaces it while it waits, its comment's deletion
// cancels it before its dispatch leaves, the deadline fails it, and a newer
// staged run unstages it. Every other move is refused.
var StageMoves = map[StageState][]StageState{
	StageRequested: {StageStarted, StageStaged, StageFailed, StageReplaced, StageCancelled},
	StageStarted:   {StageStaged, StageFailed, StageReplaced},
	StageStaged:    {StageUnstaged},
}

// ErrStageMoved is a stage request's move from a state it is no longer in
// (it moved meanwhile), or a move StageMoves does not allow.
var ErrStageMoved = errors.New("record: the stage request is not in the state the move is from")

// CheckStageMove says whether a request stored in state now may move from
// from to to.
func CheckStageMove(now, from, to StageState) error {
	if now != from {
		return fmt.Errorf("%w: it is %s, not %s", ErrStageMoved, now, from)
	}
	for _, ok := range StageMoves[from] {
		if ok == to {
			return nil
		}
	}
	return fmt.Errorf("%w: %s cannot become %s", ErrStageMoved, from, to)
}

// StageRequest is one /stage-results request, kept in order per repository.
type StageRequest struct {
	V           int    `json:"v"`
	Seq         uint64 `json:"seq"`
	Repo        string `json:"repo"`
	PR          int    `json:"pr"`
	RunID       int64  `json:"run_id"`
	RunAttempt  int    `json:"run_attempt"`
	RunDate     string `json:"run_date"` // YYYY-MM-DD, UTC, of the run's creation
	RunSHA      string `json:"run_sha,omitempty"`
	Conclusion  string `json:"conclusion,omitempty"`
	Requester   string `json:"requester"`
	RequesterID int64  `json:"requester_id"`
	// OriginRef is what made the request (its comment: the callback names
	// it).
	OriginRef
	AckNotice uint64 `json:"ack_notice"` // the acknowledgement opsbot edits as staging goes on
	// DispatchNotice is the outbox notice of the dispatch to the staging
	// side (0 in requests recorded before it was kept).
	DispatchNotice uint64 `json:"dispatch_notice,omitempty"`
	// CommandLine is the command as written in the comment.
	CommandLine  string     `json:"command_line,omitempty"`
	Installation int64      `json:"installation,omitempty"`
	State        StageState `json:"state"`
	URL          string     `json:"url,omitempty"`
	AppRunID     int64      `json:"app_run_id,omitempty"`
	// Token is the request's secret, sent in the dispatch's client_payload
	// (request-token): a callback that does not echo it is refused.
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Pending reports whether the request still waits for the staging side.
func (r *StageRequest) Pending() bool { return r.State == StageRequested || r.State == StageStarted }
