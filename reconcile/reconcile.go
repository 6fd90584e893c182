// Package reconcile recovers what webhooks lost: a command comment is run now
// only if its `created` webhook would have run it (never seen before, never
// edited, created inside the recovery window, on a PR open at the time and
// unchanged since: its head pinned against is the head it was posted on), once
// (by comment id), and never one GitHub shows opsbot answered (its reaction is
// on it: a database restored from any copy cannot run it again); and pins
// of PRs that were closed while opsbot was not listening are expired (or
// consumed, if merged). It does so by putting the missing events into the
// inbox, so they take the same path as any delivery. The first reconcile of a
// repository (a fresh or restored database) runs nothing unless asked to
// replay from a given time: it records what it finds as seen. A comment
// whose `created` delivery is stored and not yet processed (a backlog, a
// back-off, a slow read ahead of it) is never recorded or marked not run:
// the store decides that in the write that marks the others, and the
// delivery runs the comment as it would have had recovery never looked.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// MaxComments is how many comments one reconcile of a repository reads at
// most; past it, the next reconcile goes on from the last one read.
const MaxComments = 5000

// Reader is what reconciling reads from GitHub.
type Reader interface {
	CommentsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.IssueComment, error)
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
	// ReactedBy reports whether an account reacted to a comment (one read).
	ReactedBy(ctx context.Context, repo string, commentID, userID int64) (bool, error)
	// Timeline reads a PR's timeline events, oldest first (an error past
	// the pages it reads).
	Timeline(ctx context.Context, repo string, n int) ([]ghclient.TimelineEvent, error)
	// ClosedPullsSince lists the PRs closed and updated since a time, the
	// most recently updated first, max at most.
	ClosedPullsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.PullRequest, error)
	// CommitRuns lists the workflow runs of a commit.
	CommitRuns(ctx context.Context, repo, sha string) ([]*github.WorkflowRun, error)
	// CommentBody reads a comment's body now (ghclient.ErrNotFound: deleted).
	CommentBody(ctx context.Context, repo string, id int64) (string, error)
}

// Store is the state reconciling reads and writes.
type Store interface {
	CommentKnown(repo string, commentID int64) (bool, error)
	// NoteComments marks comments seen, leaving alone (and returning)
	// those whose `created` delivery is waiting in the inbox or that were
	// marked since they were read.
	NoteComments(repo string, notes []state.CommentNote, audit []state.AuditRecord) (left []int64, err error)
	PRsWithActivePin(repo string) ([]int, error)
	ActivePin(repo string, pr int) (*state.Pin, error)
	// LiveSequences lists the repository's sequences that are not done.
	LiveSequences(repo string) ([]state.Sequence, error)
	// SequencesHolding lists the repository's sequences that hold
	// something on GitHub (a temporary branch), done or not; WakeNow makes
	// one due now.
	SequencesHolding(repo string) ([]state.Sequence, error)
	WakeNow(ref state.SeqRef) error
	ReconciledAt(repo string) (time.Time, error)
	SetReconciledAt(repo string, t time.Time) error
	PRInfo(repo string, pr int) (*state.PRInfo, error)
	// RepoInstallation is the repository's App installation last seen (0:
	// none).
	RepoInstallation(repo string) (int64, error)
	Decisions(repo string, pr int) ([]state.Decision, error)
	events.Inbox
}

// Queue takes the deliveries reconciling adds.
type Queue = events.Queue

// Reconciler reconciles repositories.
type Reconciler struct {
	Cfg     *config.Live
	Store   Store
	Queue   Queue
	Clients func(repo string) (Reader, error)
	Log     *slog.Logger
	Now     func() time.Time
	// SelfID is opsbot's own account: its comments are never commands.
	SelfID int64
	// Commands read comments' command lines (the registry newApp builds).
	Commands *commands.Registry
	// FirstLookBack is how far back the first reconcile of a repository looks (default 7 days).
	FirstLookBack time.Duration
}

