// Package plan is what a command's handler changes, as data: the facts it
// read before it decided (this pin is still the PR's active one, this
// comment made no stage request yet) and the typed steps that follow
// (audit this, grant that pin, post this reply within the budget, record
// and dispatch this stage request). A handler reads state through
// record.Reader outside the transaction and returns a Plan; the dispatcher
// applies it in the delivery's transaction with Apply, which checks every
// fact first and writes nothing when one no longer holds (ErrStale: the
// delivery is processed again, from a fresh read). A retried commit applies
// the same plan again: a plan holds values, never code.
//
// The package links no storage: handlers' tests read the plan they return,
// and Apply runs on any record.Tx (the store's, or one in memory).
package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Plan is the facts a handler decided on and the steps that follow.
type Plan struct {
	Require []Fact
	Steps   []Step
}

// Empty reports whether the plan neither checks nor changes anything. A
// plan with facts and no steps still matters: it says nothing was to be
// done only while its facts hold.
func (p Plan) Empty() bool { return len(p.Require) == 0 && len(p.Steps) == 0 }

// Fact is something a handler read before deciding, checked by Apply.
type Fact interface {
	holds(tx record.Tx) (bool, string, error)
}

// Step is one change.
type Step interface {
	apply(tx record.Tx, t Teller) error
}

// ErrStale is a plan whose facts changed between the read and the write.
var ErrStale = errors.New("plan: what the plan was made on changed before it was written")

// Teller words nothing: it puts the notices a plan carries (their words
// already rendered) into the outbox, with their Slack mirror
// (notices.Notifier.Teller).
type Teller interface {
	Comment(tx record.Tx, c Comment) (noticeID uint64, err error)
	Edit(tx record.Tx, e Edit) error
	Dispatch(tx record.Tx, d Dispatch) (noticeID uint64, err error)
	// StageReplaced edits the acknowledgement of old, a request still
	// waiting in a shared slot, to say by replaced it.
	StageReplaced(tx record.Tx, old, by record.StageRequest) error
	// StageUnstaged tells the PR of prev, a staged request, that by took
	// the shared slot from it.
	StageUnstaged(tx record.Tx, prev, by record.StageRequest) error
	React(tx record.Tx, repo string, pr int, inst int64, commentID int64, content string) error
	// OfferSlack posts a message with a command's own buttons in the PR's
	// Slack thread, a new offer of them (notices.Notifier.OfferSlack).
	OfferSlack(tx record.Tx, o SlackOffer) error
	// OfferCheck puts a check run of a command's own on a commit, with its
	// buttons, a new offer of them (notices.Notifier.OfferCheck).
	OfferCheck(tx record.Tx, o CheckOffer) error
}

// SlackOffer is a message with buttons in the PR's Slack thread, offered
// for Head, each naming RunID and its Attempt (0: none); their values are
// made when it is written (the offer's nonce).
type SlackOffer struct {
	Repo    string
	PR      int
	Head    string
	RunID   int64
	Attempt int
	Text    string
	Links   Links
	Buttons []record.SlackButton
}

func (o SlackOffer) apply(tx record.Tx, t Teller) error { return t.OfferSlack(tx, o) }

// CheckOffer is a check run of a command's own, Name (opsbot/…), on SHA
// (a commit that need not be the PR's head: a merge commit), saying
// Title and Summary (Markdown) with Conclusion, and offering Actions, each
// naming RunID and its Attempt; none: the check run only says how things
// stand (it replaces one that offered buttons: GitHub shows the newest of
// a name).
type CheckOffer struct {
	Repo         string
	PR           int
	Installation int64
	SHA          string
	Name         string
	Conclusion   string
	Title        string
	Summary      string
	RunID        int64
	Attempt      int
	Actions      []record.CheckAction
}

func (o CheckOffer) apply(tx record.Tx, t Teller) error { return t.OfferCheck(tx, o) }

