package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// OriginKind is what a command came from.
type OriginKind = record.OriginKind

// Origin is where a command came from: today a PR comment; a check run's
// requested action or a Slack click are other kinds.
type Origin = record.Origin

// OriginComment is a PR conversation comment; its ID is the comment's.
const OriginComment = record.OriginComment

// Invocation is who asked for a command, where, and from what origin,
// whatever the origin's kind.
type Invocation struct {
	Repo         string
	PR           int
	PRState      string // open, closed
	Installation int64
	Actor        auth.Actor
	Origin       Origin
	// ExpectHead, for a command recovery found, is the PR's head when it
	// was asked: it acts only while that is still the head.
	ExpectHead string
}

// Comment is a PR conversation comment as a webhook told it: the
// invocation of each of its command lines.
type Comment struct {
	Invocation
	// Commands are the comment's commands as ingest parsed them; for an
	// edit OldCommands are those of the body before it.
	Commands    []Command
	OldCommands []Command
	// Author is who wrote the comment; for an edit or a deletion Actor is
	// who made it, who may be someone else.
	Author auth.Actor
	// Mark is what opsbot had seen of the comment when its commands were
	// chosen (an edit or a deletion before its `created` delivery): the
	// write runs them only if that is still so.
	Mark record.CommentMark
	// Withdrawn are commands the comment held when posted that it no longer
	// holds (edited away, or the comment deleted, before its `created`
	// delivery was processed): audited as not run, for WithdrawnWhy.
	Withdrawn    []Command
	WithdrawnWhy string
	// Recovered marks a deletion or an edit recovery found for a lost
	// webhook (Actor unknown): it takes back what the comment started.
	Recovered bool
}

// Write is what a command changes, in the delivery's transaction. It may
// run more than once (a retried commit) and must act only through tx.
type Write func(tx record.Tx) error