// Report is what a reconcile found.
type Report struct {
	Repo  string    `json:"repo"`
	Since time.Time `json:"since"` // the recovery window's start
	// First is a repository's first reconcile on this database: it runs
	// nothing (unless ReplaySince was given) and records what it finds.
	First             bool       `json:"first"`
	ReplaySince       *time.Time `json:"replay_since,omitempty"`
	CommentsChecked   int        `json:"comments_checked"`
	CommandsRecovered []int64    `json:"commands_recovered"` // comment ids queued for processing
	// CommandsRecorded are command comments the first reconcile recorded as seen without running them.
	CommandsRecorded []int64 `json:"commands_recorded"`
	// CommandsNotRun are unseen command comments that their `created` webhook
	// would not have run now (edited since posted, posted before the window,
	// or on a PR closed then), or that opsbot already answered.
	CommandsNotRun []int64 `json:"commands_not_run"`
	// CommandsPending are command comments this reconcile would have
	// recorded or not run, left alone because their `created` delivery
	// was waiting in the inbox (or opsbot processed or noted them
	// meanwhile): that delivery runs them as it would have anyway.
	CommandsPending []int64 `json:"commands_pending"`
	PinsOfClosedPRs []int   `json:"pins_of_closed_prs"` // PRs whose pin is being expired or consumed
	// ClosesRecovered are PRs without a pin that GitHub shows closed and
	// opsbot still held open: their lost `closed` webhook is being taken
	// in (a merge opsbot decided is then followed).
	ClosesRecovered []int `json:"closes_recovered,omitempty"`
	// ClosesCut says more PRs were closed and updated in the window than
	// a reconcile reads (MaxClosed): the least recently updated were not
	// looked at.
	ClosesCut bool `json:"closes_cut,omitempty"`
	// HeadsRecorded are open PRs with a pin whose head opsbot did not know:
	// it is being recorded as GitHub has it (and opsbot/reuse-ready set).
	HeadsRecorded []int `json:"heads_recorded,omitempty"`
	// SequencesTakenBack are PRs whose live sequence's comment (an
	// approval's, a merge's) was deleted, or its command edited away, with
	// the webhook lost: the change was taken in as the webhook would have.
	SequencesTakenBack []int `json:"sequences_taken_back,omitempty"`
	// BranchesLeft are what opsbot's sequences hold on GitHub ("#PR
	// branch"): a merge's temporary branch while it merges, or one a merge
	// that ended has not deleted yet (GitHub did not answer, or a crash):
	// its deletion is tried now.
	BranchesLeft []string `json:"branches_left,omitempty"`
	// PinsTakenBack are PRs whose pin's comment was deleted, or its command
	// edited away, while the webhook was lost: the pin is being revoked.
	PinsTakenBack []int `json:"pins_taken_back"`
}

// Overlap is how far before the last reconcile the next one's window starts:
// a webhook that arrives late is deduplicated by comment id.
const Overlap = time.Hour

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// ErrReplayInFuture is what a replay from a time still to come answers.
var ErrReplayInFuture = errors.New("reconcile: --replay-since is in the future")

// MaxReplay is how far back a replay may start.
const MaxReplay = 72 * time.Hour

// ErrReplayTooOld is what a replay from further back than MaxReplay answers.
var ErrReplayTooOld = errors.New("reconcile: --replay-since is more than 72h ago")

// IDPrefix starts the delivery ids reconciling makes; webhook deliveries
// may not use it, so nobody can take an id recovery will need.
const IDPrefix = events.RecoveryIDPrefix

