// Package reuse is /reuse-sweep-run (and /use): a maintainer pins a run
// for the next push of a PR, whose sweep the gate then skips, or cancels
// the PR's pin. A pin is checked when given (here) and when used (gate),
// and taken back when its comment is deleted or its line edited away.
package reuse

import (
	"context"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Name is the command's canonical name.
const Name = "reuse-sweep-run"

// Usage texts, one per verb.
const (
	Usage    = "usage: /reuse-sweep-run <run-id or run URL> | /reuse-sweep-run | /reuse-sweep-run cancel"
	UsageUse = "usage: /use <run-id or run URL>"
)

// Validator checks runs for a PR (runs.Validator).
type Validator interface {
	Validate(ctx context.Context, r runs.Rules, pr int, runID int64) (runs.Run, error)
	Newest(ctx context.Context, r runs.Rules, pr int) (runs.Run, error)
}

// Handler pins runs.
type Handler struct {
	// Validators gives an installation's run validator.
	Validators func(installation int64) (Validator, error)
}

// Spec is the command, run by h.
func Spec(h *Handler) commands.Spec {
	return commands.Spec{
		Name: Name,
		Verbs: []commands.Verb{
			{Word: "/reuse-sweep-run", Usage: Usage, Args: commands.RunOrCancel, UsageNote: commands.RunNote},
			{Word: "/use", Usage: UsageUse, Args: useArgs, UsageNote: commands.RunNote},
		},
		Access:   func(rc *config.Repo) config.Access { return rc.Reuse.Access },
		LastWins: true,
		Group:    "pin", // /merge-with-reuse grants the PR's one pin too
		// Editors allowed to pin are told that added commands are not run.
		AnswersEdits: true,
		Help:         help,
		Handler:      h,
		Buttons:      Buttons,
	}
}

// Buttons are /reuse-sweep-run's: Reuse for next push (on a finished
// sweep's check run and in Slack) and Cancel pin (in Slack).
var Buttons = []commands.Button{
	{ID: "reuse", Label: "Reuse for next push", Description: "Pin this run for the next push",
		Slack: func(run int64) string { return fmt.Sprintf("Reuse run %d for next push", run) }, SlackStyle: "primary",
		Command: func(run int64) commands.Command {
			return commands.Command{Name: Name, Verb: "/reuse-sweep-run", RunID: run, Text: fmt.Sprintf("/reuse-sweep-run %d", run)}
		}},
	{ID: "cancel", Slack: func(int64) string { return "Cancel pin" }, NoRun: true,
		Command: func(int64) commands.Command {
			return commands.Command{Name: Name, Verb: "/reuse-sweep-run", Cancel: true, Text: "/reuse-sweep-run cancel"}
		}},
}

// Module is /reuse-sweep-run, from what every command shares.
func Module(d commands.Deps) commands.Module {
	return (&Handler{Validators: func(inst int64) (Validator, error) { return d.Validators(inst) }}).Module()
}

// Module is the command run by h.
func (h *Handler) Module() commands.Module { return commands.Module{Spec: Spec(h)} }

func useArgs(c *commands.Command, args []string, opt commands.Options) string {
	switch len(args) {
	case 0:
		return "/use needs a run id or a run URL"
	case 1:
		var reason string
		c.RunID, c.Attempt, reason = commands.RunArgument(args[0], opt)
		return reason
	}
	return fmt.Sprintf("%s takes one argument, got %d", c.Verb, len(args))
}

// Prepare checks a pin's run (or finds the newest for a bare command);
// the write grants the pin, or cancels the PR's.
func (h *Handler) Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	if in.PRState == "closed" {
		return closed(in)
	}
	if line.Cancel {
		return cancelPin(env, in)
	}
	bare := line.RunID == 0
	purpose := runs.ForNamedPin
	what := fmt.Sprintf("run %d", line.RunID)
	if bare {
		purpose, what = runs.ForBarePin, "a run"
	}
	rules := runs.RulesFor(env.Repo, purpose)
	rules.Attempt = line.Attempt // a named attempt must still be the run's latest
	var run runs.Run
	val, err := h.validator(in.Installation)
	if err == nil {
		if bare {
			run, err = val.Newest(ctx, rules, in.PR)
		} else {
			run, err = val.Validate(ctx, rules, in.PR, line.RunID)
		}
	}
	if rej, ok := runs.IsRejection(err); ok {
		return commands.Result{Outcome: commands.Rejected, Reason: rej.Reason,
			Reply: fmt.Sprintf("%s I did not pin %s: %s.", mdtext.Mention(in.Actor.Login), what, rej.Reason)}
	}
	if err != nil {
		env.Log.Warn("validating a run failed", "run", line.RunID, "err", err)
		return commands.Result{Outcome: commands.Errored, Reason: err.Error(), Reply: commands.NoAnswerReply(in.Actor.Login, "pin", what)}
	}
	if run.PRState == "closed" {
		return closed(in)
	}
	if in.ExpectHead != "" && !strings.EqualFold(run.PRHead, in.ExpectHead) {
		return commands.Result{Outcome: commands.Rejected,
			Reason: fmt.Sprintf("recovered after the PR's head moved from %s (the head when the comment was posted) to %s",
				mdtext.ShortSHA(in.ExpectHead), mdtext.ShortSHA(run.PRHead)),
			Reply: fmt.Sprintf("%s I did not pin %s: opsbot found this comment late (its webhook was lost), and the PR's head has moved "+
				"since it was posted (from %s to %s), so the push it meant has passed. Post the command again if it still holds.",
				mdtext.Mention(in.Actor.Login), what, mdtext.Code(mdtext.ShortSHA(in.ExpectHead)), mdtext.Code(mdtext.ShortSHA(run.PRHead)))}
	}
	p := record.Pin{Repo: in.Repo, PR: in.PR, RunID: run.ID, RunAttempt: run.Attempt, RunSHA: run.HeadSHA, RunURL: run.URL,
		RunConclusion: run.Conclusion, Bare: bare, PRHeadAtGrant: run.PRHead, ActorID: in.Actor.ID, ActorLogin: in.Actor.Login,
		Role: commands.RoleName(line.Verdict), CommentLine: line.Text, Coverage: run.Coverage}
	p.SetOrigin(in.Origin)
	old, err := env.State.ActivePin(in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: fmt.Errorf("reading %s#%d's active pin: %w", in.Repo, in.PR, err)}
	}
	ch := record.PinChange{ActorID: in.Actor.ID, ActorLogin: in.Actor.Login}
	ch.SetOrigin(in.Origin)
	return commands.Result{Outcome: commands.Accepted, RunID: run.ID, HeadSHA: run.PRHead, RunURL: run.URL,
		Reply: GrantedReply(&p, old),
		Plan:  plan.Plan{Require: []plan.Fact{activeIs(in, old)}, Steps: []plan.Step{plan.GrantPin{Pin: p, Change: ch}}}}
}

