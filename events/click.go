package events

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/slackmirror"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// EventClick is a click on one of opsbot's Slack buttons, stored as
// opsbot's own delivery once Slack's signature was checked
// (server.handleSlack); its ids start with ClickIDPrefix, which the
// webhook refuses.
const (
	EventClick    = "opsbot_click"
	ClickIDPrefix = "slack-"
)

// ClickValue is a button's value (notices.ClickValue).
type ClickValue = notices.ClickValue

// Click is a click as stored: the repository and PR (as a webhook names
// them, so it is ordered with the PR's webhooks) and what was clicked.
type Click struct {
	Repository Repository `json:"repository"`
	Number     int        `json:"number"`
	Click      *ClickInfo `json:"opsbot_click"`
}

// ClickInfo is one click: the action, the run, the Slack user and where to
// answer them.
type ClickInfo struct {
	Action      string `json:"action"`
	RunID       int64  `json:"run_id,omitempty"`
	Head        string `json:"head,omitempty"`
	Nonce       string `json:"nonce,omitempty"`
	Attempt     int    `json:"attempt,omitempty"` // a command's own button's (notices.ClickValue)
	SlackUser   string `json:"slack_user"`
	SlackTeam   string `json:"slack_team,omitempty"`
	ResponseURL string `json:"response_url,omitempty"`
	ActionTS    string `json:"action_ts,omitempty"`
}

// IgnoredClick is a click delivery opsbot did not make.
const IgnoredClick = "click not taken by opsbot"

func classifyClick(env *envelope, id string, d *state.Delivery) string {
	if !strings.HasPrefix(id, ClickIDPrefix) || env.Click == nil || env.Click.SlackUser == "" {
		return IgnoredClick
	}
	d.PR = env.Number
	if d.PR <= 0 {
		return IgnoredNoPR
	}
	return ""
}

// handleClick runs the command a click asks for as the GitHub account
// slack.users maps the clicker to: role-checked, validated, audited and
// answered like a comment's, with an ephemeral answer to the clicker in
// Slack. An unmapped clicker gets that answer and nothing is done.
func (h *Handler) handleClick(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	var c Click
	if err := decode(d, &c); err != nil {
		return "", nil, err
	}
	ci := c.Click
	sum := sha256.Sum256([]byte(d.ID))
	origin := record.Origin{Kind: record.OriginSlack, ID: int64(binary.BigEndian.Uint64(sum[:8]) >> 1)}
	t := h.Notices.Teller()
	answer := func(text string, _ bool) plan.Step {
		return plan.SlackAnswer{Repo: rc.Name, PR: d.PR, URL: ci.ResponseURL, Text: slackmirror.FromMarkdown(text)}
	}
	cfg := h.Cfg.Get()
	login := cfg.Slack.Users[ci.SlackUser]
	who := fmt.Sprintf("a click in Slack by Slack user %s", ci.SlackUser)
	// A refused click is audited under the command its button runs, as a
	// check run's is.
	command := h.clickCommand(ci.Action)
	refuse := func(outcome, why, told string, steps ...plan.Step) (string, state.Write, error) {
		rec := record.AuditRecord{Kind: record.AuditCommand, Command: command, Outcome: outcome, Repo: rc.Name, PR: d.PR,
			RunID: ci.RunID, ActorLogin: login, Reason: who + ": " + why}
		rec.SetOrigin(origin)
		p := plan.Plan{Steps: append([]plan.Step{plan.Audit{Record: rec}, answer(told, false)}, steps...)}
		return "click-" + outcome, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
	}
	if login == "" {
		return refuse(string(commands.Denied), "not mapped to a GitHub account (slack.users)",
			"Nothing was done: your Slack account is not mapped to a GitHub account. Ask an opsbot admin to add you to slack.users.")
	}
	info, err := h.State.PRInfo(rc.Name, d.PR)
	if err != nil {
		return "", nil, err
	}
	if info == nil {
		return refuse(string(commands.Rejected), "opsbot knows nothing of the PR", "Nothing was done: opsbot knows nothing of this PR.")
	}
	env, err := h.env(ctx, rc, info.Installation)
	if err != nil {
		return "", nil, err
	}
	if h.Users != nil {
		if client, err := h.Clients.For(info.Installation); err == nil {
			h.Users.Resolve(ctx, client, []string{login})
		}
	}
	ids := env.Users.IDs([]string{login})
	if len(ids) == 0 {
		return refuse(string(commands.Errored), "its GitHub login @"+login+" could not be resolved to an account",
			"Nothing was done: opsbot could not find the GitHub account "+login+" your Slack account is mapped to. Ask an opsbot admin to check slack.users.")
	}
	// Each button acts once, whatever its click does from here on: a click
	// with the nonce of no offer, or of a button used already, is refused.
	use, why, told, err := h.buttonOf(rc.Name, d.PR, ci.Nonce, ci.Action, ci.RunID,
		record.ButtonUse{Action: ci.Action, By: login, ByID: ids[0], Delivery: d.ID}, "of the newest message in this thread")
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		return refuse(string(commands.Rejected), why, "Nothing was done: "+told)
	}
	refuseUsing := func(why, told string) (string, state.Write, error) {
		use.Use.Outcome = string(commands.Rejected)
		return refuse(string(commands.Rejected), why, told, use)
	}
	if ci.Head == "" || !strings.EqualFold(ci.Head, info.HeadSHA) {
		return refuseUsing("the button was for head "+ci.Head+", no longer the PR's head "+info.HeadSHA,
			fmt.Sprintf("Nothing was done: the button was offered for the PR's head %s, which has moved (now %s). Use the newest message's buttons.",
				mdtext.ShortSHA(ci.Head), mdtext.ShortSHA(info.HeadSHA)))
	}
	inv := commands.Invocation{Repo: rc.Name, PR: d.PR, PRState: info.State, Installation: info.Installation,
		Actor: auth.Actor{Login: login, ID: ids[0], Type: "User"}, Origin: origin, ExpectHead: info.HeadSHA}
	// What a button means is its command's (commands.Button, declared
	// beside the handler).
	b, _, ok := h.Commands.Button(ci.Action)
	if !ok || b.Slack == nil {
		return refuseUsing("an unknown button "+ci.Action, "Nothing was done: opsbot does not know this button.")
	}
	cmd := b.Command(ci.RunID)
	if b.Own {
		cmd.Attempt = ci.Attempt // the attempt it was offered for: its command holds the run to it
	}
	out, p, err := commands.PlanClick(ctx, env, inv, cmd, who, answer)
	if err != nil {
		return "", nil, err
	}
	use.Use.Outcome = strings.TrimPrefix(out, "click-")
	p.Steps = append(p.Steps, use)
	return out, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
}