// Run reconciles one repository. The recovery window starts an Overlap
// before the last reconcile; replaySince, when not zero, starts it there
// instead and makes even a first reconcile run what it finds in it.
func (r *Reconciler) Run(ctx context.Context, repo string, replaySince time.Time) (Report, error) {
	if r.Commands == nil {
		// Without the commands every comment would read as having none.
		return Report{}, errors.New("reconcile: no command registry")
	}
	rc, ok := r.Cfg.Get().Repo(repo)
	if !ok {
		return Report{}, fmt.Errorf("%s is not served by this opsbot", repo)
	}
	start := r.now()
	rep := Report{Repo: rc.Name, CommandsRecovered: []int64{}, CommandsRecorded: []int64{}, CommandsNotRun: []int64{},
		CommandsPending: []int64{}, PinsOfClosedPRs: []int{}, PinsTakenBack: []int{}}
	if replaySince.After(start) {
		return rep, fmt.Errorf("%w: %s", ErrReplayInFuture, replaySince.UTC().Format(time.RFC3339))
	}
	if !replaySince.IsZero() && replaySince.Before(start.Add(-MaxReplay)) {
		return rep, fmt.Errorf("%w: %s (replay from %s or later)", ErrReplayTooOld, stamp(replaySince), stamp(start.Add(-MaxReplay)))
	}
	last, err := r.Store.ReconciledAt(rc.Name)
	if err != nil {
		return rep, err
	}
	look := r.FirstLookBack
	if look == 0 {
		look = 7 * 24 * time.Hour
	}
	switch {
	case !replaySince.IsZero():
		rep.Since = replaySince
		rep.ReplaySince = &replaySince
	case last.IsZero():
		rep.First = true
		rep.Since = start.Add(-look)
	default:
		rep.Since = last.Add(-Overlap)
	}
	schema := events.NewSchema(r.Cfg, r.Commands, r.now)
	gh, err := r.Clients(rc.Name)
	if err != nil {
		return rep, err
	}
	comments, err := gh.CommentsSince(ctx, rc.Name, rep.Since, MaxComments)
	if err != nil {
		return rep, err
	}
	// Comments found and not run: nothing runs them later, unless their
	// `created` delivery is waiting when the mark is written (the store
	// decides that in the same write).
	var seen []state.CommentNote
	var audit []state.AuditRecord
	notRun := func(c *github.IssueComment, pr int, outcome, reason string) {
		u := c.GetUser()
		seen = append(seen, state.CommentNote{CommentID: c.GetID(), Audit: &state.AuditRecord{Kind: "recovery", Outcome: outcome,
			Repo: rc.Name, PR: pr, ActorID: u.GetID(), ActorLogin: u.GetLogin(),
			Reason: reason, OriginRef: record.OriginRef{CommentID: c.GetID(), CommentURL: c.GetHTMLURL()}}})
	}
	// unread is a comment whose recovery waits on a read that failed: not
	// run now and left unmarked, so its created webhook, late rather than
	// lost, still runs it, and the next reconcile looks at it again.
	unread := func(c *github.IssueComment, pr int, reason string) {
		u := c.GetUser()
		rep.CommandsNotRun = append(rep.CommandsNotRun, c.GetID())
		seen = append(seen, state.CommentNote{CommentID: c.GetID(), Unmarked: true, Audit: &state.AuditRecord{Kind: "recovery",
			Outcome: "not_run", Repo: rc.Name, PR: pr, ActorID: u.GetID(), ActorLogin: u.GetLogin(),
			Reason: reason + ": it is not run now; its created webhook, if it comes, runs it, and the next reconcile looks again", OriginRef: record.OriginRef{CommentID: c.GetID(), CommentURL: c.GetHTMLURL()}}})
	}
	for _, c := range comments {
		rep.CommentsChecked++
		pr, isPR := prNumber(c)
		if !isPR {
			continue
		}
		known, err := r.Store.CommentKnown(rc.Name, c.GetID())
		if err != nil {
			return rep, err
		}
		if known {
			continue
		}
		u := c.GetUser()
		if (r.SelfID != 0 && u.GetID() == r.SelfID) ||
			len(r.Commands.Parse(c.GetBody(), commands.Options{Repo: rc.Name, Host: r.Cfg.Get().WebHost()})) == 0 {
			seen = append(seen, state.CommentNote{CommentID: c.GetID()}) // opsbot's own, or no command: seen, nothing to run
			continue
		}
		created, updated := c.GetCreatedAt().Time, c.GetUpdatedAt().Time
		switch {
		case rep.First:
			rep.CommandsRecorded = append(rep.CommandsRecorded, c.GetID())
			notRun(c, pr, "recorded", "the first reconcile of this repository records the command comments it finds as seen "+
				"and runs none (opsbot reconcile --replay-since T runs those posted since T)")
			continue
		case !created.Equal(updated):
			rep.CommandsNotRun = append(rep.CommandsNotRun, c.GetID())
			notRun(c, pr, "not_run", fmt.Sprintf("the comment was edited after it was posted (created %s, updated %s): "+
				"commands in edited comments are not run; post a new comment", stamp(created), stamp(updated)))
			continue
		case created.Before(rep.Since):
			rep.CommandsNotRun = append(rep.CommandsNotRun, c.GetID())
			notRun(c, pr, "not_run", fmt.Sprintf("the comment was posted at %s, before the recovery window (since %s)",
				stamp(created), stamp(rep.Since)))
			continue
		}
		// The last reads decide for a comment its `created` webhook would run.
		if r.SelfID == 0 {
			// Whose reaction would be opsbot's is not known: fail closed.
			unread(c, pr, "opsbot's own account is not known, so whether it already answered the comment cannot be read")
			continue
		}
		answered, err := gh.ReactedBy(ctx, rc.Name, c.GetID(), r.SelfID)
		if err != nil {
			// One comment GitHub would not tell about stops no other
			// comment's recovery; it is not run (fail closed), and said so.
			unread(c, pr, fmt.Sprintf("whether opsbot already answered the comment could not be read (%v)", err))
			continue
		}
		if answered {
			rep.CommandsNotRun = append(rep.CommandsNotRun, c.GetID())
			notRun(c, pr, "not_run", "opsbot already answered the comment (its reaction is on it): a database restored from a copy "+
				"never runs a command again")
			continue
		}
		head, why, err := r.sameSince(ctx, gh, rc.Name, pr, created)
		if err != nil {
			unread(c, pr, fmt.Sprintf("what became of PR #%d since the comment was posted could not be read (%v)", pr, err))
			continue
		}
		if why != "" {
			rep.CommandsNotRun = append(rep.CommandsNotRun, c.GetID())
			notRun(c, pr, "not_run", why)
			continue
		}
		title := ""
		if info, _ := r.Store.PRInfo(rc.Name, pr); info != nil {
			title = info.Title
		}
		prURL, err := json.Marshal(map[string]string{"url": fmt.Sprintf("%srepos/%s/pulls/%d", r.Cfg.Get().GitHub.APIURL, rc.Name, pr)})
		if err != nil {
			return rep, err
		}
		author := events.Account{Login: u.GetLogin(), ID: u.GetID(), Type: u.GetType()}
		body := &events.CommentPayload{Action: "created",
			Issue:      &events.Issue{Number: pr, State: "open", Title: title, PullRequest: prURL},
			Comment:    &events.IssueComment{ID: c.GetID(), Body: c.GetBody(), HTMLURL: c.GetHTMLURL(), User: author},
			Repository: &events.Repository{FullName: rc.Name}, Sender: author,
			// A pin is taken only while this is still the head: a push
			// between this reconcile and the delivery's turn passes it by.
			Recovery: &events.Recovery{HeadSHA: head}}
		added, err := r.add(ctx, schema, fmt.Sprintf("%scomment-%d", IDPrefix, c.GetID()), events.EventComment, body)
		if err != nil {
			return rep, err
		}
		if added {
			rep.CommandsRecovered = append(rep.CommandsRecovered, c.GetID())
		}
	}
	if rep.First {
		audit = append(audit, state.AuditRecord{Kind: "recovery", Outcome: "recorded", Repo: rc.Name,
			Reason: fmt.Sprintf("the first reconcile of this repository on this database recorded the %d comments posted or edited "+
				"since %s as seen and ran none of them", rep.CommentsChecked, stamp(rep.Since))})
	}
	left, err := r.Store.NoteComments(rc.Name, seen, audit)
	if err != nil {
		return rep, err
	}
	for _, id := range left {
		if slices.Contains(rep.CommandsRecorded, id) || slices.Contains(rep.CommandsNotRun, id) {
			rep.CommandsPending = append(rep.CommandsPending, id)
		}
	}
	rep.CommandsRecorded = slices.DeleteFunc(rep.CommandsRecorded, func(id int64) bool { return slices.Contains(left, id) })
	rep.CommandsNotRun = slices.DeleteFunc(rep.CommandsNotRun, func(id int64) bool { return slices.Contains(left, id) })
	prs, err := r.Store.PRsWithActivePin(rc.Name)
	if err != nil {
		return rep, err
	}
	for _, n := range prs {
		p, err := gh.PullRequest(ctx, rc.Name, n)
		if err != nil {
			return rep, err
		}
		if p.GetState() != "closed" {
			if err := r.headUnknown(ctx, schema, rc.Name, p, &rep); err != nil {
				return rep, err
			}
			if err := r.takenBack(ctx, gh, schema, rc.Name, n, &rep); err != nil {
				return rep, err
			}
			continue
		}
		added, err := r.addClosed(ctx, schema, rc.Name, p)
		if err != nil {
			return rep, err
		}
		if added {
			rep.PinsOfClosedPRs = append(rep.PinsOfClosedPRs, n)
		}
	}
	// A close that could not be read fails this reconcile after the rest
	// is done, so the next one looks at the same window again.
	lostErr := r.closesLost(ctx, gh, schema, rc.Name, prs, &rep)
	if err := r.sequencesTakenBack(ctx, gh, schema, rc.Name, &rep); err != nil {
		return rep, err
	}
	if err := r.heldOnGitHub(rc.Name, &rep); err != nil {
		return rep, err
	}
	if lostErr != nil {
		return rep, lostErr
	}
	// A list cut at MaxComments (a flood of comments) is not taken as all
	// there was: the next reconcile goes on from the last comment read. (A
	// first reconcile runs nothing, so what it did not reach stays history.)
	stamp := start
	if len(comments) >= MaxComments && !rep.First {
		if t := comments[len(comments)-1].GetCreatedAt().Time.Add(Overlap); t.Before(stamp) {
			stamp = t
		}
	}
	if err := r.Store.SetReconciledAt(rc.Name, stamp); err != nil {
		return rep, err
	}
	r.Log.Info("reconciled", "repo", rc.Name, "since", rep.Since, "first", rep.First, "comments", rep.CommentsChecked,
		"recovered", len(rep.CommandsRecovered), "recorded", len(rep.CommandsRecorded), "not_run", len(rep.CommandsNotRun),
		"pending", len(rep.CommandsPending), "closed", len(rep.PinsOfClosedPRs), "closes_recovered", len(rep.ClosesRecovered))
	return rep, nil
}