// activeIs is the fact that the PR's active pin is still p (or none).
func activeIs(in commands.Invocation, p *record.Pin) plan.ActivePin {
	f := plan.ActivePin{Repo: in.Repo, PR: in.PR}
	if p != nil {
		f.ID = p.ID
	}
	return f
}

func (h *Handler) validator(inst int64) (Validator, error) {
	if h.Validators == nil {
		return nil, fmt.Errorf("reuse: no run validator")
	}
	return h.Validators(inst)
}

func closed(in commands.Invocation) commands.Result {
	return commands.Result{Outcome: commands.Rejected, Reason: "the PR is closed",
		Reply: fmt.Sprintf("%s this PR is closed: a pin applies to the next push of an open PR.", mdtext.Mention(in.Actor.Login))}
}

// GrantedReply answers a pin p granted over the PR's active pin old (nil:
// none).
func GrantedReply(p *record.Pin, old *record.Pin) string {
	superseded := ""
	if old != nil {
		superseded = fmt.Sprintf("\n\nIt replaces the pin of run %s by %s, which is now superseded.", commands.RunLink(old.RunID, old.RunURL),
			mdtext.Mention(old.ActorLogin))
	}
	return PinnedReply(p) + superseded
}

// PinnedReply answers an accepted pin.
func PinnedReply(p *record.Pin) string {
	how := ""
	if p.Bare {
		how = " (the newest real sweep run of this PR)"
	}
	attempt := ""
	if p.RunAttempt > 0 {
		attempt = fmt.Sprintf(" (attempt %d; a re-run makes this pin invalid)", p.RunAttempt)
	}
	coverage := ""
	if p.Coverage != nil {
		coverage = "\n\n**Coverage**: " + runs.Sentence(*p.Coverage) + "."
	}
	return fmt.Sprintf("📌 %s pinned run %s%s: %s, on commit %s%s. The next push of this PR skips the sweep and reuses "+
		"this run's results; it covers that one push only, and the push after it sweeps again. The head when the pin was taken was "+
		"%s: a push that reached opsbot before this comment sweeps, and the pin waits for the one after it.%s",
		mdtext.Mention(p.ActorLogin), commands.RunLink(p.RunID, p.RunURL), how, mdtext.Code(p.RunConclusion), mdtext.Code(mdtext.ShortSHA(p.RunSHA)),
		attempt, mdtext.Code(mdtext.ShortSHA(p.PRHeadAtGrant)), coverage)
}

