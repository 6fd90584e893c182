package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"opsbot/auth"
	"opsbot/config"
	"opsbot/mdtext"
	"opsbot/notices"
	"opsbot/runs"
	"opsbot/state"
)

// Comment is a PR conversation comment as a webhook told it.
type Comment struct {
	Repo         string
	PR           int
	PRState      string // open, closed
	CommentID    int64
	URL          string
	Body         string
	Actor        auth.Actor
	Installation int64
	// Parsed says Commands (and, for an edit, OldCommands) hold the
	// comment's commands as ingest parsed them; without it Body (and the
	// edit's old body) are parsed here.
	Parsed      bool
	Commands    []Command
	OldCommands []Command
	// Author is who wrote the comment; for an edit or a deletion Actor is
	// who made it, who may be someone else.
	Author auth.Actor
	// Mark is what opsbot had seen of the comment when its commands were
	// chosen (an edit or a deletion before its `created` delivery): the
	// write runs them only if that is still so.
	Mark state.CommentMark
	// Withdrawn are commands the comment held when posted that it no longer
	// holds (edited away, or the comment deleted, before its `created`
	// delivery was processed): audited as not run, for WithdrawnWhy.
	Withdrawn    []Command
	WithdrawnWhy string
	// ExpectHead, for a comment recovery found, is the PR's head when it
	// was posted: a pin is taken only while that is still the head.
	ExpectHead string
	// Recovered marks a deletion or an edit recovery found for a lost
	// webhook (Actor unknown): it takes back what the comment started.
	Recovered bool
}

// Deps are what handling a comment reads through.
type Deps struct {
	Repo      *config.Repo
	Checker   *auth.Checker
	Lookup    auth.Lookup
	Validator *runs.Validator
	Notices   *notices.Builder
	Stage     StageHandler // nil when staging is not configured
	Log       *slog.Logger
	WebHost   string // host of run URLs in commands; default github.com
	// Users holds the account ids allow_users logins resolved to; a listed
	// login that did not resolve allows nobody.
	Users *auth.Directory
	// MaxReplies is how many reply comments one user gets per repository in
	// a rolling hour (notices.max_replies_per_user_per_hour); past it opsbot
	// only reacts. Zero means the default.
	MaxReplies int
	// MaxOutsiderReactions and MaxOutsiderReactionsRepo are how many
	// reactions commenters below triage get per repository in a rolling
	// hour, each and all together
	// (notices.max_outsider_reactions_per_user_per_hour, _per_repo_);
	// past either only the audit records. Zero means the default.
	MaxOutsiderReactions     int
	MaxOutsiderReactionsRepo int
}

// policy is the access rule of a command, its allow_users matched by account id.
func (d Deps) policy(name string) auth.Policy {
	p := Policy(d.Repo, name)
	p.UserIDs = d.Users.IDs(p.Users)
	return p
}

// StageHandler handles /stage-results; it lives with the staging queue.
type StageHandler interface {
	// Prepare does the reads for a stage request; the returned write
	// records it and adds its notices.
	Prepare(ctx context.Context, c Comment, cmd Command, v auth.Verdict) (reply string, ok bool, w func(tx *state.Tx) error)
}

// Policy is the access rule of a command on a repository, without the
// account ids its allow_users resolved to (Deps adds them).
func Policy(rc *config.Repo, name string) auth.Policy {
	a := rc.Reuse.Access
	switch name {
	case Stage:
		a = rc.Stage.Access
	case Help:
		a = rc.Help
	}
	role, _ := auth.ParseRole(a.MinRole) // checked at config load
	return auth.Policy{MinRole: role, Users: a.AllowUsers, Teams: a.AllowTeams, AllowBots: rc.AllowBots}
}

// step is what one command line comes to.
type step struct {
	cmd     Command
	verdict auth.Verdict
	outcome Outcome
	reply   string // the part of the reply about this line ("" for none)
	reason  string
	quiet   bool // a denial to someone below triage: a reaction at most
	run     runs.Run
	bare    bool
	stageW  func(tx *state.Tx) error
}