// headUnknown records, for an open PR with a pin whose head opsbot does
// not know (a pin granted by an opsbot that did not record it), the PR as
// GitHub has it now (events.ActionHeadUnknown), so opsbot/reuse-ready is set
// on its head.
func (r *Reconciler) headUnknown(ctx context.Context, schema *events.Schema, repo string, p *github.PullRequest, rep *Report) error {
	info, err := r.Store.PRInfo(repo, p.GetNumber())
	if err != nil || (info != nil && info.HeadSHA != "") {
		return err
	}
	n, head := p.GetNumber(), p.GetHead()
	body := &events.PullPayload{Action: events.ActionHeadUnknown, Number: n,
		PullRequest: events.PullRequest{Number: n, State: p.GetState(), Title: p.GetTitle(), UpdatedAt: p.GetUpdatedAt().Time,
			Head: events.PullHead{SHA: head.GetSHA(), Ref: head.GetRef()}, Draft: p.GetDraft(), Labels: []events.Label{},
			User: events.Account{Login: p.GetUser().GetLogin()}},
		Repository: &events.Repository{FullName: repo}, Sender: events.Account{Login: "opsbot-reconcile"}}
	for _, l := range p.Labels {
		body.PullRequest.Labels = append(body.PullRequest.Labels, events.Label{Name: l.GetName()})
	}
	added, err := r.add(ctx, schema, fmt.Sprintf("%shead-%s-%d-%s", IDPrefix, strings.ToLower(repo), n, strings.ToLower(head.GetSHA())),
		events.EventPull, body)
	if added {
		rep.HeadsRecorded = append(rep.HeadsRecorded, n)
	}
	return err
}