// Apply checks p's facts and writes its steps in order, in tx, which must
// roll back whole on an error: a fact that no longer holds returns
// ErrStale before anything of its own plan is written, and a nested plan's
// (a command line's inside its comment's) is checked when its turn comes,
// after the steps before it, which the error then takes back with the
// rest.
func Apply(tx record.Tx, t Teller, p Plan) error { return p.apply(tx, t) }

// A Plan is a step too: a command line's plan inside its comment's.
func (p Plan) apply(tx record.Tx, t Teller) error {
	for _, f := range p.Require {
		ok, what, err := f.holds(tx)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", ErrStale, what)
		}
	}
	for _, s := range p.Steps {
		err := s.apply(tx, t)
		if errors.Is(err, errDone) {
			return nil // Once ends the plan that holds it, and only that one
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errDone ends the plan that holds the step early, with nothing more to
// write (Once).
var errDone = errors.New("plan: done")

// Fail is a read that failed while the plan was made: applied, it takes
// back the whole transaction, and the delivery is tried again later. It
// follows Once in a comment's plan, so that a comment processed before
// completes with nothing written, whatever failed.
type Fail struct{ Err error }

func (s Fail) apply(record.Tx, Teller) error { return s.Err }

// CommentMark is the fact that what opsbot has seen of a comment is still
// Mark (or that the comment has been processed since, which Once then
// finds): an edit or a deletion noted after the comment's commands were
// chosen makes the plan stale, and they are chosen again from what the
// comment says now.
type CommentMark struct {
	Repo      string
	CommentID int64
	Mark      record.CommentMark
}

func (f CommentMark) holds(tx record.Tx) (bool, string, error) {
	m, err := tx.CommentMark(f.Repo, f.CommentID)
	if err != nil {
		return false, "", err
	}
	return m == f.Mark || m == record.MarkProcessed, fmt.Sprintf("comment %d was %s while its commands were checked", f.CommentID, m), nil
}

// Once marks a comment processed; when it was processed before (a
// redelivered or replayed comment), the rest of the plan that holds it is
// not written: a comment never runs twice.
type Once struct {
	Repo      string
	CommentID int64
}

func (s Once) apply(tx record.Tx, _ Teller) error {
	seen, err := tx.CommentSeen(s.Repo, s.CommentID)
	if err != nil {
		return err
	}
	if seen {
		return errDone
	}
	return nil
}

// Answer is the one answer to a comment's commands: the reply (if any)
// within the actor's hourly reply budget, and the reactions. When the
// reply budget is spent, Held is audited and the comment gets a 👎 instead
// (unless a command was accepted). An answer that is only a reaction to
// someone below triage (Quiet, nothing accepted, no reply) counts under
// the reaction budgets (Outsider); past them Suppressed is audited and
// nothing is added. 😕 (Confused) is added only without a 👎.
type Answer struct {
	Repo         string
	PR           int
	Installation int64
	CommentID    int64
	ActorID      int64
	Reply        *Comment
	ReplyLimit   int
	Held         record.AuditRecord
	Plus, Minus  bool
	Confused     bool
	Quiet        bool
	Outsider     ReactionBudget
}

// ReactionBudget is how many reactions commenters below triage get on a
// repository in a rolling hour, each and all together, and the audit record
// of one past them.
type ReactionBudget struct {
	PerUser, PerRepo int
	Suppressed       record.AuditRecord
}

func (s Answer) apply(tx record.Tx, t Teller) error {
	reply, minus := s.Reply != nil, s.Minus
	if reply {
		ok, err := tx.TakeReply(s.Repo, s.ActorID, s.ReplyLimit)
		if err != nil {
			return err
		}
		if !ok {
			if err := tx.Audit(s.Held); err != nil {
				return err
			}
			reply = false
			minus = minus || !s.Plus // a reply held back still gets a reaction
		}
	}
	if s.Quiet && !s.Plus && !reply {
		ok, err := tx.TakeReaction(s.Repo, s.ActorID, s.Outsider.PerUser, s.Outsider.PerRepo)
		if err != nil {
			return err
		}
		if !ok {
			return tx.Audit(s.Outsider.Suppressed)
		}
	}
	for _, r := range []struct {
		on      bool
		content string
	}{{s.Confused && !minus, "confused"}, {s.Plus, "+1"}, {minus, "-1"}} {
		if !r.on {
			continue
		}
		if err := t.React(tx, s.Repo, s.PR, s.Installation, s.CommentID, r.content); err != nil {
			return err
		}
	}
	if reply {
		_, err := t.Comment(tx, *s.Reply)
		return err
	}
	return nil
}

// ActivePin is the fact that a PR's active pin is the pin ID (0: that the
// PR has none).
type ActivePin struct {
	Repo string
	PR   int
	ID   uint64
}

func (f ActivePin) holds(tx record.Tx) (bool, string, error) {
	p, err := tx.ActivePin(f.Repo, f.PR)
	if err != nil {
		return false, "", err
	}
	var id uint64
	if p != nil {
		id = p.ID
	}
	return id == f.ID, fmt.Sprintf("%s#%d's active pin is %d, not %d", f.Repo, f.PR, id, f.ID), nil
}

// StageRequest is the fact that the request a comment made is in State
// ("" for: the comment made none).
type StageRequest struct {
	Repo      string
	CommentID int64
	State     record.StageState
}

func (f StageRequest) holds(tx record.Tx) (bool, string, error) {
	r, err := tx.StageRequestByComment(f.Repo, f.CommentID)
	if err != nil {
		return false, "", err
	}
	var st record.StageState
	if r != nil {
		st = r.State
	}
	return st == f.State, fmt.Sprintf("comment %d's stage request is %q, not %q", f.CommentID, st, f.State), nil
}

// Audit appends a record.
type Audit struct{ Record record.AuditRecord }

func (s Audit) apply(tx record.Tx, _ Teller) error { return tx.Audit(s.Record) }

// GrantPin makes Pin the PR's active pin (superseding the one before).
type GrantPin struct {
	Pin    record.Pin
	Change record.PinChange
}

func (s GrantPin) apply(tx record.Tx, _ Teller) error {
	p := s.Pin // the step may be applied again: the plan's copy stays as it was
	_, err := tx.Grant(&p, s.Change)
	return err
}

// ClosePin moves the active pin Pin to To.
type ClosePin struct {
	Pin    record.Pin
	To     record.PinState
	Change record.PinChange
}

func (s ClosePin) apply(tx record.Tx, _ Teller) error {
	p, err := tx.ActivePin(s.Pin.Repo, s.Pin.PR)
	if err != nil {
		return err
	}
	if p == nil || p.ID != s.Pin.ID {
		return fmt.Errorf("%w: pin %d of %s#%d is no longer active", ErrStale, s.Pin.ID, s.Pin.Repo, s.Pin.PR)
	}
	return tx.Transition(p, s.To, s.Change)
}

// Links are the GitHub pages a notice is about (its Slack mirror links them).
type Links struct {
	PR, Comment, Run, Commit string
}

// Comment is a PR comment opsbot posts, and its Slack mirror; Kind is the
// notices kind it is mirrored as.
type Comment struct {
	Repo         string
	PR           int
	Installation int64
	Kind         string
	Body         string
	Links        Links
}

func (s Comment) apply(tx record.Tx, t Teller) error {
	_, err := t.Comment(tx, s)
	return err
}

// Edit replaces the body of the comment notice Of posted.
type Edit struct {
	Repo         string
	PR           int
	Installation int64
	Of           uint64
	Kind         string
	Body         string
	Links        Links
}

func (s Edit) apply(tx record.Tx, t Teller) error { return t.Edit(tx, s) }

// Dispatch is a repository_dispatch to another repository.
type Dispatch struct {
	FromRepo     string
	PR           int
	Installation int64
	ToRepo       string
	EventType    string
	Payload      map[string]any
}

// Reply is one more reply comment to ActorID within their hourly budget
// (Limit a repository); past it the comment is not posted and Held is
// audited instead.
type Reply struct {
	ActorID int64
	Limit   int
	Comment Comment
	Held    record.AuditRecord
}

func (s Reply) apply(tx record.Tx, t Teller) error {
	ok, err := tx.TakeReply(s.Comment.Repo, s.ActorID, s.Limit)
	if err != nil {
		return err
	}
	if !ok {
		return tx.Audit(s.Held)
	}
	_, err = t.Comment(tx, s.Comment)
	return err
}

// RequestStage records Request and sends its dispatch: the acknowledgement
// Ack is posted first (the request keeps its notice, to edit as staging
// goes on); in a Shared slot every request still waiting, as the
// transaction finds them, is replaced by this one (its dispatch withdrawn
// when the outbox still holds it), told (Teller's StageReplaced) and
// audited; then the dispatch is queued (the request
// keeps its notice, so that taking the request back before it is sent
// withdraws it) and the request and Audit are written. A comment makes one
// request: when its comment has one already (a second line of the same
// comment), the step does nothing.
type RequestStage struct {
	Request  record.StageRequest
	Ack      Comment
	Shared   bool
	Dispatch Dispatch
	Audit    record.AuditRecord
	// ReportWithin, when set, is how long the staging side has to report
	// from when the request is written: the PR's stage sequence
	// (StageSeqKind) wakes then and marks the request failed if it still
	// waits.
	ReportWithin time.Duration
}

// StageSeqKind is the kind of the sequence that holds a PR's stage
// requests' report deadlines.
const StageSeqKind = "stage"

// StageDeadlines is the data of a PR's stage sequence: each request still
// tracked, by its sequence number, and when its report is due.
type StageDeadlines struct {
	Requests []StageDeadline `json:"requests"`
}

// StageDeadline is one request's report deadline: the request (its
// sequence number and comment), when its report is due, and the timeout it
// was given.
type StageDeadline struct {
	Seq       uint64        `json:"seq"`
	CommentID int64         `json:"comment_id"`
	By        time.Time     `json:"by"`
	Within    time.Duration `json:"within"`
}

// Next is the earliest deadline (zero: none).
func (d StageDeadlines) Next() time.Time {
	var next time.Time
	for _, r := range d.Requests {
		if next.IsZero() || r.By.Before(next) {
			next = r.By
		}
	}
	return next
}

// trackStage adds req's deadline to its PR's stage sequence.
func trackStage(tx record.Tx, req record.StageRequest, within time.Duration) error {
	cur, err := tx.Sequence(req.Repo, req.PR, StageSeqKind)
	if err != nil {
		return err
	}
	var data StageDeadlines
	var read uint64
	if cur != nil && !cur.Done {
		read = cur.Version
		if len(cur.Data) > 0 {
			if err := json.Unmarshal(cur.Data, &data); err != nil {
				return fmt.Errorf("reading the stage deadlines of %s#%d: %w", req.Repo, req.PR, err)
			}
		}
	}
	data.Requests = append(data.Requests, StageDeadline{Seq: req.Seq, CommentID: req.CommentID, By: tx.Now().Add(within), Within: within})
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	next := &record.Sequence{Kind: StageSeqKind, Repo: req.Repo, PR: req.PR, Step: "waiting_report", Data: raw,
		WakeAt: data.Next(), Deadline: data.Next(), ActorID: req.RequesterID, ActorLogin: req.Requester}
	next.SetOrigin(req.Origin())
	if cur != nil && !cur.Done {
		next.Started, next.Head = cur.Started, cur.Head
	}
	return tx.PutSequence(next, read)
}

func (s RequestStage) apply(tx record.Tx, t Teller) error {
	req := s.Request
	if existing, err := tx.StageRequestByOrigin(req.Repo, req.Origin()); err != nil || existing != nil {
		return err
	}
	var err error
	if req.AckNotice, err = t.Comment(tx, s.Ack); err != nil {
		return err
	}
	if s.Shared {
		queue, err := tx.StageRequests(req.Repo)
		if err != nil {
			return err
		}
		for i := range queue {
			old := &queue[i]
			if !old.Pending() {
				continue
			}
			from := old.State
			old.State = record.StageReplaced
			if old.DispatchNotice != 0 {
				// Not yet sent: the staging side never hears of a request
				// replaced before it was asked.
				if _, err := tx.Withdraw(old.DispatchNotice); err != nil {
					return err
				}
			}
			if err := tx.MoveStageRequest(old, from); err != nil {
				return err
			}
			if err := t.StageReplaced(tx, *old, req); err != nil {
				return err
			}
			if err := tx.Audit(record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageReplaced), Repo: old.Repo,
				PR: old.PR, RunID: old.RunID, ActorLogin: old.Requester, Reason: fmt.Sprintf("replaced by run %d of PR #%d", req.RunID, req.PR), OriginRef: old.OriginRef}); err != nil {
				return err
			}
		}
	}
	if req.DispatchNotice, err = t.Dispatch(tx, s.Dispatch); err != nil {
		return err
	}
	if err := tx.AddStageRequest(&req); err != nil {
		return err
	}
	if s.ReportWithin > 0 {
		if err := trackStage(tx, req, s.ReportWithin); err != nil {
			return err
		}
	}
	return tx.Audit(s.Audit)
}