// buttonOf reads the offer a click's nonce names (record.Offer) and says
// whether the clicked button may act: why is "" and use is the step that
// uses the button up, for the plan of whatever the click then does; or why
// is the audit's reason it may not and told what the clicker reads after
// "nothing was done: ", naming the buttons to use now (where) or the
// command to type.
func (h *Handler) buttonOf(repo string, pr int, nonce, action string, run int64, u record.ButtonUse, where string) (use plan.UseButton,
	why, told string, err error) {
	if h.Buttons == nil {
		return use, "", "", worker.Permanent(errors.New("events: the handler has no button reader (events.Handler.Buttons)"))
	}
	o, err := h.Buttons.ButtonOffer(repo, nonce)
	if err != nil {
		return use, "", "", err
	}
	use = plan.UseButton{Repo: repo, Nonce: nonce, Use: u}
	if o == nil || o.PR != pr || !slices.Contains(o.Actions, action) {
		return use, "a button opsbot did not offer on this PR (its nonce names no offer of it)",
			"opsbot did not offer this button on this PR, or offered it before buttons carried a nonce. Use the buttons " + where +
				", or type the command.", nil
	}
	used := o.Used(action)
	if used == nil {
		return use, "", "", nil
	}
	again := "Sweep anyway acts once for each skip."
	if b, _, ok := h.Commands.Button(action); ok {
		again = "Type " + mdtext.Code(b.Command(run).Text) + " on the PR to do it again."
	}
	what := "its click was " + used.Outcome
	if used.Outcome == string(commands.Accepted) {
		what = "its click acted"
	}
	return use, fmt.Sprintf("the button was used already, by @%s at %s (delivery %s; %s)", used.By, used.At.UTC().Format(time.RFC3339),
			used.Delivery, what),
		fmt.Sprintf("this button was used already, by %s at %s (%s); each button acts once. %s", mdtext.Mention(used.By),
			used.At.UTC().Format("2006-01-02 15:04 UTC"), what, again), nil
}