// Created runs the commands of a new comment. It does the reads (roles,
// runs) and returns the write that records everything and adds the
// notices, to be committed with the delivery.
func Created(ctx context.Context, d Deps, c Comment) (string, state.Write) {
	cmds := c.Commands
	if !c.Parsed {
		cmds = Parse(c.Body, Options{Repo: d.Repo.Name, Host: d.WebHost})
	}
	if len(cmds) == 0 && len(c.Withdrawn) == 0 {
		return "no-commands", nil
	}
	// For /reuse-sweep-run the last one in a comment wins.
	lastReuse := -1
	for i, cmd := range cmds {
		if cmd.Name == Reuse && cmd.Error == "" {
			lastReuse = i
		}
	}
	steps := make([]step, len(cmds))
	for i, cmd := range cmds {
		s := &steps[i]
		s.cmd = cmd
		policyName := cmd.Name
		s.verdict = d.Checker.Check(ctx, d.Lookup, d.Repo.Name, c.Actor, d.policy(policyName))
		switch {
		case cmd.Error != "":
			s.outcome, s.reason = UsageError, cmd.Reason
			if s.verdict.Allowed {
				s.reply = UsageReply(c.Actor.Login, cmd)
			}
		case !s.verdict.Allowed:
			s.outcome, s.reason = Denied, s.verdict.Reason
			if s.verdict.CheckFailed {
				s.outcome = Errored
				d.Log.Warn("permission check failed", "login", c.Actor.Login, "err", s.verdict.Err)
			}
			if !answersDenial(s.verdict) {
				// Outsiders cannot make opsbot talk: a reaction, no reply, no Slack.
				s.quiet = true
				if s.verdict.CheckFailed {
					s.reason = "permission could not be checked (GitHub did not answer); not answered: " + quietUnknown
					break
				}
				s.reason += "; not answered: " + quietDenial
				break
			}
			s.reply = fmt.Sprintf("%s I did not run %s: %s.", mdtext.Mention(c.Actor.Login), code(cmd.Text), s.verdict.Reason)
		case cmd.Name == Reuse && i != lastReuse:
			s.outcome, s.reason = Ignored, "a later /reuse-sweep-run in this comment wins"
			s.reply = fmt.Sprintf("%s (line %d) was not run: the last `/reuse-sweep-run` in a comment wins.", code(cmd.Text), cmd.Line)
		case cmd.Name == Help:
			s.outcome = Accepted
			s.reply = HelpReply(c.Actor.Login, helpInfo(d.Repo, d.Stage != nil))
		case cmd.Name == Reuse && c.PRState == "closed":
			s.outcome, s.reason = Rejected, "the PR is closed"
			s.reply = fmt.Sprintf("%s this PR is closed: a pin applies to the next push of an open PR.", mdtext.Mention(c.Actor.Login))
		case cmd.Name == Reuse && cmd.Cancel:
			s.outcome = Accepted // what it revokes is found in the write
		case cmd.Name == Reuse:
			prepareReuse(ctx, d, c, s)
		case cmd.Name == Stage:
			if d.Stage == nil {
				s.outcome, s.reason = Rejected, "staging is not configured"
				s.reply = fmt.Sprintf("%s staging is not configured for %s (no `stage.dispatch.repo`).", mdtext.Mention(c.Actor.Login), mdtext.Text(d.Repo.Name))
				break
			}
			reply, ok, w := d.Stage.Prepare(ctx, c, cmd, s.verdict)
			s.reply, s.stageW = reply, w
			s.outcome = Accepted
			if !ok {
				s.outcome, s.reason = Rejected, reply
			}
		}
	}
	outcome := "commands"
	if len(cmds) == 0 {
		outcome = "withdrawn"
	}
	return outcome, func(tx *state.Tx) error {
		mark, err := tx.CommentMark(d.Repo.Name, c.CommentID)
		if err != nil {
			return err
		}
		if mark != c.Mark && mark != state.MarkProcessed {
			// An edit or a deletion was recorded since the commands were
			// chosen: choose again from what the comment says now.
			return fmt.Errorf("%w: comment %d was %s while its commands were checked", ErrCommentChanged, c.CommentID, mark)
		}
		if seen, err := tx.CommentSeen(d.Repo.Name, c.CommentID); err != nil || seen {
			return err // a redelivered or replayed comment never runs again
		}
		for _, cmd := range c.Withdrawn {
			if err := tx.Audit(state.AuditRecord{Kind: "command", Command: cmd.Name, Outcome: string(NotRun), Repo: c.Repo, PR: c.PR,
				RunID: cmd.RunID, ActorID: c.Actor.ID, ActorLogin: c.Actor.Login, CommentID: c.CommentID, CommentURL: c.URL,
				Reason: c.WithdrawnWhy}); err != nil {
				return err
			}
		}
		return commitSteps(tx, d, c, steps)
	}
}

