package events

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// EventClick is a click on one of opsbot's Slack buttons, stored as
// opsbot's own delivery once Slack's signature was checked
// (server.handleSlack); its ids start with ClickIDPrefix, which the
// webhook refuses.
const (
	EventClick    = "opsbot_click"
	ClickIDPrefix = "slack-"
)

// Click actions: the buttons opsbot puts on Slack messages.
const (
	ClickReuse  = "reuse"  // pin the button's run for the next push
	ClickCancel = "cancel" // revoke the PR's active pin
)

// ClickValue is a button's value: the PR it is about and, for reuse, the
// run. opsbot writes it; Slack signs the click that carries it back.
type ClickValue struct {
	Repo  string `json:"repo"`
	PR    int    `json:"pr"`
	RunID int64  `json:"run,omitempty"`
}

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
	answer := func(text string) plan.Step {
		return plan.SlackAnswer{Repo: rc.Name, PR: d.PR, URL: ci.ResponseURL, Text: mdtext.Plain(mdtext.Parse(text))}
	}
	cfg := h.Cfg.Get()
	login := cfg.Slack.Users[ci.SlackUser]
	who := fmt.Sprintf("Slack user %s", ci.SlackUser)
	refuse := func(outcome, why, told string) (string, state.Write, error) {
		rec := record.AuditRecord{Kind: record.AuditCommand, Command: "reuse-sweep-run", Outcome: outcome, Repo: rc.Name, PR: d.PR,
			RunID: ci.RunID, ActorLogin: login, Reason: who + ": " + why}
		rec.SetOrigin(origin)
		p := plan.Plan{Steps: []plan.Step{plan.Audit{Record: rec}, answer(told)}}
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
			"Nothing was done: opsbot could not find the GitHub account "+login+" your Slack account is mapped to. Try again in a minute.")
	}
	inv := commands.Invocation{Repo: rc.Name, PR: d.PR, PRState: info.State, Installation: info.Installation,
		Actor: auth.Actor{Login: login, ID: ids[0], Type: "User"}, Origin: origin}
	var cmd commands.Command
	switch ci.Action {
	case ClickReuse:
		cmd = commands.Command{Name: "reuse-sweep-run", Verb: "/reuse-sweep-run", RunID: ci.RunID, Text: fmt.Sprintf("/reuse-sweep-run %d", ci.RunID)}
	case ClickCancel:
		cmd = commands.Command{Name: "reuse-sweep-run", Verb: "/reuse-sweep-run", Cancel: true, Text: "/reuse-sweep-run cancel"}
	default:
		return refuse(string(commands.Rejected), "an unknown button "+ci.Action, "Nothing was done: opsbot does not know this button.")
	}
	out, p, err := commands.PlanClick(ctx, env, inv, cmd, who, answer)
	if err != nil {
		return "", nil, err
	}
	return out, func(tx *state.Tx) error { return plan.Apply(tx, t, p) }, nil
}