// checkRunPayload is the part of a check_run event opsbot reads.
type checkRunPayload struct {
	Action   string `json:"action"`
	CheckRun struct {
		ID         int64  `json:"id"`
		Name       string `json:"name"`
		HeadSHA    string `json:"head_sha"`
		ExternalID string `json:"external_id"`
		App        struct {
			ID int64 `json:"id"`
		} `json:"app"`
	} `json:"check_run"`
	RequestedAction struct {
		Identifier string `json:"identifier"`
	} `json:"requested_action"`
	Sender Account `json:"sender"`
}

// handleCheckRun is a check run's event: a click on one of the buttons of
// opsbot's own check run (requested_action) runs its command as the one
// who clicked; a completion only wakes the PR's sequences (kind.wakes).
func (h *Handler) handleCheckRun(ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error) {
	if d.Action != "requested_action" {
		return "woke-sequences", nil, nil
	}
	var ev checkRunPayload
	if err := decode(d, &ev); err != nil {
		return "", nil, err
	}
	if !strings.HasPrefix(ev.CheckRun.Name, notices.OwnCheckPrefix) || (h.AppID != 0 && ev.CheckRun.App.ID != h.AppID) {
		return "ignored-check-run", nil, nil // another app's check run
	}
	// The check run names the PR and the run its buttons act on, and the
	// offer of its buttons: pr:run:nonce, and for a command's own check
	// run (plan.CheckOffer) the run's attempt after them.
	prOf, rest, _ := strings.Cut(ev.CheckRun.ExternalID, ":")
	if n, err := strconv.Atoi(prOf); err != nil || n != d.PR {
		return "ignored-check-run-other-pr", nil, nil
	}
	runOf, rest, _ := strings.Cut(rest, ":")
	nonce, attemptOf, _ := strings.Cut(rest, ":")
	run, _ := strconv.ParseInt(runOf, 10, 64)
	attempt, _ := strconv.Atoi(attemptOf)
	info, err := h.State.PRInfo(rc.Name, d.PR)
	if err != nil {
		return "", nil, err
	}
	if info == nil {
		// Nothing to run it for; its button is used up all the same.
		return "ignored-check-run", h.useClicked(rc.Name, nonce, ev.RequestedAction.Identifier, record.ButtonUse{
			Action: ev.RequestedAction.Identifier, By: ev.Sender.Login, ByID: ev.Sender.ID, Delivery: d.ID, Outcome: "ignored"}), nil
	}
	env, err := h.env(ctx, rc, info.Installation)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256([]byte(d.ID))
	inv := commands.Invocation{Repo: rc.Name, PR: d.PR, PRState: info.State, Installation: info.Installation,
		Actor: auth.Actor{Login: ev.Sender.Login, ID: ev.Sender.ID, Type: ev.Sender.Type}, ExpectHead: info.HeadSHA,
		Origin: record.Origin{Kind: record.OriginCheckRun, ID: int64(binary.BigEndian.Uint64(sum[:8]) >> 1)}}
	t := h.Notices.Teller()
	links := notices.Links{PR: h.Notices.Web.PR(rc.Name, d.PR), Commit: h.Notices.Web.Commit(rc.Name, ev.CheckRun.HeadSHA)}
	// The PR is told what a refused click did not do; a done one's reply is
	// posted by the command.
	answer := func(text string, done bool) plan.Step {
		if done {
			return plan.Plan{}
		}
		return commands.Reply(env, inv, notices.KindReply, text, links)
	}
	via := fmt.Sprintf("a click on the check run of %s", mdtext.ShortSHA(ev.CheckRun.HeadSHA))
	action := ev.RequestedAction.Identifier
	refuse := func(out, why, told string, steps ...plan.Step) (string, state.Write, error) {
		rec := commands.AuditOf(inv, record.AuditRecord{Kind: record.AuditCommand, Command: h.clickCommand(action),
			Outcome: string(commands.Rejected), HeadSHA: ev.CheckRun.HeadSHA, Reason: via + ": " + why})
		p := plan.Plan{Steps: append([]plan.Step{plan.Audit{Record: rec}, answer(mdtext.Mention(ev.Sender.Login)+" nothing was done: "+told, false)},
			steps...)}
		return out, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
	}
	// Each offered button acts once, whatever its click does from here on:
	// GitHub signs a click's body, not its delivery id, so a captured click
	// sent again under a new id brings back a nonce whose button was used.
	where := "of the newest check run on this PR's head"
	if info.HeadSHA != "" {
		where += " " + mdtext.Code(mdtext.ShortSHA(info.HeadSHA))
	}
	if ev.CheckRun.Name != notices.StatusContext {
		where = fmt.Sprintf("of the newest check run %s on %s", mdtext.Code(ev.CheckRun.Name), mdtext.Code(mdtext.ShortSHA(ev.CheckRun.HeadSHA)))
	}
	use, why, told, err := h.buttonOf(rc.Name, d.PR, nonce, action, run,
		record.ButtonUse{Action: action, By: ev.Sender.Login, ByID: ev.Sender.ID, Delivery: d.ID}, where)
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		return refuse("check-run-button-refused", why, told)
	}
	// A command's own button (commands.Button.Own) is on its own check
	// run, on a commit that need not be the head (a merge commit): its
	// command holds the click to the run and attempt it names.
	b, _, known := h.Commands.Button(action)
	own := known && b.Own
	if !own && !strings.EqualFold(ev.CheckRun.HeadSHA, info.HeadSHA) {
		use.Use.Outcome = string(commands.Rejected)
		return refuse("check-run-old-head", "no longer the PR's head ("+info.HeadSHA+")", fmt.Sprintf("the button is on the check run of %s, "+
			"which is no longer this PR's head (%s). Use the buttons of the head's own check run.",
			mdtext.Code(mdtext.ShortSHA(ev.CheckRun.HeadSHA)), mdtext.Code(mdtext.ShortSHA(info.HeadSHA))), use)
	}
	if action == notices.ActionSweep {
		return h.sweepAnyway(ctx, rc, env, inv, info, ev.CheckRun.HeadSHA, via, answer, use)
	}
	// What a button means is its command's (commands.Button, declared
	// beside the handler).
	if !known || b.Label == "" || (!b.NoRun && run <= 0) {
		use.Use.Outcome = "ignored"
		return "ignored-check-run-action", func(tx *state.Tx) error { return plan.Apply(tx, t, plan.Plan{Steps: []plan.Step{use}}) }, nil
	}
	cmd := b.Command(run)
	if own {
		cmd.Attempt = attempt
	}
	out, p, err := commands.PlanClick(ctx, env, inv, cmd, via, answer)
	if err != nil {
		return "", nil, err
	}
	use.Use.Outcome = strings.TrimPrefix(out, "click-")
	p.Steps = append(p.Steps, use) // the click uses its button up, whatever it did
	return out, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
}