// takenBack recovers a lost `deleted` or `edited` webhook of the comment
// that made PR n's active pin: when GitHub no longer has the comment, or it
// no longer holds the pin's command line, the pin is revoked through the
// inbox (in the PR's order), as the webhook would have done. Who deleted or
// edited it is not known, so it is revoked whoever it was: the next push
// then sweeps, which is never wrong.
func (r *Reconciler) takenBack(ctx context.Context, gh Reader, schema *events.Schema, repo string, n int, rep *Report) error {
	pin, err := r.Store.ActivePin(repo, n)
	if err != nil || pin == nil || pin.CommentID == 0 || pin.Origin().Kind != record.OriginComment {
		return err // no pin, or one a click made: no comment to look for
	}
	body, err := gh.CommentBody(ctx, repo, pin.CommentID)
	action := "edited"
	switch {
	case errors.Is(err, ghclient.ErrNotFound):
		action = "deleted"
	case err != nil:
		r.Log.Warn("reading a pin's comment failed; the next reconcile tries again", "repo", repo, "pr", n, "comment", pin.CommentID, "err", err)
		return nil
	default:
		for _, c := range r.Commands.Parse(body, commands.Options{Repo: repo, Host: r.Cfg.Get().WebHost()}) {
			if c.Error == "" && strings.EqualFold(c.Text, pin.CommentLine) {
				return nil // still there
			}
		}
	}
	prURL, err := json.Marshal(map[string]string{"url": fmt.Sprintf("%srepos/%s/pulls/%d", r.Cfg.Get().GitHub.APIURL, repo, n)})
	if err != nil {
		return err
	}
	author := events.Account{Login: pin.ActorLogin, ID: pin.ActorID}
	payload := &events.CommentPayload{Action: action,
		Issue:      &events.Issue{Number: n, State: "open", PullRequest: prURL},
		Comment:    &events.IssueComment{ID: pin.CommentID, Body: body, HTMLURL: pin.CommentURL, User: author},
		Repository: &events.Repository{FullName: repo}, Sender: events.Account{Login: "opsbot-reconcile"},
		Recovery: &events.Recovery{TakenBack: true}}
	if action == "edited" {
		payload.Changes = &events.BodyChange{Body: &struct {
			From string `json:"from"`
		}{From: pin.CommentLine}}
	}
	id := fmt.Sprintf("%s%s-%d-pin-%d", IDPrefix, action, pin.CommentID, pin.ID)
	added, err := r.add(ctx, schema, id, events.EventComment, payload)
	if err != nil {
		return err
	}
	if added {
		rep.PinsTakenBack = append(rep.PinsTakenBack, n)
	}
	return nil
}