// ErrCommentChanged is a comment's write that found the comment edited or
// deleted since its commands were chosen; processing it again chooses anew.
var ErrCommentChanged = errors.New("commands: the comment changed while it was processed")

// Outcome is what became of one command, as audited.
type Outcome string

// Command outcomes.
const (
	Accepted   Outcome = "accepted"
	Denied     Outcome = "denied"      // the commenter may not run it
	UsageError Outcome = "usage_error" // it was written wrong
	Rejected   Outcome = "rejected"    // it may not run now (a run that does not qualify, a closed PR)
	Errored    Outcome = "error"       // GitHub failed while it was checked
	Ignored    Outcome = "ignored"     // a later command in the comment wins
	NotRun     Outcome = "not_run"     // taken back (edited away, deleted) before it was processed
)

// quietDenial is why a denial got a reaction only, as audited.
const quietDenial = "the commenter's role is below triage (or the account is a bot that is not allow-listed)"

// quietUnknown is why a commenter whose role could not be checked got a
// reaction only, as audited.
const quietUnknown = "the commenter is not known to hold triage or above"

// answersDenial reports whether a denied commenter is told why in a reply:
// only those with triage or above (who take part in the repository's
// work), and, when GitHub could not tell the role, those last known to
// hold triage or above (they are asked to try again). Everyone else gets a
// reaction only: 👎, or 😕 when the role could not be checked.
func answersDenial(v auth.Verdict) bool {
	if v.CheckFailed {
		return v.Known >= auth.RoleTriage
	}
	return v.Role >= auth.RoleTriage
}

// takeReaction decides whether a reaction to a commenter below triage may
// be added (notices.max_outsider_reactions_per_user_per_hour and
// _per_repo_per_hour); past either the audit alone records it.
func takeReaction(tx *state.Tx, d Deps, c Comment) (bool, error) {
	perUser, perRepo := d.MaxOutsiderReactions, d.MaxOutsiderReactionsRepo
	if perUser <= 0 {
		perUser = config.DefaultMaxOutsiderReactionsPerUserPerHour
	}
	if perRepo <= 0 {
		perRepo = config.DefaultMaxOutsiderReactionsPerRepoPerHour
	}
	ok, err := tx.TakeReaction(c.Repo, c.Actor.ID, perUser, perRepo)
	if err != nil || ok {
		return ok, err
	}
	return false, tx.Audit(state.AuditRecord{Kind: "reaction", Outcome: "suppressed", Repo: c.Repo, PR: c.PR, ActorID: c.Actor.ID,
		ActorLogin: c.Actor.Login, CommentID: c.CommentID, CommentURL: c.URL,
		Reason: fmt.Sprintf("reactions to commenters below triage on %s are spent for the hour (%d per user, %d in all); not reacting", c.Repo, perUser, perRepo)})
}

// takeReply decides whether one more reply comment to the commenter may be
// posted (notices.max_replies_per_user_per_hour); past the limit the
// refusal is audited and opsbot only reacts.
func takeReply(tx *state.Tx, d Deps, c Comment) (bool, error) {
	limit := d.MaxReplies
	if limit <= 0 {
		limit = config.DefaultMaxRepliesPerUserPerHour
	}
	ok, err := tx.TakeReply(c.Repo, c.Actor.ID, limit)
	if err != nil || ok {
		return ok, err
	}
	return false, tx.Audit(state.AuditRecord{Kind: "reply", Outcome: "suppressed", Repo: c.Repo, PR: c.PR, ActorID: c.Actor.ID,
		ActorLogin: c.Actor.Login, CommentID: c.CommentID, CommentURL: c.URL,
		Reason: fmt.Sprintf("%s already got %d replies on %s in the last hour; reacting only", c.Actor.Login, limit, c.Repo)})
}