// sweepAnyway overrides the skip of the PR's head for one who may pin (the
// skip came from a pin): the gate answers sweep for the head from then on,
// so the workflow's re-run sweeps. Audited and told on the PR.
func (h *Handler) sweepAnyway(ctx context.Context, rc *config.Repo, env commands.Env, inv commands.Invocation, info *state.PRInfo, head, via string,
	answer func(string, bool) plan.Step, use plan.UseButton) (string, state.Write, error) {
	t := h.Notices.Teller()
	spec, ok := env.Commands.Spec("reuse-sweep-run")
	if !ok {
		return "ignored-check-run-action", nil, nil
	}
	rec := commands.AuditOf(inv, record.AuditRecord{Kind: record.AuditDecision, Command: "sweep-anyway", HeadSHA: head})
	v := env.Check(ctx, inv.Actor, spec)
	if !v.Allowed {
		rec.Outcome, rec.Reason = "override_denied", via+": "+v.Reason
		use.Use.Outcome = string(commands.Denied)
		p := plan.Plan{Steps: []plan.Step{use, plan.Audit{Record: rec},
			answer(fmt.Sprintf("%s nothing was done: %s.", mdtext.Mention(inv.Actor.Login), v.Reason), false)}}
		return "check-run-sweep-denied", func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
	}
	d, err := h.Gate.Store.Decision(rc.Name, inv.PR, head)
	if err != nil {
		return "", nil, err
	}
	if d == nil || !d.Skipped() {
		rec.Outcome, rec.Reason = "not_skipped", via+": the head's sweep is not skipped"
		use.Use.Outcome = string(commands.Rejected)
		p := plan.Plan{Steps: []plan.Step{use, plan.Audit{Record: rec}, answer(fmt.Sprintf("%s nothing was done: the sweep of %s is not skipped.",
			mdtext.Mention(inv.Actor.Login), mdtext.Code(mdtext.ShortSHA(head))), false)}}
		return "check-run-sweep-nothing", func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
	}
	rec.Outcome, rec.RunID = "overridden", d.RunID
	rec.Reason = fmt.Sprintf("%s: sweep anyway, asked by @%s (the skip reused run %d)", via, inv.Actor.Login, d.RunID)
	text := fmt.Sprintf("🔁 %s asked for the sweep of %s after all: the skip that reused run %d is overridden, and the workflow's re-run "+
		"(or its next gate ask) for this head sweeps.", mdtext.Mention(inv.Actor.Login), mdtext.Code(mdtext.ShortSHA(head)), d.RunID)
	use.Use.Outcome = string(commands.Accepted)
	p := plan.Plan{Steps: []plan.Step{use, plan.OverrideDecision{Repo: rc.Name, PR: inv.PR, SHA: head, Login: inv.Actor.Login, Audit: rec},
		commands.Reply(env, inv, notices.KindReply, text, notices.Links{PR: h.Notices.Web.PR(rc.Name, inv.PR)}),
		plan.Notice{Fn: func(tx record.Tx) error {
			// GitHub shows the head as sweeping again: its status and its check run.
			why := fmt.Sprintf("sweep: sweep anyway, asked by @%s", inv.Actor.Login)
			if err := h.Notices.Status(tx, rc.Name, inv.PR, info.Installation, head, why, ""); err != nil {
				return err
			}
			return h.Notices.CheckRun(tx, rc.Name, inv.PR, info.Installation, head, "neutral", "The sweep runs: sweep anyway",
				fmt.Sprintf("%s asked for this head's sweep after it was skipped (reusing run %d): the workflow's re-run sweeps.",
					mdtext.Mention(inv.Actor.Login), d.RunID), 0, nil)
		}}}}
	return "check-run-sweep-anyway", func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
}

