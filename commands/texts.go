package commands

import (
	"fmt"
	"strings"

	"opsbot/auth"
	"opsbot/mdtext"
)

// HelpInfo is what the /opsbot help reply tells about one repository.
type HelpInfo struct {
	Repo               string
	SweepWorkflow      string
	ResultArtifacts    []string
	ReuseRole          string
	StageRole          string
	HelpRole           string
	ReuseUsers         []string
	ReuseTeams         []string
	StageUsers         []string
	StageTeams         []string
	AllowPartialPinned bool
	AllowedPaths       []string
	ProtectedPaths     []string
	GateActions        []string
	StageConfigured    bool
}

// NoAnswerReply is the reply when GitHub did not answer a check that doing
// (pin, stage) what needed.
func NoAnswerReply(login, doing, what string) string {
	return fmt.Sprintf("%s I did not %s %s: %s while I checked it. Please try again in a minute.", mdtext.Mention(login), doing, what, auth.NoAnswer)
}

// UsageReply is the reply to a command line with bad arguments.
func UsageReply(login string, c Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s I did not run %s", mdtext.Mention(login), code(c.Text))
	if c.Reason != "" {
		fmt.Fprintf(&b, ": %s", c.Reason)
	}
	fmt.Fprintf(&b, ".\n\n```\n%s\n```\n", c.Error)
	if c.Name != Help && c.Error != UsageLimit {
		b.WriteString("\n`<run>` is a run id (digits) or the run's URL on this repository " +
			"(`https://github.com/OWNER/REPO/actions/runs/ID`). `/opsbot help` lists every command.\n")
	}
	return b.String()
}

// EditedReply answers an edit that added commands: they are not run.
func EditedReply(login string, added []Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s commands in edited comments are not run; post a new comment to run them:\n\n", mdtext.Mention(login))
	for _, c := range added {
		fmt.Fprintf(&b, "- line %d: %s\n", c.Line, code(c.Text))
	}
	return b.String()
}

// HelpReply is the answer to /opsbot help.
func HelpReply(login string, h HelpInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s here is what opsbot does on **%s**.\n\n", mdtext.Mention(login), mdtext.Text(h.Repo))
	b.WriteString("| command | what it does | who may run it |\n|---|---|---|\n")
	reuse := who(h.ReuseRole, h.ReuseUsers, h.ReuseTeams)
	stage := who(h.StageRole, h.StageUsers, h.StageTeams)
	rows := [][3]string{
		{"`/reuse-sweep-run <run>`", "pin run `<run>` for the next push of this PR", reuse},
		{"`/reuse-sweep-run`", "pin the newest real sweep run on a commit of this PR", reuse},
		{"`/use <run>`", "the same as `/reuse-sweep-run <run>`", reuse},
		{"`/reuse-sweep-run cancel`", "revoke this PR's active pin", reuse},
		{"`/stage-results <run>`", "publish run `<run>`'s results to the staging site", stage},
		{"`/stage-results`", "the same for the newest stageable sweep run of this PR", stage},
		{"`/opsbot help`", "this reply", who(h.HelpRole, nil, nil)},
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mdtext.Cell(r[0]), mdtext.Cell(r[1]), mdtext.Cell(r[2]))
	}
	b.WriteString("\n`<run>` is a run id (digits) or the run's URL on this repository. A command is a line of its own; " +
		"nothing in code blocks, quotes, lists, tables, HTML or HTML comments is read, and commands added by editing a comment are not run.\n\n")

	b.WriteString("**What a pin does.** The next push of this PR skips the sweep (" + mdtext.Code(h.SweepWorkflow) +
		") and reuses the pinned run's results. A pin covers that one push only: the push after it sweeps again unless " +
		"someone pins again. A pin lasts until that push, `/reuse-sweep-run cancel`, a newer pin, deleting or editing " +
		"away its comment, or the PR being closed; merging consumes it. A push that arrives before opsbot has recorded " +
		"the pin sweeps, and the pin waits for the next push.\n\n")
	b.WriteString("**What a run must be.** A completed sweep run of this repository (event `pull_request`) on a commit of " +
		"this PR, with unexpired result artifacts (" + codeList(h.ResultArtifacts) + "). A run whose own sweep was skipped " +
		"has none and cannot be reused. A re-run after the pin makes the pin invalid. The run is checked when pinned and " +
		"again when the push comes.\n\n")
	b.WriteString("**Settings here.**\n")
	if h.AllowPartialPinned {
		b.WriteString("- a pinned run may have concluded `success`, `failure` or `cancelled`\n")
	} else {
		b.WriteString("- a pinned run must have concluded `success`\n")
	}
	if len(h.AllowedPaths) > 0 {
		b.WriteString("- the pushes after the run may touch only " + codeList(h.AllowedPaths) + "\n")
	} else {
		b.WriteString("- no path guard: the pushes after the run may touch any file\n")
	}
	if len(h.ProtectedPaths) > 0 {
		b.WriteString("- a run is never used when this PR changed " + codeList(h.ProtectedPaths) + " up to its commit (its workflow ran the PR's files)\n")
	} else {
		b.WriteString("- no protected paths: a run made by a workflow this PR changed may be used\n")
	}
	if len(h.GateActions) > 0 {
		b.WriteString("- the sweep is decided on `pull_request` " + codeList(h.GateActions) + "\n")
	}
	if !h.StageConfigured {
		b.WriteString("- staging is not configured for this repository\n")
	}
	return b.String()
}

func who(role string, users, teams []string) string {
	s := mdtext.Code(role) + " or above"
	if role == "none" {
		s = "anyone"
	}
	var extra []string
	for _, u := range users {
		extra = append(extra, mdtext.Code(u))
	}
	for _, t := range teams {
		extra = append(extra, "team "+mdtext.Code(t))
	}
	if len(extra) > 0 {
		// Any one of them may: the role, or a listed user, or a team's member.
		s += ", or " + strings.Join(extra, ", or ")
	}
	return s
}

func codeList(xs []string) string { return mdtext.CodeList(xs) }

// code shows text a user typed (a command line, an argument) as one code
// span, where GitHub renders no mention, link or formatting, whatever
// backticks or line breaks it holds; at most 200 bytes of it.
func code(s string) string { return mdtext.Code(mdtext.Clip(s, 200)) }