// cancelPin revokes the PR's active pin, if it has one.
func cancelPin(env commands.Env, in commands.Invocation) commands.Result {
	p, err := env.State.ActivePin(in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: fmt.Errorf("reading %s#%d's active pin: %w", in.Repo, in.PR, err)}
	}
	r := commands.Result{Outcome: commands.Accepted, Plan: plan.Plan{Require: []plan.Fact{activeIs(in, p)}}}
	if p == nil {
		r.Reply = fmt.Sprintf("%s there is no active pin on this PR to cancel.", mdtext.Mention(in.Actor.Login))
		return r
	}
	r.Plan.Steps = []plan.Step{revoke(in, p, fmt.Sprintf("cancelled by @%s", in.Actor.Login))}
	r.Reply = fmt.Sprintf("%s revoked the pin of run %s by %s; the next push sweeps.", mdtext.Mention(in.Actor.Login),
		commands.RunLink(p.RunID, p.RunURL), mdtext.Mention(p.ActorLogin))
	return r
}

func revoke(in commands.Invocation, p *record.Pin, why string) plan.ClosePin {
	ch := record.PinChange{Reason: why, ActorID: in.Actor.ID, ActorLogin: in.Actor.Login}
	ch.SetOrigin(in.Origin)
	return plan.ClosePin{Pin: *p, To: record.PinRevoked, Change: ch}
}

