package record

import (
	"errors"
	"time"
)

// Pin is an authorization to reuse one run for one later head of one PR.
type Pin struct {
	V             int      `json:"v"`
	ID            uint64   `json:"id"`
	Repo          string   `json:"repo"`
	PR            int      `json:"pr"`
	State         PinState `json:"state"`
	RunID         int64    `json:"run_id"`
	RunAttempt    int      `json:"run_attempt,omitempty"`
	RunSHA        string   `json:"run_sha"`
	RunURL        string   `json:"run_url,omitempty"`
	RunConclusion string   `json:"run_conclusion,omitempty"`
	// Coverage is the run's, read when it was pinned.
	Coverage *Coverage `json:"coverage,omitempty"`
	// ExpectParent, when set (a pin /merge-with-reuse took), limits the
	// push it covers to the branch update the merge asks for: a merge
	// commit GitHub made whose parents are this commit and ExpectBase, the
	// base's tip when the update was asked, and whose tree is ExpectTree,
	// the tree of GitHub's own merge of the two (the PR's test merge
	// commit's): a commit with those parents and other content is not it,
	// whoever signed it. Until then (ExpectBase empty) it covers no push
	// at all.
	ExpectParent string `json:"expect_parent,omitempty"`
	ExpectBase   string `json:"expect_base,omitempty"`
	ExpectTree   string `json:"expect_tree,omitempty"`
	// ExpectCommit, when set, is the merge commit opsbot made itself (a
	// branch that conflicted with its base, merged on GitHub's side): the
	// push the pin covers is exactly that commit, by its SHA, whoever GitHub
	// records as its committer (its SHA fixes its parents and tree, which
	// opsbot checked before moving the branch to it).
	ExpectCommit  string `json:"expect_commit,omitempty"`
	Bare          bool   `json:"bare,omitempty"` // resolved from a bare /reuse-sweep-run
	PRHeadAtGrant string `json:"pr_head_at_grant"`
	ActorID       int64  `json:"actor_id"`
	ActorLogin    string `json:"actor_login"`
	Role          string `json:"role,omitempty"`
	// OriginRef is what started the pin (its comment, or a click);
	// CommentLine the command as written.
	OriginRef
	CommentLine  string    `json:"comment_line,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	ClosedAt     time.Time `json:"closed_at,omitzero"`
	ClosedReason string    `json:"closed_reason,omitempty"`
	ConsumedBy   string    `json:"consumed_by,omitempty"` // head SHA
	SupersededBy uint64    `json:"superseded_by,omitempty"`
}

// Verdict is what a decision says of a head's sweep.
type Verdict string

// Verdicts, as stored and audited.
const (
	Skip  Verdict = "skip"  // reuse a pinned run's results
	Sweep Verdict = "sweep" // run the sweep
)

// Decision is the gate's answer for one (repo, PR, head SHA), made once.
type Decision struct {
	V          int       `json:"v"`
	Repo       string    `json:"repo"`
	PR         int       `json:"pr"`
	HeadSHA    string    `json:"head_sha"`
	Decision   Verdict   `json:"decision"`
	Reason     string    `json:"reason"` // Why in words, as the audit keeps it
	Why        Why       `json:"why,omitzero"`
	PinID      uint64    `json:"pin_id,omitempty"`
	RunID      int64     `json:"run_id,omitempty"`
	RunAttempt int       `json:"run_attempt,omitempty"`
	RunURL     string    `json:"run_url,omitempty"`
	RunSHA     string    `json:"run_sha,omitempty"`
	ActorID    int64     `json:"actor_id,omitempty"`
	ActorLogin string    `json:"actor_login,omitempty"`
	CommentURL string    `json:"comment_url,omitempty"`
	Action     string    `json:"action,omitempty"`
	Source     string    `json:"source,omitempty"` // webhook, api
	DeliveryID string    `json:"delivery_id,omitempty"`
	DecidedAt  time.Time `json:"decided_at"`
	MergeOf    bool      `json:"merge,omitempty"` // the head is a merge commit, consumed at merge
	// RunnerSeconds and GPUSeconds are what a skip saved: the reused run's
	// runner time, and its GPU time (repos[].gpus_per_runner).
	RunnerSeconds int64 `json:"runner_seconds,omitempty"`
	GPUSeconds    int64 `json:"gpu_seconds,omitempty"`
	// Jobs and JobsSucceeded are the reused run's coverage.
	Jobs          int `json:"jobs,omitempty"`
	JobsSucceeded int `json:"jobs_succeeded,omitempty"`
	// OverriddenBy is who asked for a skipped head's sweep after all (Sweep
	// anyway): the gate answers sweep for it from then on.
	OverriddenBy string    `json:"overridden_by,omitempty"`
	OverriddenAt time.Time `json:"overridden_at,omitzero"`
}

// Skipped reports whether the head's sweep is skipped: decided so, and not
// overridden since.
func (d *Decision) Skipped() bool { return d.Decision == Skip && d.OverriddenBy == "" }

// SkippedHead is what opsbot keeps of a head whose sweep it skipped: the
// run it reused, and, when a maintainer asked to sweep it anyway, when.
// Only a run's attempt that started after that measured the head.
type SkippedHead struct {
	RunID        int64
	OverriddenAt time.Time
}

// Measured reports whether a run's attempt that started at started
// measured the head: never while the skip stands; after Sweep anyway, an
// attempt started after it (the re-run the override asked for). GitHub
// gives a start to the second: one in the override's own second counts,
// since an attempt asks the gate only after it started (its jobs take
// longer than that to begin), so it was answered sweep.
func (h SkippedHead) Measured(started time.Time) bool {
	return !h.OverriddenAt.IsZero() && !started.Before(h.OverriddenAt.Truncate(time.Second))
}

// PRInfo is what opsbot remembers of a PR (for Slack threads and the audit page).
type PRInfo struct {
	Repo    string `json:"repo"`
	PR      int    `json:"pr"`
	Title   string `json:"title,omitempty"`
	Author  string `json:"author,omitempty"`
	Branch  string `json:"branch,omitempty"`
	HeadSHA string `json:"head_sha,omitempty"`
	State   string `json:"state,omitempty"`
	SlackTS string `json:"slack_ts,omitempty"`
	SlackCh string `json:"slack_channel,omitempty"`
	// SlackParentQueued is set once the thread's parent message is in the outbox.
	SlackParentQueued bool `json:"slack_parent_queued,omitempty"`
	// Installation is the GitHub App installation its webhooks came from.
	Installation int64     `json:"installation,omitempty"`
	Updated      time.Time `json:"updated,omitzero"`
	// HeadAt is the PR's updated_at in the event that set HeadSHA: an event
	// stamped earlier (a late delivery) does not move the head back.
	HeadAt time.Time `json:"head_at,omitzero"`
	// Labels and Draft are the PR's labels and draft flag as the newest
	// pull_request webhook (by LabelsAt, its updated_at) carried them;
	// LabelsKnown is false for a PR recorded before opsbot kept them (then
	// GitHub is read).
	Labels      []string  `json:"labels,omitempty"`
	Draft       bool      `json:"draft,omitempty"`
	LabelsKnown bool      `json:"labels_known,omitempty"`
	LabelsAt    time.Time `json:"labels_at,omitzero"`
	// NotGatedHead is the last head answered not gated (a draft, its
	// labels), for NotGatedWhy: it stays so, and is never decided.
	NotGatedHead string `json:"not_gated_head,omitempty"`
	NotGatedWhy  string `json:"not_gated_why,omitempty"`
	// NotGatedSaid is the pin and reason opsbot last told the PR of, that a
	// push was not gated while the pin waited: said once until a gated push,
	// another pin or another reason.
	NotGatedSaid string `json:"not_gated_said,omitempty"`
	// SweepSHA, SweepRun, SweepConclusion and SweepURL are the newest
	// completed run of the sweep workflow on a head of the PR (workflow_run
	// completed): a head's own sweep, for opsbot/reuse-ready.
	SweepSHA        string `json:"sweep_sha,omitempty"`
	SweepRun        int64  `json:"sweep_run,omitempty"`
	SweepConclusion string `json:"sweep_conclusion,omitempty"`
	SweepURL        string `json:"sweep_url,omitempty"`
	// SweepStarted is when that run's latest attempt started: after Sweep
	// anyway, only an attempt started after it measured the head.
	SweepStarted time.Time `json:"sweep_started,omitzero"`
	// SweepAt is that run's updated_at: a late delivery of an older
	// attempt does not replace a newer one.
	SweepAt time.Time `json:"sweep_at,omitzero"`
	// ReadySaid is the opsbot/reuse-ready status last set (head, state and
	// words): set again only when the answer changes.
	ReadySaid string `json:"ready_said,omitempty"`
	// Queue is what the merge queue last did with the PR (merge_group
	// events), for the PR's merge to tell.
	Queue *QueueEvent `json:"queue,omitempty"`
}

// QueueEvent is a merge_group event of a PR: checks_requested for its
// group commit Group (the gate's answer for it in Said), or destroyed with
// GitHub's reason (merged, invalidated, dequeued).
type QueueEvent struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	Group  string `json:"group"`
	// Said is the gate's answer for the group, noted by the gate beside a
	// checks_requested the merge's route recorded.
	Said string    `json:"said,omitempty"`
	At   time.Time `json:"at"`
}

// PinState is where a pin is in its lifecycle. A pin is created active and
// leaves active once, for one of the closed states; it never comes back.
type PinState string

// Pin states, as stored and audited.
const (
	PinActive     PinState = "active"
	PinConsumed   PinState = "consumed"   // a decision skipped the sweep with it
	PinSuperseded PinState = "superseded" // a newer pin replaced it
	PinRevoked    PinState = "revoked"    // cancelled, or its comment edited away or deleted
	PinInvalid    PinState = "invalid"    // its run no longer qualified when a decision checked it
	PinExpired    PinState = "expired"    // the PR closed without merging, or its repository is no longer served
)

// Closed reports whether s is one of the states a pin leaves active for.
func (s PinState) Closed() bool {
	switch s {
	case PinConsumed, PinSuperseded, PinRevoked, PinInvalid, PinExpired:
		return true
	}
	return false
}

// PinChange is who and what moved a pin, for its audit record. Reason is
// also the pin's closed reason.
type PinChange struct {
	Reason     string
	HeadSHA    string // the head the change is about; a consumed pin's ConsumedBy
	DeliveryID string // "" means the delivery being completed
	ActorID    int64
	ActorLogin string
	Role       string
	OriginRef  // the change's origin
}

// CommentMark is what opsbot has seen of a comment.
type CommentMark int

// Comment marks.
const (
	MarkNone      CommentMark = iota // never seen
	MarkProcessed                    // a `created` delivery of it was processed
	MarkEdited                       // an `edited` webhook named it, no `created` delivery was processed yet
	MarkDeleted                      // a `deleted` webhook named it, no `created` delivery was processed yet
)

func (m CommentMark) String() string {
	switch m {
	case MarkProcessed:
		return "processed"
	case MarkEdited:
		return "edited"
	case MarkDeleted:
		return "deleted"
	}
	return "none"
}

// Offer is one offering of buttons on a PR: a check run's, or a message's
// in the PR's Slack thread. GitHub and Slack sign a click's body but not
// its delivery id, so a captured click sent again under a new id would
// otherwise run again as the one who clicked: each offer carries a nonce
// that the click brings back (the check run's external_id, the Slack
// button's value), opsbot makes a new one each time it offers buttons, and
// each button of an offer acts once, whatever its click then did.
type Offer struct {
	Nonce string `json:"nonce"`
	Repo  string `json:"repo"`
	PR    int    `json:"pr"`
	// Head is the PR's head the buttons were offered for; Surface where
	// (OfferCheckRun, OfferSlack); Actions the buttons' identifiers.
	Head    string    `json:"head"`
	Surface string    `json:"surface"`
	Actions []string  `json:"actions"`
	At      time.Time `json:"at"`
	// Uses are the buttons clicked, one each.
	Uses []ButtonUse `json:"uses,omitempty"`
}

// Where an offer's buttons are.
const (
	OfferCheckRun = "check-run"
	OfferSlack    = "slack"
)

// Used is how the button action was used (nil: not yet).
func (o *Offer) Used(action string) *ButtonUse {
	for i := range o.Uses {
		if o.Uses[i].Action == action {
			return &o.Uses[i]
		}
	}
	return nil
}

// ButtonUse is one button of an offer, used by a click that reached its
// command: who clicked, the click's delivery, when, and what became of it
// (the command's outcome: accepted, denied, rejected, ...).
type ButtonUse struct {
	Action   string    `json:"action"`
	By       string    `json:"by"`
	ByID     int64     `json:"by_id,omitempty"`
	Delivery string    `json:"delivery,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	At       time.Time `json:"at,omitzero"`
}

// ErrButtonUsed is a button of an offer that was clicked before;
// ErrButtonUnknown a button opsbot did not offer (no offer of its nonce,
// or none of its identifier).
var (
	ErrButtonUsed    = errors.New("record: the button was used before")
	ErrButtonUnknown = errors.New("record: no such button was offered")
)