// sequencesTakenBack recovers a lost `deleted` or `edited` webhook of the
// heldOnGitHub reports what opsbot's sequences hold on GitHub, and makes
// the cleanup of each one that ended due now: a deletion waiting for its
// next try (or a restart) is tried within this reconcile.
func (r *Reconciler) heldOnGitHub(repo string, rep *Report) error {
	held, err := r.Store.SequencesHolding(repo)
	if err != nil {
		return err
	}
	for _, s := range held {
		for _, l := range s.Left {
			rep.BranchesLeft = append(rep.BranchesLeft, fmt.Sprintf("#%d %s", s.PR, l.Branch))
		}
		if !s.Done {
			continue // its own steps delete it
		}
		if err := r.Store.WakeNow(state.SeqRef{Repo: s.Repo, PR: s.PR, Kind: s.Kind, Version: s.Version}); err != nil {
			return err
		}
	}
	return nil
}

// comment that started each live sequence (an approval; a merge whose pin
// a push has used, so no active pin leads to its comment): when GitHub no
// longer has the comment, or it no longer holds the command line, the
// change goes through the inbox as the webhook would have, and the
// sequence's command takes it back. A sequence whose comment made the PR's
// active pin is left to takenBack.
func (r *Reconciler) sequencesTakenBack(ctx context.Context, gh Reader, schema *events.Schema, repo string, rep *Report) error {
	live, err := r.Store.LiveSequences(repo)
	if err != nil {
		return err
	}
	for _, s := range live {
		o := s.Origin()
		if o.Kind != record.OriginComment || o.ID == 0 || s.PR <= 0 {
			continue // a click, or the repository's own (the digest): no comment to look for
		}
		if s.OriginSeen != "" {
			continue // its comment's change was processed (and kept it going): no webhook was lost
		}
		if pin, err := r.Store.ActivePin(repo, s.PR); err != nil {
			return err
		} else if pin != nil && pin.Origin().Same(o) {
			continue // takenBack looks at that comment
		}
		line := s.Line()
		body, err := gh.CommentBody(ctx, repo, o.ID)
		action := "edited"
		switch {
		case errors.Is(err, ghclient.ErrNotFound):
			action = "deleted"
		case err != nil:
			r.Log.Warn("reading a sequence's comment failed; the next reconcile tries again", "repo", repo, "pr", s.PR, "kind", s.Kind,
				"comment", o.ID, "err", err)
			continue
		default:
			still := false
			for _, c := range r.Commands.Parse(body, commands.Options{Repo: repo, Host: r.Cfg.Get().WebHost()}) {
				still = still || (c.Error == "" && strings.EqualFold(c.Text, line))
			}
			if still || line == "" {
				continue
			}
		}
		prURL, err := json.Marshal(map[string]string{"url": fmt.Sprintf("%srepos/%s/pulls/%d", r.Cfg.Get().GitHub.APIURL, repo, s.PR)})
		if err != nil {
			return err
		}
		author := events.Account{Login: s.ActorLogin, ID: s.ActorID}
		payload := &events.CommentPayload{Action: action,
			Issue:      &events.Issue{Number: s.PR, State: "open", PullRequest: prURL},
			Comment:    &events.IssueComment{ID: o.ID, Body: body, HTMLURL: o.URL, User: author},
			Repository: &events.Repository{FullName: repo}, Sender: events.Account{Login: "opsbot-reconcile"},
			Recovery: &events.Recovery{TakenBack: true}}
		if action == "edited" {
			payload.Changes = &events.BodyChange{Body: &struct {
				From string `json:"from"`
			}{From: line}}
		}
		id := fmt.Sprintf("%s%s-%d-seq-%s-%d", IDPrefix, action, o.ID, s.Kind, s.Started.UnixNano())
		added, err := r.add(ctx, schema, id, events.EventComment, payload)
		if err != nil {
			return err
		}
		if added {
			rep.SequencesTakenBack = append(rep.SequencesTakenBack, s.PR)
		}
	}
	return nil
}

// timelineChanges are the timeline events after which a command posted
// before them is not what its `created` webhook would have run.
var timelineChanges = map[string]string{"closed": "closed", "reopened": "reopened", "merged": "merged",
	"head_ref_force_pushed": "force-pushed", "base_ref_changed": "retargeted to another base branch"}