// ExpireStage fails the request of Request's comment when its report did
// not come in time, as the transaction finds it: only while it is still
// requested (a report that came meanwhile wins). Its dispatch, if the
// outbox still holds it, is withdrawn, and NeverSent tells the PR instead
// of Told; Audit is recorded.
type ExpireStage struct {
	Request   record.StageRequest
	Told      Edit
	NeverSent Edit
	Audit     record.AuditRecord
}

func (s ExpireStage) apply(tx record.Tx, t Teller) error {
	req, err := tx.StageRequestByOrigin(s.Request.Repo, s.Request.Origin())
	if err != nil || req == nil || req.Seq != s.Request.Seq || req.State != record.StageRequested {
		return err
	}
	told := s.Told
	if req.DispatchNotice != 0 {
		withdrawn, err := tx.Withdraw(req.DispatchNotice)
		if err != nil {
			return err
		}
		if withdrawn && s.NeverSent.Body != "" {
			told = s.NeverSent
		}
	}
	req.State = record.StageFailed
	if err := tx.MoveStageRequest(req, record.StageRequested); err != nil {
		return err
	}
	if err := t.Edit(tx, told); err != nil {
		return err
	}
	return tx.Audit(s.Audit)
}

// WithdrawStage takes back the request of Request's comment while it still
// waits for the staging side, as the transaction finds it (otherwise it
// does nothing): when the one who took it back may not (Allowed false),
// Kept is audited; else, when the outbox still holds its dispatch, the
// dispatch is withdrawn, the request becomes cancelled, Cancelled is
// audited and Told edits the acknowledgement; when the dispatch was already
// sent (or tried), only Sent is audited.
type WithdrawStage struct {
	Request   record.StageRequest
	Allowed   bool
	Kept      record.AuditRecord
	Cancelled record.AuditRecord
	Told      Edit
	Sent      record.AuditRecord
}