// TakeBack revokes the PR's active pin when ch's comment started it and
// the comment was deleted or its command line edited away, if the one who
// did it may (the comment's author, the pin's owner, or the command's
// role); otherwise the pin stays, audited and told.
func (h *Handler) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	p, err := env.State.ActivePin(ch.Repo, ch.PR)
	if err != nil {
		return plan.Plan{}, err
	}
	// Nothing to take back holds only while the PR's pin is what was read.
	nothing := plan.Plan{Require: []plan.Fact{activeIs(ch.Invocation, p)}}
	if p == nil || !p.Origin().Same(ch.Origin) {
		return nothing, nil
	}
	login := ch.Actor.Login
	if ch.Deleted {
		how, closedWhy := fmt.Sprintf("its comment was deleted by @%s", login), "the comment that created it was deleted"
		if ch.Recovered {
			how = "recovery found its comment deleted (the deletion's webhook was lost)"
			closedWhy += " (found by recovery: the deletion's webhook was lost)"
		}
		return takeBackPin(ctx, env, ch, p, how, closedWhy, "deleted the comment", true), nil
	}
	if commands.HasLine(ch.Commands, p.CommentLine) {
		return nothing, nil
	}
	// Told only when this edit removed the line: later edits of a
	// comment without it say nothing again.
	removed := commands.HasLine(ch.OldCommands, p.CommentLine)
	how := fmt.Sprintf("its command was edited away by @%s", login)
	closedWhy := fmt.Sprintf("the command that created it was edited away by %s", mdtext.Mention(login))
	if ch.Recovered {
		how = "recovery found its command edited away (the edit's webhook was lost)"
		closedWhy = "the command that created it was edited away (found by recovery: the edit's webhook was lost)"
	}
	return takeBackPin(ctx, env, ch, p, how, closedWhy, "edited the command away", removed), nil
}

// takeBackPin plans to revoke pin p, whose comment ch's actor edited or
// deleted, when the actor may; otherwise to keep the pin, audit why and,
// when tell, say so on the PR. A role GitHub could not tell revokes: the
// next push then sweeps, which is never wrong.
func takeBackPin(ctx context.Context, env commands.Env, ch commands.Change, p *record.Pin, how, closedWhy, did string, tell bool) plan.Plan {
	out := plan.Plan{Require: []plan.Fact{activeIs(ch.Invocation, p)}}
	v := auth.Verdict{Allowed: true}
	if p.ActorID != ch.Actor.ID {
		v = env.MayTakeBack(ctx, ch, ch.Spec)
	}
	if v.Allowed || v.CheckFailed {
		if v.CheckFailed {
			how += " (whose role could not be checked: revoked, so the next push sweeps)"
		}
		closed := *p
		closed.State = record.PinRevoked
		out.Steps = []plan.Step{revoke(ch.Invocation, p, how), env.Notices.PinClosedComment(&closed, ch.Installation, closedWhy)}
		return out
	}
	need := env.Policy(ch.Spec).Describe()
	out.Steps = []plan.Step{plan.Audit{Record: commands.AuditOf(ch.Invocation, record.AuditRecord{Kind: record.AuditPin, Outcome: record.Kept,
		RunID: p.RunID, PinID: p.ID, Role: commands.RoleName(v),
		Reason: fmt.Sprintf("@%s %s of @%s's pin, but revoking another's pin needs %s: the pin stays", ch.Actor.Login, did,
			p.ActorLogin, need)})}}
	if tell {
		out.Steps = append(out.Steps, commands.Reply(env, ch.Invocation, notices.KindReply,
			fmt.Sprintf("%s %s of %s's pin of run %s, but revoking someone else's pin needs %s, so the pin stays: the next push "+
				"of this PR still reuses that run. Someone allowed to can revoke it with `/reuse-sweep-run cancel`.",
				mdtext.Mention(ch.Actor.Login), did, mdtext.Mention(p.ActorLogin), commands.RunLink(p.RunID, p.RunURL), need),
			notices.Links{PR: env.Notices.Web.PR(ch.Repo, ch.PR), Comment: p.CommentURL, Run: p.RunURL}))
	}
	return out
}

