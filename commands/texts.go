package commands

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// RunNote is the usage note of a verb that takes a run.
const RunNote = "\n`<run>` is a run id (digits) or the run's URL on this repository " +
	"(`https://github.com/OWNER/REPO/actions/runs/ID`). `/opsbot help` lists every command.\n"

// NoAnswerReply is the reply when GitHub did not answer a check that doing
// (pin, stage) what needed.
func NoAnswerReply(login, doing, what string) string {
	return fmt.Sprintf("%s I did not %s %s: %s while I checked it. Please try again in a minute.", mdtext.Mention(login), doing, what, auth.NoAnswer)
}

// UsageReply is the reply to a command line with bad arguments: the usage
// of its verb, and the verb's note.
func UsageReply(r *Registry, login string, c Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s I did not run %s", mdtext.Mention(login), Code(c.Text))
	if c.Reason != "" {
		fmt.Fprintf(&b, ": %s", c.Reason)
	}
	fmt.Fprintf(&b, ".\n\n```\n%s\n```\n", c.Error)
	if v, ok := r.verbs[c.Verb]; ok && c.Error != UsageLimit {
		b.WriteString(v.verb.UsageNote)
	}
	return b.String()
}

// EditedReply answers an edit that added commands: they are not run.
func EditedReply(login string, added []Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s commands in edited comments are not run; post a new comment to run them:\n\n", mdtext.Mention(login))
	for _, c := range added {
		fmt.Fprintf(&b, "- line %d: %s\n", c.Line, Code(c.Text))
	}
	return b.String()
}

// Who says who an access rule lets run a command, for /opsbot help.
func Who(a config.Access) string { return who(a.MinRole, a.AllowUsers, a.AllowTeams) }

// WhoByRole says who a role alone lets run a command.
func WhoByRole(role string) string { return who(role, nil, nil) }

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

// Code shows text a user typed (a command line, an argument) as one code
// span, where GitHub renders no mention, link or formatting, whatever
// backticks or line breaks it holds; at most 200 bytes of it.
func Code(s string) string { return mdtext.Code(mdtext.Clip(s, 200)) }

// RunLink links a run's id to its page.
func RunLink(id int64, url string) string {
	return mdtext.Link(strconv.FormatInt(id, 10), url)
}

// Span is a duration as people write it: 2h, 1h30m, 10m.
func Span(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