func prepareReuse(ctx context.Context, d Deps, c Comment, s *step) {
	purpose := runs.ForNamedPin
	if s.cmd.RunID == 0 {
		purpose = runs.ForBarePin
	}
	rules := runs.RulesFor(d.Repo, purpose)
	rules.Attempt = s.cmd.Attempt // a named attempt must still be the run's latest
	var run runs.Run
	var err error
	if s.cmd.RunID != 0 {
		run, err = d.Validator.Validate(ctx, rules, c.PR, s.cmd.RunID)
	} else {
		s.bare = true
		run, err = d.Validator.Newest(ctx, rules, c.PR)
	}
	what := fmt.Sprintf("run %d", s.cmd.RunID)
	if s.bare {
		what = "a run"
	}
	if rej, ok := runs.IsRejection(err); ok {
		s.outcome, s.reason = Rejected, rej.Reason
		s.reply = fmt.Sprintf("%s I did not pin %s: %s.", mdtext.Mention(c.Actor.Login), what, rej.Reason)
		return
	}
	if err != nil {
		d.Log.Warn("validating a run failed", "run", s.cmd.RunID, "err", err)
		s.outcome, s.reason = Errored, err.Error()
		s.reply = NoAnswerReply(c.Actor.Login, "pin", what)
		return
	}
	if run.PRState == "closed" {
		s.outcome, s.reason = Rejected, "the PR is closed"
		s.reply = fmt.Sprintf("%s this PR is closed: a pin applies to the next push of an open PR.", mdtext.Mention(c.Actor.Login))
		return
	}
	if c.ExpectHead != "" && !strings.EqualFold(run.PRHead, c.ExpectHead) {
		s.outcome = Rejected
		s.reason = fmt.Sprintf("recovered after the PR's head moved from %s (the head when the comment was posted) to %s",
			mdtext.ShortSHA(c.ExpectHead), mdtext.ShortSHA(run.PRHead))
		s.reply = fmt.Sprintf("%s I did not pin %s: opsbot found this comment late (its webhook was lost), and the PR's head has moved "+
			"since it was posted (from %s to %s), so the push it meant has passed. Post the command again if it still holds.",
			mdtext.Mention(c.Actor.Login), what, mdtext.Code(mdtext.ShortSHA(c.ExpectHead)), mdtext.Code(mdtext.ShortSHA(run.PRHead)))
		return
	}
	s.outcome, s.run = Accepted, run
}