// clickCommand is the command a button (a check run's or Slack's) stands
// for, as audited.
func (h *Handler) clickCommand(identifier string) string {
	if identifier == notices.ActionSweep {
		return "sweep-anyway"
	}
	if b, _, ok := h.Commands.Button(identifier); ok {
		return b.Command(0).Name
	}
	return "unknown-button"
}

// useClicked is the write that uses up a clicked button of an offer, if
// there is one to use (a nonce of no offer, or a button used already,
// writes nothing): a click that did nothing (nothing to run it for, or its
// delivery given up) still uses its button up, so the same signed body
// sent again later under another delivery id acts no more than it did.
func (h *Handler) useClicked(repo, nonce, action string, u record.ButtonUse) state.Write {
	if nonce == "" || action == "" {
		return nil
	}
	return func(tx *state.Tx) error {
		err := tx.UseButton(repo, nonce, u)
		if errors.Is(err, record.ErrButtonUsed) || errors.Is(err, record.ErrButtonUnknown) {
			return nil
		}
		return err
	}
}

// Buried is what a click's delivery given up (the dead letters) still
// writes: its button used up (worker.Burier), so a captured copy of a click
// that failed does not act later as the clicker. Any other delivery writes
// nothing.
func (h *Handler) Buried(d *state.Delivery) state.Write {
	switch {
	case d.Event == EventCheckRun && d.Action == "requested_action":
		var ev checkRunPayload
		if decode(d, &ev) != nil {
			return nil
		}
		_, rest, _ := strings.Cut(ev.CheckRun.ExternalID, ":")
		_, nonce, _ := strings.Cut(rest, ":")
		return h.useClicked(d.Repo, nonce, ev.RequestedAction.Identifier, record.ButtonUse{Action: ev.RequestedAction.Identifier,
			By: ev.Sender.Login, ByID: ev.Sender.ID, Delivery: d.ID, Outcome: "errored"})
	case d.Event == EventClick:
		var c Click
		if decode(d, &c) != nil || c.Click == nil {
			return nil
		}
		login := ""
		if h.Cfg != nil {
			login = h.Cfg.Get().Slack.Users[c.Click.SlackUser]
		}
		return h.useClicked(d.Repo, c.Click.Nonce, c.Click.Action, record.ButtonUse{Action: c.Click.Action, By: login, Delivery: d.ID,
			Outcome: "errored"})
	}
	return nil
}