// sameSince tells whether PR n is as it was when a comment was posted at
// t, so that the comment's `created` webhook, had it come, would have run
// it against the head the PR has now. It returns that head, or why not (the
// comment is then not run): the PR was closed at t, or closed, reopened,
// merged, retargeted or force-pushed since (its timeline); opsbot saw its
// head move since; a run of the head was made since (a push, which GitHub's
// timeline does not date); or nothing shows the head was already the PR's
// head at t (a run of it made by then, or opsbot's own record of it). An
// error is a read that failed: the caller fails closed.
func (r *Reconciler) sameSince(ctx context.Context, gh Reader, repo string, n int, t time.Time) (string, string, error) {
	at := t.Truncate(time.Second)
	evs, err := gh.Timeline(ctx, repo, n)
	if err != nil {
		return "", "", err
	}
	closed := false
	for _, e := range evs {
		if e.At.After(at) {
			break
		}
		switch e.Event {
		case "closed", "merged":
			closed = true
		case "reopened":
			closed = false
		}
	}
	if closed {
		return "", fmt.Sprintf("PR #%d was closed when the comment was posted (%s): commands on a closed PR are not run", n, stamp(t)), nil
	}
	for _, e := range evs {
		if what, ok := timelineChanges[e.Event]; ok && !e.At.Before(at) {
			return "", fmt.Sprintf("PR #%d was %s at %s, after the comment was posted (%s): the push the command meant may have "+
				"passed; it is not run, post the command again", n, what, stamp(e.At), stamp(t)), nil
		}
	}
	p, err := gh.PullRequest(ctx, repo, n)
	if err != nil {
		return "", "", err
	}
	if p.GetState() != "open" {
		return "", fmt.Sprintf("PR #%d is %s now: commands are recovered only on open PRs", n, p.GetState()), nil
	}
	head := strings.ToLower(p.GetHead().GetSHA())
	info, err := r.Store.PRInfo(repo, n)
	if err != nil {
		return "", "", err
	}
	if info != nil && !info.HeadAt.IsZero() && !info.HeadAt.Before(at) { // the same second counts as after: fail closed
		return "", fmt.Sprintf("opsbot saw PR #%d's head move to %s at %s, after the comment was posted (%s): the push the command "+
			"meant has passed; it is not run, post the command again", n, mdtext.ShortSHA(info.HeadSHA), stamp(info.HeadAt), stamp(t)), nil
	}
	known := info != nil && strings.EqualFold(info.HeadSHA, head) && !info.HeadAt.IsZero() && info.HeadAt.Before(at)
	decs, err := r.Store.Decisions(repo, n)
	if err != nil {
		return "", "", err
	}
	for _, d := range decs {
		known = known || (strings.EqualFold(d.HeadSHA, head) && d.DecidedAt.Before(at))
	}
	list, err := gh.CommitRuns(ctx, repo, head)
	if err != nil {
		return "", "", err
	}
	headRepo := p.GetHead().GetRepo().GetID()
	for _, run := range list {
		if run.GetEvent() != "pull_request" || (headRepo != 0 && run.GetHeadRepository().GetID() != headRepo) {
			continue
		}
		made := run.GetCreatedAt().Time
		if !made.Before(at) { // the same second counts as after: fail closed
			return "", fmt.Sprintf("run %d of PR #%d's head %s was made at %s, after the comment was posted (%s): the head may have been "+
				"pushed since, so the command is not run; post it again", run.GetID(), n, mdtext.ShortSHA(head), stamp(made), stamp(t)), nil
		}
		known = true
	}
	if !known {
		return "", fmt.Sprintf("nothing shows that %s, PR #%d's head now, was its head when the comment was posted (%s): no run of it "+
			"by then, and opsbot did not see it; the command is not run, post it again", mdtext.ShortSHA(head), n, stamp(t)), nil
	}
	return head, "", nil
}

// add puts a recovered event into the inbox, classified as ingest
// classifies a webhook, so it takes the same path.
// MaxClosed is how many PRs closed and updated since the recovery
// window's start one reconcile reads at most (the most recently updated
// first); past it the report says the list was cut (ClosesCut).
const MaxClosed = 1000