func commitSteps(tx *state.Tx, d Deps, c Comment, steps []step) error {
	var replies []string
	var plus, minus, confused, quiet bool
	links := notices.Links{PR: d.Notices.Web.PR(c.Repo, c.PR), Comment: c.URL}
	var stageWrites []func(tx *state.Tx) error
	for i := range steps {
		s := &steps[i]
		rec := state.AuditRecord{Kind: "command", Command: s.cmd.Name, Outcome: string(s.outcome), Repo: c.Repo, PR: c.PR,
			RunID: s.cmd.RunID, ActorID: c.Actor.ID, ActorLogin: c.Actor.Login, Role: roleName(s.verdict),
			CommentID: c.CommentID, CommentURL: c.URL, Reason: s.reason}
		if s.cmd.Name == Reuse && !s.cmd.Cancel && s.outcome == Accepted {
			rec.RunID, rec.HeadSHA = s.run.ID, s.run.PRHead
			links.Run = s.run.URL
		}
		if err := tx.Audit(rec); err != nil {
			return err
		}
		if s.cmd.Name == Reuse && s.cmd.Cancel && s.outcome == Accepted {
			reply, err := cancelPin(tx, d, c)
			if err != nil {
				return err
			}
			s.reply = reply
		}
		if s.cmd.Name == Reuse && !s.cmd.Cancel && s.outcome == Accepted {
			reply, err := grantPin(tx, d, c, s)
			if err != nil {
				return err
			}
			s.reply = reply
		}
		if s.stageW != nil && s.outcome == Accepted {
			stageWrites = append(stageWrites, s.stageW)
			plus = true
			continue // the stage handler posts its own acknowledgement, which it edits later
		}
		switch {
		case s.outcome == Accepted:
			plus = true
		case s.quiet && s.verdict.CheckFailed:
			confused = true
		case s.outcome == Denied, s.outcome == Rejected, s.outcome == Errored:
			minus = true
		}
		quiet = quiet || s.quiet
		if s.reply != "" {
			replies = append(replies, s.reply)
		}
	}
	if len(replies) > 0 {
		ok, err := takeReply(tx, d, c)
		if err != nil {
			return err
		}
		if !ok {
			replies = nil
			minus = minus || !plus // a reply held back still gets a reaction
		}
	}
	if quiet && !plus && len(replies) == 0 {
		// Only a reaction to someone below triage: it counts under their
		// budgets.
		ok, err := takeReaction(tx, d, c)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
	}
	if confused && !minus {
		if err := d.Notices.React(tx, c.Repo, c.PR, c.Installation, c.CommentID, "confused"); err != nil {
			return err
		}
	}
	if plus {
		if err := d.Notices.React(tx, c.Repo, c.PR, c.Installation, c.CommentID, "+1"); err != nil {
			return err
		}
	}
	if minus {
		if err := d.Notices.React(tx, c.Repo, c.PR, c.Installation, c.CommentID, "-1"); err != nil {
			return err
		}
	}
	if len(replies) > 0 {
		if _, err := d.Notices.Comment(tx, c.Repo, c.PR, c.Installation, notices.KindReply, strings.Join(replies, "\n\n---\n\n"), links); err != nil {
			return err
		}
	}
	for _, w := range stageWrites {
		if err := w(tx); err != nil {
			return err
		}
	}
	return nil
}

func roleName(v auth.Verdict) string {
	if v.Role == auth.RoleUnknown {
		return ""
	}
	return v.Role.String()
}

func grantPin(tx *state.Tx, d Deps, c Comment, s *step) (string, error) {
	p := &state.Pin{Repo: c.Repo, PR: c.PR, RunID: s.run.ID, RunAttempt: s.run.Attempt, RunSHA: s.run.HeadSHA, RunURL: s.run.URL,
		RunConclusion: s.run.Conclusion, Bare: s.bare, PRHeadAtGrant: s.run.PRHead, ActorID: c.Actor.ID, ActorLogin: c.Actor.Login,
		Role: roleName(s.verdict), CommentID: c.CommentID, CommentURL: c.URL, CommentLine: s.cmd.Text}
	old, err := tx.Grant(p, state.PinChange{ActorID: c.Actor.ID, ActorLogin: c.Actor.Login, CommentID: c.CommentID, CommentURL: c.URL})
	if err != nil {
		return "", err
	}
	superseded := ""
	if old != nil {
		superseded = fmt.Sprintf("\n\nIt replaces the pin of run %s by %s, which is now superseded.", runLink(old.RunID, old.RunURL),
			mdtext.Mention(old.ActorLogin))
	}
	return PinnedReply(p) + superseded, nil
}

// PinnedReply answers an accepted pin.
func PinnedReply(p *state.Pin) string {
	how := ""
	if p.Bare {
		how = " (the newest real sweep run of this PR)"
	}
	attempt := ""
	if p.RunAttempt > 0 {
		attempt = fmt.Sprintf(" (attempt %d; a re-run makes this pin invalid)", p.RunAttempt)
	}
	return fmt.Sprintf("📌 %s pinned run %s%s: %s, on commit %s%s. The next push of this PR skips the sweep and reuses "+
		"this run's results; it covers that one push only, and the push after it sweeps again. The head when the pin was taken was "+
		"%s: a push that reached opsbot before this comment sweeps, and the pin waits for the one after it.",
		mdtext.Mention(p.ActorLogin), runLink(p.RunID, p.RunURL), how, mdtext.Code(p.RunConclusion), mdtext.Code(mdtext.ShortSHA(p.RunSHA)),
		attempt, mdtext.Code(mdtext.ShortSHA(p.PRHeadAtGrant)))
}