func (s WithdrawStage) apply(tx record.Tx, t Teller) error {
	r, err := tx.StageRequestByOrigin(s.Request.Repo, s.Request.Origin())
	if err != nil || r == nil || r.Seq != s.Request.Seq || !r.Pending() {
		return err
	}
	if !s.Allowed {
		return tx.Audit(s.Kept)
	}
	withdrawn := false
	if r.DispatchNotice != 0 {
		if withdrawn, err = tx.Withdraw(r.DispatchNotice); err != nil {
			return err
		}
	}
	if !withdrawn {
		return tx.Audit(s.Sent)
	}
	from := r.State
	r.State = record.StageCancelled
	if err := tx.MoveStageRequest(r, from); err != nil {
		return err
	}
	if err := tx.Audit(s.Cancelled); err != nil {
		return err
	}
	return t.Edit(tx, s.Told)
}

// ReportStage is a staging side's report on the request of Request's
// comment: From is the state it was reported on, and Request carries the
// new State, URL and AppRunID, the only fields the report changes on the
// request as stored (a request no longer the same one, or no longer in
// From, makes the plan stale). When it TakesSlot (staged in a shared
// slot), the request staged before it, as the transaction finds the
// slot's holder, becomes unstaged, is told (Teller's StageUnstaged) and
// audited, and the request holds the slot; then it is stored, Told edits
// its acknowledgement and Audit is written.
type ReportStage struct {
	Request   record.StageRequest
	From      record.StageState
	TakesSlot bool
	Told      Edit
	Audit     record.AuditRecord
}