func help(rc *config.Repo) commands.Help {
	who := commands.Who(rc.Reuse.Access)
	h := commands.Help{Rows: []commands.HelpRow{
		{Command: "`/reuse-sweep-run <run>`", What: "pin run `<run>` for the next push of this PR", Who: who},
		{Command: "`/reuse-sweep-run`", What: "pin the newest real sweep run on a commit of this PR", Who: who},
		{Command: "`/use <run>`", What: "the same as `/reuse-sweep-run <run>`", Who: who},
		{Command: "`/reuse-sweep-run cancel`", What: "revoke this PR's active pin", Who: who},
	}}
	h.About = "**What a pin does.** The next push of this PR skips the sweep (" + mdtext.Code(rc.SweepWorkflow) +
		") and reuses the pinned run's results. A pin covers that one push only: the push after it sweeps again unless " +
		"someone pins again. A pin lasts until that push, `/reuse-sweep-run cancel`, a newer pin, deleting or editing " +
		"away its comment, or the PR being closed; merging consumes it. A push that arrives before opsbot has recorded " +
		"the pin sweeps, and the pin waits for the next push.\n\n" +
		"**What a run must be.** A completed sweep run of this repository (event `pull_request`) on a commit of " +
		"this PR, with unexpired result artifacts (" + mdtext.CodeList(rc.ResultArtifacts) + "). A run whose own sweep was skipped " +
		"has none and cannot be reused. A re-run after the pin makes the pin invalid. The run is checked when pinned and " +
		"again when the push comes.\n\n" +
		"**Buttons.** When opsbot runs as a GitHub App, a head whose sweep finished has **Reuse for next push** and **Merge with " +
		"reuse** on its `opsbot/sweep-gate` check run, and a skipped head **Sweep anyway**; with Slack interactivity set up, the " +
		"PR's Slack thread offers the same. A click is the command, run as the one who clicks (in Slack, the GitHub account " +
		"`slack.users` maps them to), with the same role check.\n\n"
	if rc.Reuse.AllowPartialPinned {
		h.Settings = append(h.Settings, "a pinned run may have concluded `success`, `failure` or `cancelled`")
	} else {
		h.Settings = append(h.Settings, "a pinned run must have concluded `success`")
	}
	if len(rc.Reuse.AllowedPaths) > 0 {
		h.Settings = append(h.Settings, "the pushes after the run may touch only "+mdtext.CodeList(rc.Reuse.AllowedPaths))
	} else {
		h.Settings = append(h.Settings, "no path guard: the pushes after the run may touch any file")
	}
	if len(rc.ProtectedPaths) > 0 {
		h.Settings = append(h.Settings, "a run is never used when this PR changed "+mdtext.CodeList(rc.ProtectedPaths)+" up to its commit (its workflow ran the PR's files)")
	} else {
		h.Settings = append(h.Settings, "no protected paths: a run made by a workflow this PR changed may be used")
	}
	full, partial := rc.Reuse.FullSweepLabels, rc.Reuse.IncompatibleLabels
	switch {
	case len(full) > 0 && len(partial) > 0:
		h.Settings = append(h.Settings, "a run is reused only from a PR labelled one of "+mdtext.CodeList(full)+" (a full sweep) and none of "+
			mdtext.CodeList(partial)+" (a partial sweep): another PR cannot pin a run, and its merge reuses nothing")
	case len(full) > 0:
		h.Settings = append(h.Settings, "a run is reused only from a PR labelled one of "+mdtext.CodeList(full)+
			" (a full sweep): another PR cannot pin a run, and its merge reuses nothing")
	case len(partial) > 0:
		h.Settings = append(h.Settings, "a run is never reused from a PR labelled "+mdtext.CodeList(partial)+
			" (a partial sweep): such a PR cannot pin a run, and its merge reuses nothing")
	default:
		h.Settings = append(h.Settings, "no label rule: a run of any PR may be reused")
	}
	if len(full) > 0 || len(partial) > 0 {
		h.Settings = append(h.Settings, "a push of a draft, or of a PR these labels exclude, is not gated: opsbot decides nothing for it, "+
			"and a pin waits for the next gated push")
	} else {
		h.Settings = append(h.Settings, "a push of a draft is not gated: opsbot decides nothing for it, and a pin waits for the next gated push")
	}
	if len(rc.GateActions) > 0 {
		h.Settings = append(h.Settings, "the sweep is decided on `pull_request` "+mdtext.CodeList(rc.GateActions))
	}
	return h
}