// runLink links a run's id to its page.
func runLink(id int64, url string) string {
	return mdtext.Link(strconv.FormatInt(id, 10), url)
}

func cancelPin(tx *state.Tx, d Deps, c Comment) (string, error) {
	p, err := tx.ActivePin(c.Repo, c.PR)
	if err != nil {
		return "", err
	}
	if p == nil {
		return fmt.Sprintf("%s there is no active pin on this PR to cancel.", mdtext.Mention(c.Actor.Login)), nil
	}
	if err := revoke(tx, c, p, fmt.Sprintf("cancelled by @%s", c.Actor.Login)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s revoked the pin of run %s by %s; the next push sweeps.", mdtext.Mention(c.Actor.Login), runLink(p.RunID, p.RunURL),
		mdtext.Mention(p.ActorLogin)), nil
}

func revoke(tx *state.Tx, c Comment, p *state.Pin, why string) error {
	return tx.Transition(p, state.PinRevoked, state.PinChange{Reason: why, ActorID: c.Actor.ID, ActorLogin: c.Actor.Login,
		CommentID: c.CommentID, CommentURL: c.URL})
}

// mayTakeBack is whether the account that edited or deleted a comment
// (c.Actor) may take back what the comment started under the policy of
// command name: its author always may, anyone else only with the role the
// command needs. Checked before the write (it may read GitHub).
func mayTakeBack(ctx context.Context, d Deps, c Comment, name string) auth.Verdict {
	if c.Recovered || (c.Author.ID != 0 && c.Author.ID == c.Actor.ID) {
		return auth.Verdict{Allowed: true}
	}
	return d.Checker.Check(ctx, d.Lookup, d.Repo.Name, c.Actor, d.policy(name))
}

// takeBack is what an edit or a deletion may take back: the verdicts on
// its actor for reuse and for staging.
type takeBack struct {
	reuse, stage auth.Verdict
}

func checkTakeBack(ctx context.Context, d Deps, c Comment) takeBack {
	tb := takeBack{reuse: mayTakeBack(ctx, d, c, Reuse)}
	if d.Stage != nil {
		tb.stage = mayTakeBack(ctx, d, c, Stage)
	}
	return tb
}

// Edited handles an edited comment: commands it adds are not run (the
// editor, if allowed to run them, is told so), and a still-active pin whose
// command line the edit removed is revoked, as is a stage request not yet
// dispatched, when the editor is the comment's author or holds the
// command's role.
func Edited(ctx context.Context, d Deps, c Comment, oldBody string) (string, state.Write) {
	opt := Options{Repo: d.Repo.Name, Host: d.WebHost}
	before, after := c.OldCommands, c.Commands
	if !c.Parsed {
		before, after = Parse(oldBody, opt), Parse(c.Body, opt)
	}
	had := map[string]int{}
	for _, cmd := range before {
		had[strings.ToLower(cmd.Text)]++
	}
	var added []Command
	for _, cmd := range after {
		k := strings.ToLower(cmd.Text)
		if had[k] > 0 {
			had[k]--
			continue
		}
		added = append(added, cmd)
	}
	if c.Recovered {
		added = nil // recovery found the edit: what it added is not opsbot's to answer
	}
	var verdict auth.Verdict
	if len(added) > 0 {
		verdict = d.Checker.Check(ctx, d.Lookup, d.Repo.Name, c.Actor, d.policy(Reuse))
	}
	tb := checkTakeBack(ctx, d, c)
	return "edited", func(tx *state.Tx) error {
		p, err := tx.ActivePin(c.Repo, c.PR)
		if err != nil {
			return err
		}
		if p != nil && p.CommentID == c.CommentID && !hasLine(after, p.CommentLine) {
			// Told only when this edit removed the line: later edits of a
			// comment without it say nothing again.
			removed := hasLine(before, p.CommentLine) || !c.Parsed
			how := fmt.Sprintf("its command was edited away by @%s", c.Actor.Login)
			closedWhy := fmt.Sprintf("the command that created it was edited away by %s", mdtext.Mention(c.Actor.Login))
			if c.Recovered {
				how = "recovery found its command edited away (the edit's webhook was lost)"
				closedWhy = "the command that created it was edited away (found by recovery: the edit's webhook was lost)"
			}
			if err := takeBackPin(tx, d, c, p, tb.reuse, how, closedWhy, "edited the command away", removed); err != nil {
				return err
			}
		}
		if r, err := tx.StageRequestByComment(c.Repo, c.CommentID); err != nil {
			return err
		} else if r != nil && r.Pending() && r.CommandLine != "" && !hasLine(after, r.CommandLine) {
			if err := cancelStage(tx, d, c, tb.stage, "its command was edited away"); err != nil {
				return err
			}
		}
		if len(added) == 0 {
			return nil
		}
		if err := tx.Audit(state.AuditRecord{Kind: "edit", Outcome: "not_run", Repo: c.Repo, PR: c.PR, ActorID: c.Actor.ID,
			ActorLogin: c.Actor.Login, CommentID: c.CommentID, CommentURL: c.URL,
			Reason: fmt.Sprintf("%d command(s) added by an edit were not run", len(added))}); err != nil {
			return err
		}
		if !verdict.Allowed {
			return nil // no one can make opsbot talk by typing
		}
		if ok, err := takeReply(tx, d, c); err != nil || !ok {
			return err
		}
		_, err = d.Notices.Comment(tx, c.Repo, c.PR, c.Installation, notices.KindEdited, EditedReply(c.Actor.Login, added),
			notices.Links{PR: d.Notices.Web.PR(c.Repo, c.PR), Comment: c.URL})
		return err
	}
}