func (s ReportStage) apply(tx record.Tx, t Teller) error {
	req, err := tx.StageRequestByOrigin(s.Request.Repo, s.Request.Origin())
	if err != nil {
		return err
	}
	if req == nil || req.Seq != s.Request.Seq || req.State != s.From {
		return fmt.Errorf("%w: the stage request of comment %d is no longer %s", ErrStale, s.Request.CommentID, s.From)
	}
	req.State, req.URL, req.AppRunID = s.Request.State, s.Request.URL, s.Request.AppRunID
	if s.TakesSlot {
		prev, err := tx.SlotHolder(req.Repo)
		if err != nil {
			return err
		}
		if prev != nil && prev.Seq != req.Seq && prev.State == record.StageStaged {
			prev.State = record.StageUnstaged
			if err := tx.MoveStageRequest(prev, record.StageStaged); err != nil {
				return err
			}
			if err := t.StageUnstaged(tx, *prev, *req); err != nil {
				return err
			}
			if err := tx.Audit(record.AuditRecord{Kind: record.AuditStage, Outcome: string(record.StageUnstaged), Repo: prev.Repo,
				PR: prev.PR, RunID: prev.RunID, ActorLogin: prev.Requester,
				Reason: fmt.Sprintf("run %d of PR #%d took the shared slot", req.RunID, req.PR)}); err != nil {
				return err
			}
		}
		if err := tx.SetSlotHolder(req); err != nil {
			return err
		}
	}
	if err := tx.MoveStageRequest(req, s.From); err != nil {
		return err
	}
	if err := t.Edit(tx, s.Told); err != nil {
		return err
	}
	return tx.Audit(s.Audit)
}