// closesLost recovers the closes opsbot did not see: a PR closed on GitHub
// within the recovery window that opsbot still holds open, its `closed`
// webhook lost, is read again (the list's short form has no merged flag)
// and gets that webhook rebuilt, as a PR with a pin (pinned, whose close
// was recovered already) does: a merge opsbot decided is then followed
// after the merge as it would have been. A first reconcile takes none in
// (it runs nothing), nor a close from before the window (one older than
// this build's first reconcile stays history).
func (r *Reconciler) closesLost(ctx context.Context, gh Reader, schema *events.Schema, repo string, pinned []int, rep *Report) error {
	if rep.First {
		return nil
	}
	closed, err := gh.ClosedPullsSince(ctx, repo, rep.Since, MaxClosed)
	if err != nil {
		return err
	}
	if len(closed) >= MaxClosed {
		rep.ClosesCut = true
		r.Log.Warn("more PRs were closed and updated since the window's start than a reconcile reads: the older ones are not looked at",
			"repo", repo, "since", rep.Since, "read", len(closed))
	}
	var failed error
	for _, listed := range closed {
		n := listed.GetNumber()
		if slices.Contains(pinned, n) || listed.GetClosedAt().Before(rep.Since) {
			continue
		}
		info, err := r.Store.PRInfo(repo, n)
		if err != nil {
			return err
		}
		if info == nil || info.State != "open" {
			continue // never known to opsbot, or its close was seen
		}
		p, err := gh.PullRequest(ctx, repo, n)
		switch {
		case errors.Is(err, ghclient.ErrNotFound):
			r.Log.Warn("a closed PR the list named is not found: its close is not taken in", "repo", repo, "pr", n)
			continue // gone for good: failing would hold every later reconcile to this window
		case err != nil:
			// The others are still taken in; the reconcile then fails, so
			// the next one reads this window again.
			failed = errors.Join(failed, fmt.Errorf("reading the closed PR #%d: %w", n, err))
			continue
		}
		if p.GetState() != "closed" {
			continue // reopened since the list was read
		}
		added, err := r.addClosed(ctx, schema, repo, p)
		if err != nil {
			return err
		}
		if added {
			rep.ClosesRecovered = append(rep.ClosesRecovered, n)
		}
	}
	return failed
}

// addClosed puts a closed PR's `closed` webhook into the inbox, rebuilt
// from the PR as GitHub has it now (p in its full form, which says whether
// it was merged): its head, merge commit and time, base branch and labels,
// the repository's default branch and installation.
func (r *Reconciler) addClosed(ctx context.Context, schema *events.Schema, repo string, p *github.PullRequest) (bool, error) {
	inst, err := r.Store.RepoInstallation(repo)
	if err != nil {
		return false, err
	}
	n, head := p.GetNumber(), p.GetHead()
	labels := []events.Label{}
	for _, l := range p.Labels {
		labels = append(labels, events.Label{Name: l.GetName()})
	}
	body := &events.PullPayload{Action: "closed", Number: n,
		PullRequest: events.PullRequest{Number: n, State: "closed", Merged: p.GetMerged(),
			MergeCommitSHA: p.GetMergeCommitSHA(), MergedAt: p.GetMergedAt().Time, Title: p.GetTitle(), UpdatedAt: p.GetUpdatedAt().Time,
			Head: events.PullHead{SHA: head.GetSHA(), Ref: head.GetRef()}, Base: events.PullHead{SHA: p.GetBase().GetSHA(), Ref: p.GetBase().GetRef()},
			User: events.Account{Login: p.GetUser().GetLogin()}, Labels: labels},
		Repository:   &events.Repository{FullName: repo, DefaultBranch: p.GetBase().GetRepo().GetDefaultBranch()},
		Installation: events.Installation{ID: inst}, Sender: events.Account{Login: "opsbot-reconcile"}}
	// One id per close: a PR closed, reopened and closed again while
	// opsbot was not listening is recovered each time.
	id := fmt.Sprintf("%sclosed-%s-%d-%d-%s", IDPrefix, strings.ToLower(repo), n, p.GetClosedAt().Unix(),
		strings.ToLower(head.GetSHA()))
	return r.add(ctx, schema, id, events.EventPull, body)
}

// add puts a delivery recovery made into the inbox, as the intake takes a
// webhook's: false when it was stored before (its id, or its body).
func (r *Reconciler) add(ctx context.Context, schema *events.Schema, id, event string, body any) (bool, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	in := &events.Intake{Schema: schema, Store: r.Store, Queue: r.Queue}
	taken, err := in.Take(ctx, event, id, raw, [32]byte{})
	if err != nil {
		return false, err
	}
	if taken.Delivery == nil {
		return false, fmt.Errorf("reconcile: the recovered %s %s was not classified as used: %s", event, id, taken.Ignored)
	}
	return taken.Result == state.Stored, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// prNumber reads the PR a comment belongs to from its page URL (…/pull/N#issuecomment-…).
func prNumber(c *github.IssueComment) (int, bool) {
	u := c.GetHTMLURL()
	i := strings.Index(u, "/pull/")
	if i < 0 {
		return 0, false
	}
	rest := u[i+len("/pull/"):]
	if j := strings.IndexAny(rest, "#/?"); j >= 0 {
		rest = rest[:j]
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d", &n); err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