// takeBackPin revokes pin p, whose comment c's actor edited or deleted, when
// the actor may (v); otherwise it keeps the pin, audits why and, when tell,
// says so on the PR. A role GitHub could not tell revokes: the next push
// then sweeps, which is never wrong.
func takeBackPin(tx *state.Tx, d Deps, c Comment, p *state.Pin, v auth.Verdict, how, closedWhy, did string, tell bool) error {
	if v.Allowed || v.CheckFailed || p.ActorID == c.Actor.ID {
		if v.CheckFailed && p.ActorID != c.Actor.ID {
			how += " (whose role could not be checked: revoked, so the next push sweeps)"
		}
		if err := revoke(tx, c, p, how); err != nil {
			return err
		}
		return d.Notices.PinClosed(tx, p, c.Installation, closedWhy)
	}
	need := d.policy(Reuse).Describe()
	if err := tx.Audit(state.AuditRecord{Kind: "pin", Outcome: "kept", Repo: c.Repo, PR: c.PR, RunID: p.RunID, PinID: p.ID,
		ActorID: c.Actor.ID, ActorLogin: c.Actor.Login, Role: roleName(v), CommentID: c.CommentID, CommentURL: c.URL,
		Reason: fmt.Sprintf("@%s %s of @%s's pin, but revoking another's pin needs %s: the pin stays", c.Actor.Login, did,
			p.ActorLogin, need)}); err != nil {
		return err
	}
	if !tell {
		return nil
	}
	if ok, err := takeReply(tx, d, c); err != nil || !ok {
		return err
	}
	_, err := d.Notices.Comment(tx, c.Repo, c.PR, c.Installation, notices.KindReply,
		fmt.Sprintf("%s %s of %s's pin of run %s, but revoking someone else's pin needs %s, so the pin stays: the next push "+
			"of this PR still reuses that run. Someone allowed to can revoke it with `/reuse-sweep-run cancel`.",
			mdtext.Mention(c.Actor.Login), did, mdtext.Mention(p.ActorLogin), runLink(p.RunID, p.RunURL), need),
		notices.Links{PR: d.Notices.Web.PR(c.Repo, c.PR), Comment: p.CommentURL, Run: p.RunURL})
	return err
}