// SequenceAt is the fact that the PR's sequence of Kind is still at
// Version (0: there is none, or only a done one).
type SequenceAt struct {
	Repo    string
	PR      int
	Kind    string
	Version uint64
}

func (f SequenceAt) holds(tx record.Tx) (bool, string, error) {
	s, err := tx.Sequence(f.Repo, f.PR, f.Kind)
	if err != nil {
		return false, "", err
	}
	now := uint64(0)
	if s != nil && !s.Done {
		now = s.Version
	}
	return now == f.Version, fmt.Sprintf("the %s sequence of %s#%d moved from version %d to %d", f.Kind, f.Repo, f.PR, f.Version, now), nil
}

// PutSequence writes Seq as the next version of its PR's sequence of its
// kind, read at version Read (SequenceAt's guard, in the write); with
// Status, the sequence's status comment is posted first (Seq keeps its
// notice, which later steps edit), else with Edit its status comment is
// edited; WakeNow makes it due when the transaction commits. Audit, when
// it has a kind, is written after.
type PutSequence struct {
	Seq     record.Sequence
	Read    uint64
	Status  *Comment
	Edit    *Edit
	WakeNow bool
	Audit   record.AuditRecord
}

func (s PutSequence) apply(tx record.Tx, t Teller) error {
	next := s.Seq
	if s.WakeNow {
		next.WakeAt = tx.Now()
	}
	if s.Status != nil {
		id, err := t.Comment(tx, *s.Status)
		if err != nil {
			return err
		}
		next.Notice = id
	}
	if err := tx.PutSequence(&next, s.Read); err != nil {
		return err
	}
	if s.Edit != nil {
		e := *s.Edit
		e.Of = next.Notice
		if e.Of != 0 {
			if err := t.Edit(tx, e); err != nil {
				return err
			}
		}
	}
	if s.Audit.Kind != "" {
		return tx.Audit(s.Audit)
	}
	return nil
}