// Env is what running a command reads through: the repository's
// configuration, the registry, role checks and the notices' builder.
type Env struct {
	Repo     *config.Repo
	Commands *Registry
	Checker  *auth.Checker
	Lookup   auth.Lookup
	Notices  *notices.Notifier
	// State is opsbot's state as handlers read it before they plan.
	State   record.Reader
	Log     *slog.Logger
	WebHost string // host of run URLs in commands; default github.com
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

// Options are the parse options of the repository.
func (e Env) Options() Options { return Options{Repo: e.Repo.Name, Host: e.WebHost} }

// Policy is the access rule of spec on the repository, its allow_users
// matched by account id.
func (e Env) Policy(s *Spec) auth.Policy {
	a := s.Access(e.Repo)
	role, err := auth.ParseRole(a.MinRole) // checked at config load; one that slips through allows nobody
	p := auth.Policy{MinRole: role, Users: a.AllowUsers, Teams: a.AllowTeams, AllowBots: e.Repo.AllowBots,
		UserIDs: e.Users.IDs(a.AllowUsers)}
	if err != nil {
		p.Unreadable = fmt.Sprintf("min_role %q is not a role", a.MinRole)
	}
	return p
}

// Check is whether actor may run spec here (it may read GitHub).
func (e Env) Check(ctx context.Context, actor auth.Actor, s *Spec) auth.Verdict {
	return e.Checker.Check(ctx, e.Lookup, e.Repo.Name, actor, e.Policy(s))
}

// MayTakeBack is whether the account that edited or deleted a comment
// (ch.Actor) may take back what the comment started under spec's rule:
// its author always may, anyone else only with the role the command needs.
// Checked before the write (it may read GitHub).
func (e Env) MayTakeBack(ctx context.Context, ch Change, s *Spec) auth.Verdict {
	if ch.Recovered || (ch.Author.ID != 0 && ch.Author.ID == ch.Actor.ID) {
		return auth.Verdict{Allowed: true}
	}
	return e.Check(ctx, ch.Actor, s)
}

// Line is one command line of an invocation, with its command's spec and
// the verdict on its actor.
type Line struct {
	Command
	Spec    *Spec
	Verdict auth.Verdict
}

// Result is what a command line comes to, as its handler prepared it.
type Result struct {
	Outcome Outcome
	Reason  string // audited
	// Reply is the part of the comment's one reply about this line ("" for
	// none).
	Reply string
	// RunID and HeadSHA, when set, are audited instead of the line's run
	// (the run a bare command resolved to, the head it was checked at);
	// RunURL is linked from the reply's Slack mirror.
	RunID   int64
	HeadSHA string
	RunURL  string
	// Plan, when the outcome is accepted, is the line's change, applied in
	// the comment's transaction after the line's audit record.
	Plan plan.Plan
	// Err is a read that failed while the line was prepared: the delivery
	// is processed again later, nothing written.
	Err error
	// Acknowledges says Plan posts the line's own acknowledgement (which
	// it edits later): it is applied after the comment's reply, and the
	// line has no part in the reply.
	Acknowledges bool
}

// Change is an edit or a deletion of a comment that may have started
// something; for a deletion Commands is empty.
type Change struct {
	Comment
	Deleted bool
	// Spec is the command whose handler is asked.
	Spec *Spec
}

// step is what one command line comes to.
type step struct {
	cmd     Command
	spec    *Spec
	verdict auth.Verdict
	quiet   bool // a denial to someone below triage: a reaction at most
	Result
}

// Created runs the commands of a new comment: the write of its plan
// (PlanCreated), committed with the delivery.
func Created(ctx context.Context, env Env, c Comment) (string, Write) {
	out, p, err := PlanCreated(ctx, env, c)
	switch {
	case err != nil:
		return out, refuse(err)
	case p.Empty():
		return out, nil
	}
	return out, env.write(p)
}

// PlanCreated does the reads a new comment's commands need (roles, runs,
// opsbot's state through each handler) and returns what they write as one
// plan: the comment must still be as opsbot saw it when they were chosen
// (an edit or a deletion noted since makes the plan stale, and they are
// chosen again from what the comment says now) and run only once (a
// redelivered or replayed comment writes nothing); then the audit of what
// was taken back before it ran, each line's audit record and plan, the one
// answer, and the plans of lines that post their own acknowledgement. A
// read that failed while a line was prepared makes the plan fail after
// Once (the delivery is tried again); an error is a dispatcher without
// its state reader.
func PlanCreated(ctx context.Context, env Env, c Comment) (string, plan.Plan, error) {
	cmds := c.Commands
	if len(cmds) == 0 && len(c.Withdrawn) == 0 {
		return "no-commands", plan.Plan{}, nil
	}
	if env.State == nil {
		return "commands", plan.Plan{}, errNoState
	}
	// For a command whose last line wins, the earlier ones (of its group)
	// are ignored.
	last := map[string]int{}
	for i, cmd := range cmds {
		if cmd.Error == "" {
			last[env.Commands.group(cmd.Name)] = i
		}
	}
	steps := make([]step, len(cmds))
	for i, cmd := range cmds {
		s := &steps[i]
		s.cmd = cmd
		spec, ok := env.Commands.Spec(cmd.Name)
		if !ok {
			// A command stored by a build that knew it, this one does not.
			s.Outcome, s.Reason = Ignored, fmt.Sprintf("opsbot no longer has the command %s", cmd.Name)
			continue
		}
		s.spec = spec
		s.verdict = env.Check(ctx, c.Actor, spec)
		switch {
		case cmd.Error != "":
			s.Outcome, s.Reason = UsageError, cmd.Reason
			if s.verdict.Allowed {
				s.Reply = UsageReply(env.Commands, c.Actor.Login, cmd)
			}
		case !s.verdict.Allowed:
			s.Outcome, s.Reason = Denied, s.verdict.Reason
			if s.verdict.CheckFailed {
				s.Outcome = Errored
				env.Log.Warn("permission check failed", "login", c.Actor.Login, "err", s.verdict.Err)
			}
			if !answersDenial(s.verdict) {
				// Outsiders cannot make opsbot talk: a reaction, no reply, no Slack.
				s.quiet = true
				if s.verdict.CheckFailed {
					why := auth.NoAnswer
					if errors.Is(s.verdict.Err, ghclient.ErrNoCredentials) {
						why = "opsbot has no GitHub credentials: GitHub was asked nothing"
					}
					s.Reason = "permission could not be checked (" + why + "); not answered: " + quietUnknown
					break
				}
				s.Reason += "; not answered: " + quietDenial
				break
			}
			s.Reply = fmt.Sprintf("%s I did not run %s: %s.", mdtext.Mention(c.Actor.Login), Code(cmd.Text), s.verdict.Reason)
		case spec.LastWins && i != last[env.Commands.group(cmd.Name)]:
			later := spec.Verbs[0].Word
			if ls, ok := env.Commands.Spec(cmds[last[env.Commands.group(cmd.Name)]].Name); ok {
				later = ls.Verbs[0].Word
			}
			s.Outcome, s.Reason = Ignored, fmt.Sprintf("a later %s in this comment wins", later)
			s.Reply = fmt.Sprintf("%s (line %d) was not run: the last %s in a comment wins.", Code(cmd.Text), cmd.Line,
				mdtext.Code(later))
			if later != spec.Verbs[0].Word {
				s.Reply = fmt.Sprintf("%s (line %d) was not run: %s later in this comment wins (each pins a run, and a PR has one pin).",
					Code(cmd.Text), cmd.Line, mdtext.Code(later))
			}
		default:
			s.Result = oneLive(env, c.Invocation, spec, spec.Handler.Prepare(ctx, env, c.Invocation, Line{Command: cmd, Spec: spec, Verdict: s.verdict}))
		}
	}
	outcome := "commands"
	if len(cmds) == 0 {
		outcome = "withdrawn"
	}
	id := c.Origin.ID
	p := plan.Plan{Require: []plan.Fact{plan.CommentMark{Repo: env.Repo.Name, CommentID: id, Mark: c.Mark}},
		Steps: []plan.Step{plan.Once{Repo: env.Repo.Name, CommentID: id}}}
	for i := range steps {
		if steps[i].Err != nil {
			// After Once: a comment processed before completes as ever.
			p.Steps = append(p.Steps, plan.Fail{Err: steps[i].Err})
			return outcome, p, nil
		}
	}
	for _, cmd := range c.Withdrawn {
		p.Steps = append(p.Steps, plan.Audit{Record: AuditOf(c.Invocation, record.AuditRecord{Kind: record.AuditCommand, Command: cmd.Name,
			Outcome: string(NotRun), RunID: cmd.RunID, Reason: c.WithdrawnWhy})})
	}
	return outcome, answerSteps(p, env, c, steps), nil
}

// write is a plan as the delivery's transaction writes it.
func (e Env) write(p plan.Plan) Write {
	t := e.Notices.Teller()
	return func(tx record.Tx) error { return plan.Apply(tx, t, p) }
}

// errNoState is a dispatcher wired without a state reader: handlers could
// not plan, so nothing is written and the delivery is retried.
var errNoState = errors.New("commands: the environment has no state reader (Env.State)")

func refuse(err error) Write { return func(record.Tx) error { return err } }

// AuditOf fills a record with who asked, where and from what origin.
func AuditOf(in Invocation, r record.AuditRecord) record.AuditRecord {
	r.Repo, r.PR = in.Repo, in.PR
	r.ActorID, r.ActorLogin = in.Actor.ID, in.Actor.Login
	r.SetOrigin(in.Origin)
	return r
}

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

// outsiderBudget is the reaction budget of commenters below triage
// (notices.max_outsider_reactions_per_user_per_hour and
// _per_repo_per_hour); past either the audit alone records a reaction.
func outsiderBudget(env Env, in Invocation) plan.ReactionBudget {
	perUser, perRepo := env.MaxOutsiderReactions, env.MaxOutsiderReactionsRepo
	if perUser <= 0 {
		perUser = config.DefaultMaxOutsiderReactionsPerUserPerHour
	}
	if perRepo <= 0 {
		perRepo = config.DefaultMaxOutsiderReactionsPerRepoPerHour
	}
	return plan.ReactionBudget{PerUser: perUser, PerRepo: perRepo,
		Suppressed: AuditOf(in, record.AuditRecord{Kind: record.AuditReaction, Outcome: string(record.Suppressed),
			Reason: fmt.Sprintf("reactions to commenters below triage on %s are spent for the hour (%d per user, %d in all); not reacting", in.Repo, perUser, perRepo)})}
}

// replyBudget is the invocation's actor's hourly reply limit and the audit
// record of a reply held back past it.
func replyBudget(env Env, in Invocation) (int, record.AuditRecord) {
	limit := env.MaxReplies
	if limit <= 0 {
		limit = config.DefaultMaxRepliesPerUserPerHour
	}
	return limit, AuditOf(in, record.AuditRecord{Kind: record.AuditReply, Outcome: string(record.Suppressed),
		Reason: fmt.Sprintf("%s already got %d replies on %s in the last hour; reacting only", in.Actor.Login, limit, in.Repo)})
}

// Reply is a plan's reply comment to the invocation's actor within their
// hourly budget (notices.max_replies_per_user_per_hour); past it the
// refusal is audited instead, as TakeReply does.
func Reply(env Env, in Invocation, kind notices.Kind, body string, links notices.Links) plan.Reply {
	limit, held := replyBudget(env, in)
	return plan.Reply{ActorID: in.Actor.ID, Limit: limit, Held: held,
		Comment: plan.Comment{Repo: in.Repo, PR: in.PR, Installation: in.Installation, Kind: string(kind), Body: body, Links: plan.Links(links)}}
}

// answerSteps adds to p each line's audit record and plan, the comment's
// one answer (its reply and reactions, within their budgets), then the
// plans of lines that post their own acknowledgement (which they edit
// later), after the reply.
func answerSteps(p plan.Plan, env Env, c Comment, steps []step) plan.Plan {
	var replies []string
	a := plan.Answer{Repo: c.Repo, PR: c.PR, Installation: c.Installation, CommentID: c.Origin.ID, ActorID: c.Actor.ID,
		Outsider: outsiderBudget(env, c.Invocation)}
	a.ReplyLimit, a.Held = replyBudget(env, c.Invocation)
	links := notices.Links{PR: env.Notices.Web.PR(c.Repo, c.PR), Comment: c.Origin.URL}
	var acks []plan.Step
	for i := range steps {
		s := &steps[i]
		rec := AuditOf(c.Invocation, record.AuditRecord{Kind: record.AuditCommand, Command: s.cmd.Name, Outcome: string(s.Outcome),
			RunID: s.cmd.RunID, Role: RoleName(s.verdict), Reason: s.Reason})
		if s.Outcome == Accepted && s.RunID != 0 {
			rec.RunID, rec.HeadSHA = s.RunID, s.HeadSHA
		}
		if s.Outcome == Accepted && s.RunURL != "" {
			links.Run = s.RunURL
		}
		p.Steps = append(p.Steps, plan.Audit{Record: rec})
		if s.Outcome == Accepted {
			if s.Acknowledges {
				acks = append(acks, s.Plan)
				a.Plus = true
				continue // the handler posts its own acknowledgement, which it edits later
			}
			if !s.Plan.Empty() {
				p.Steps = append(p.Steps, s.Plan)
			}
		}
		switch {
		case s.Outcome == Accepted:
			a.Plus = true
		case s.quiet && s.verdict.CheckFailed:
			a.Confused = true
		case s.Outcome == Denied, s.Outcome == Rejected, s.Outcome == Errored:
			a.Minus = true
		}
		a.Quiet = a.Quiet || s.quiet
		if s.Reply != "" {
			replies = append(replies, s.Reply)
		}
	}
	if len(replies) > 0 {
		a.Reply = &plan.Comment{Repo: c.Repo, PR: c.PR, Installation: c.Installation, Kind: string(notices.KindReply),
			Body: strings.Join(replies, "\n\n---\n\n"), Links: plan.Links(links)}
	}
	p.Steps = append(p.Steps, a)
	return plan.Plan{Require: p.Require, Steps: append(p.Steps, acks...)}
}

// RoleName is the verdict's role as audited ("" when unknown).
func RoleName(v auth.Verdict) string {
	if v.Role == auth.RoleUnknown {
		return ""
	}
	return v.Role.String()
}

// HasLine reports whether cmds hold a well-formed line text (in any case).
func HasLine(cmds []Command, text string) bool {
	for _, cmd := range cmds {
		if cmd.Error == "" && strings.EqualFold(cmd.Text, text) {
			return true
		}
	}
	return false
}

// Edited handles an edited comment: what it took back (a pin whose line it
// removed, a stage request not yet dispatched) is taken back by each
// command's handler, and commands it adds are not run (the editor, if
// allowed to run them, is told so).
func Edited(ctx context.Context, env Env, c Comment) (string, Write) {
	if env.State == nil {
		return "edited", refuse(errNoState)
	}
	before, after := c.OldCommands, c.Commands
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
	// The editor is told only when they pass the rule of every command that
	// answers edits (AnswersEdits: /reuse-sweep-run's), as opsbot always
	// has: no one below it can make opsbot talk by editing a comment.
	told := len(added) > 0
	answering := 0
	for _, s := range env.Commands.Specs() {
		if !s.AnswersEdits || !told {
			continue
		}
		answering++
		told = env.Check(ctx, c.Actor, s).Allowed
	}
	told = told && answering > 0
	p, err := takeBacks(ctx, env, Change{Comment: c})
	if err != nil {
		return "edited", refuse(err)
	}
	if len(added) > 0 {
		p.Steps = append(p.Steps, plan.Audit{Record: AuditOf(c.Invocation, record.AuditRecord{Kind: record.AuditEdit, Outcome: string(NotRun),
			Reason: fmt.Sprintf("%d command(s) added by an edit were not run", len(added))})})
		if told {
			p.Steps = append(p.Steps, Reply(env, c.Invocation, notices.KindEdited, EditedReply(c.Actor.Login, added),
				notices.Links{PR: env.Notices.Web.PR(c.Repo, c.PR), Comment: c.Origin.URL}))
		}
	}
	return "edited", env.write(p)
}

// Deleted takes back what a deleted comment started (each command's
// handler decides what and whether the one who deleted it may).
func Deleted(ctx context.Context, env Env, c Comment) (string, Write) {
	if env.State == nil {
		return "deleted", refuse(errNoState)
	}
	c.Commands, c.OldCommands = nil, c.Commands
	p, err := takeBacks(ctx, env, Change{Comment: c, Deleted: true})
	if err != nil {
		return "deleted", refuse(err)
	}
	return "deleted", env.write(p)
}

// Undecided is a take-back a command cannot decide now (GitHub could not
// tell the role of whoever took it back): alone, the delivery is tried
// again; beside another command's take-back that changes something (a
// pin revoked), that one is written at once, fail closed, and Fallback
// stands in for this one.
type Undecided struct {
	Err      error
	Fallback plan.Plan
}

func (u *Undecided) Error() string { return u.Err.Error() }
func (u *Undecided) Unwrap() error { return u.Err }

// takeBacks asks each command that can take its effects back, in order,
// for its plan: one plan holding each.
func takeBacks(ctx context.Context, env Env, ch Change) (plan.Plan, error) {
	var out plan.Plan
	var undecided []*Undecided
	changes := false
	for _, s := range env.Commands.Specs() {
		if tb, ok := s.Handler.(TakeBacker); ok {
			ch.Spec = s
			p, err := tb.TakeBack(ctx, env, ch)
			var u *Undecided
			if errors.As(err, &u) {
				undecided = append(undecided, u)
				continue
			}
			if err != nil {
				return plan.Plan{}, fmt.Errorf("%s: %w", s.Name, err)
			}
			if !p.Empty() {
				out.Steps = append(out.Steps, p)
				changes = changes || hasSteps(p)
			}
		}
	}
	if len(undecided) > 0 {
		if !changes {
			return plan.Plan{}, undecided[0]
		}
		for _, u := range undecided {
			out.Steps = append(out.Steps, u.Fallback)
		}
	}
	return out, nil
}

// hasSteps reports whether p changes anything (facts alone do not).
func hasSteps(p plan.Plan) bool {
	for _, s := range p.Steps {
		if inner, ok := s.(plan.Plan); !ok || hasSteps(inner) {
			return true
		}
	}
	return false
}

// PlanClick runs one command a click asked for (an origin that is not a
// comment: a Slack button): the same role check, handler, audit and plan
// as a comment's line. The clicker is told through answer (shown only to
// them); an accepted command's reply is also posted on the PR, so its
// conversation shows what was done and by whom. via says where the click
// came from, for the audit. An error is a read that failed: the click is
// tried again.
func PlanClick(ctx context.Context, env Env, in Invocation, cmd Command, via string, answer func(text string, done bool) plan.Step) (string, plan.Plan, error) {
	spec, ok := env.Commands.Spec(cmd.Name)
	if !ok {
		return "click-unknown", plan.Plan{Steps: []plan.Step{answer("Nothing was done: opsbot no longer has this command.", false)}}, nil
	}
	v := env.Check(ctx, in.Actor, spec)
	rec := AuditOf(in, record.AuditRecord{Kind: record.AuditCommand, Command: cmd.Name, RunID: cmd.RunID, Role: RoleName(v)})
	if !v.Allowed {
		rec.Outcome, rec.Reason = string(Denied), via+": "+v.Reason
		if v.CheckFailed {
			rec.Outcome = string(Errored)
		}
		return "click-" + rec.Outcome, plan.Plan{Steps: []plan.Step{plan.Audit{Record: rec},
			answer(fmt.Sprintf("Nothing was done: %s (as @%s on GitHub).", v.Reason, in.Actor.Login), false)}}, nil
	}
	res := oneLive(env, in, spec, spec.Handler.Prepare(ctx, env, in, Line{Command: cmd, Spec: spec, Verdict: v}))
	if res.Err != nil {
		return "", plan.Plan{}, res.Err
	}
	rec.Outcome, rec.Reason = string(res.Outcome), via+": "+res.Reason
	if res.Outcome == Accepted && res.RunID != 0 {
		rec.RunID, rec.HeadSHA = res.RunID, res.HeadSHA
	}
	p := plan.Plan{Steps: []plan.Step{plan.Audit{Record: rec}}}
	if res.Outcome != Accepted {
		told := res.Reply
		if told == "" {
			told = "Nothing was done: " + res.Reason
		}
		p.Steps = append(p.Steps, answer(told, false))
		return "click-" + string(res.Outcome), p, nil
	}
	p.Require = res.Plan.Require
	p.Steps = append(p.Steps, plan.Plan{Steps: res.Plan.Steps})
	if res.Reply != "" {
		links := notices.Links{PR: env.Notices.Web.PR(in.Repo, in.PR), Run: res.RunURL}
		p.Steps = append(p.Steps, Reply(env, in, notices.KindReply, res.Reply+"\n\n("+via+")", links), answer(res.Reply, true))
	}
	return "click-accepted", p, nil
}

// OriginSeen is the step that notes, on a sequence a comment started, that
// a deletion of the comment (or an edit that took its command away) was
// processed and kept it going (record.Sequence.OriginSeen): recovery then
// does not take it back in the webhook's place.
func OriginSeen(cur *record.Sequence, deleted bool) plan.Step {
	next := *cur
	next.OriginSeen = "edited"
	if deleted {
		next.OriginSeen = "deleted"
	}
	return plan.PutSequence{Seq: next, Read: cur.Version}
}