// cancelStage cancels the stage request comment c made, when it is still
// pending and its dispatch has not been sent (not even tried): the staging
// side never hears of it. A request already dispatched stays as it is,
// audited. The actor must be the requester or hold the stage role (v).
func cancelStage(tx *state.Tx, d Deps, c Comment, v auth.Verdict, why string) error {
	r, err := tx.StageRequestByComment(c.Repo, c.CommentID)
	if err != nil || r == nil || !r.Pending() {
		return err
	}
	rec := state.AuditRecord{Kind: "stage", Repo: r.Repo, PR: r.PR, RunID: r.RunID, ActorID: c.Actor.ID, ActorLogin: c.Actor.Login,
		CommentID: r.CommentID, CommentURL: r.CommentURL}
	if !v.Allowed && !v.CheckFailed && r.RequesterID != c.Actor.ID {
		rec.Outcome = "kept"
		rec.Reason = fmt.Sprintf("%s by @%s, who may not cancel @%s's stage request (it needs %s)", why, c.Actor.Login, r.Requester,
			d.policy(Stage).Describe())
		return tx.Audit(rec)
	}
	cancelled := false
	if r.DispatchNotice != 0 {
		if cancelled, err = tx.Withdraw(r.DispatchNotice); err != nil {
			return err
		}
	}
	if !cancelled {
		rec.Outcome = "not_cancelled"
		rec.Reason = fmt.Sprintf("%s by @%s after its dispatch was sent: the staging side has it, and its report is still taken", why, c.Actor.Login)
		return tx.Audit(rec)
	}
	r.State = state.StageCancelled
	if err := tx.PutStageRequest(r); err != nil {
		return err
	}
	rec.Outcome = state.StageCancelled
	rec.Reason = fmt.Sprintf("%s by @%s before its dispatch was sent: the staging side was never asked", why, c.Actor.Login)
	if err := tx.Audit(rec); err != nil {
		return err
	}
	return d.Notices.Edit(tx, r.Repo, r.PR, r.Installation, r.AckNotice, notices.KindStage,
		fmt.Sprintf("%s staging run %s was cancelled before the staging side was asked: %s by %s.", mdtext.Mention(r.Requester),
			runLink(r.RunID, d.Notices.Web.Run(r.Repo, r.RunID)), why, mdtext.Mention(c.Actor.Login)),
		notices.Links{PR: d.Notices.Web.PR(r.Repo, r.PR), Comment: r.CommentURL})
}

func hasLine(cmds []Command, text string) bool {
	for _, cmd := range cmds {
		if cmd.Error == "" && strings.EqualFold(cmd.Text, text) {
			return true
		}
	}
	return false
}

// Deleted revokes the active pin a deleted comment created, and cancels the
// stage request it made if its dispatch has not been sent, when the one who
// deleted it is its author or holds the command's role.
func Deleted(ctx context.Context, d Deps, c Comment) (string, state.Write) {
	tb := checkTakeBack(ctx, d, c)
	return "deleted", func(tx *state.Tx) error {
		p, err := tx.ActivePin(c.Repo, c.PR)
		if err != nil {
			return err
		}
		if p != nil && p.CommentID == c.CommentID {
			how, closedWhy := fmt.Sprintf("its comment was deleted by @%s", c.Actor.Login), "the comment that created it was deleted"
			if c.Recovered {
				how = "recovery found its comment deleted (the deletion's webhook was lost)"
				closedWhy += " (found by recovery: the deletion's webhook was lost)"
			}
			if err := takeBackPin(tx, d, c, p, tb.reuse, how, closedWhy, "deleted the comment", true); err != nil {
				return err
			}
		}
		return cancelStage(tx, d, c, tb.stage, "its comment was deleted")
	}
}

func helpInfo(rc *config.Repo, staging bool) HelpInfo {
	return HelpInfo{Repo: rc.Name, SweepWorkflow: rc.SweepWorkflow, ResultArtifacts: rc.ResultArtifacts,
		ReuseRole: rc.Reuse.MinRole, StageRole: rc.Stage.MinRole, HelpRole: rc.Help.MinRole,
		ReuseUsers: rc.Reuse.AllowUsers, ReuseTeams: rc.Reuse.AllowTeams, StageUsers: rc.Stage.AllowUsers, StageTeams: rc.Stage.AllowTeams,
		AllowPartialPinned: rc.Reuse.AllowPartialPinned, AllowedPaths: rc.Reuse.AllowedPaths, ProtectedPaths: rc.ProtectedPaths, GateActions: rc.GateActions,
		StageConfigured: staging}
}