// ExpectUpdate records on the PR's active pin PinID (a merge's) the base
// tip Base of the branch update the merge asks for next, Tree, the tree
// the merge of Base into the head makes, and Commit, the merge commit when
// opsbot made it itself (record.Pins).
type ExpectUpdate struct {
	Repo   string
	PR     int
	PinID  uint64
	Base   string
	Tree   string
	Commit string
}

func (s ExpectUpdate) apply(tx record.Tx, _ Teller) error {
	return tx.ExpectUpdate(s.Repo, s.PR, s.PinID, s.Base, s.Tree, s.Commit)
}

// UseButton uses up a button of one of opsbot's offers (a check run's, a
// Slack message's): each offered button acts once, whatever its click did
// (record.Offer). One used meanwhile makes the plan stale, and the click is
// decided again from what is stored.
type UseButton struct {
	Repo, Nonce string
	Use         record.ButtonUse
}

func (s UseButton) apply(tx record.Tx, _ Teller) error {
	err := tx.UseButton(s.Repo, s.Nonce, s.Use)
	if errors.Is(err, record.ErrButtonUsed) || errors.Is(err, record.ErrButtonUnknown) {
		return fmt.Errorf("%w: %w", ErrStale, err)
	}
	return err
}

// SlackAnswer answers a click in Slack, shown only to the one who clicked
// (its response_url; none: nothing is sent). Text is plain.
type SlackAnswer struct {
	Repo string
	PR   int
	URL  string
	Text string
}

func (s SlackAnswer) apply(tx record.Tx, _ Teller) error {
	if s.URL == "" {
		return nil
	}
	return tx.Enqueue(&record.Notice{Channel: record.ChannelSlack, Kind: record.NoticeSlack, Repo: s.Repo, PR: s.PR,
		Slack: &record.SlackMessage{Text: s.Text, ResponseURL: s.URL}})
}

// OverrideDecision marks the skip of a PR's head overridden by Login
// (Sweep anyway), then writes Audit.
type OverrideDecision struct {
	Repo, SHA, Login string
	PR               int
	Audit            record.AuditRecord
}

func (s OverrideDecision) apply(tx record.Tx, _ Teller) error {
	if err := tx.OverrideDecision(s.Repo, s.PR, s.SHA, s.Login); err != nil {
		return err
	}
	return tx.Audit(s.Audit)
}

// Notice puts notices in the outbox through Fn, in the plan's transaction
// (a status and a check run a handler words itself).
type Notice struct {
	Fn func(tx record.Tx) error
}

func (s Notice) apply(tx record.Tx, _ Teller) error { return s.Fn(tx) }

// PutApproval stores an approval of an external PR's head (new, or in its
// next state): a run bound to another approval fails the plan.
type PutApproval struct{ Approval record.Approval }

func (s PutApproval) apply(tx record.Tx, _ Teller) error {
	a := s.Approval
	return tx.PutApproval(&a)
}
