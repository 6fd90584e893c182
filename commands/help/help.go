// Package help is /opsbot help: what each registered command does on the
// repository, who may run it, and the repository's settings.
package help

import (
	"context"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// Name is the command's canonical name.
const Name = "help"

// Usage is the command's usage text.
const Usage = "usage: /opsbot help"

// Spec is the command.
// Module is /opsbot help.
func Module(commands.Deps) commands.Module { return commands.Module{Spec: Spec()} }

func Spec() commands.Spec {
	return commands.Spec{
		Name:    Name,
		Verbs:   []commands.Verb{{Word: "/opsbot", Usage: Usage, Args: args}},
		Access:  func(rc *config.Repo) config.Access { return rc.Help },
		Help:    func(rc *config.Repo) commands.Help { return commands.Help{Rows: []commands.HelpRow{row(rc)}} },
		Handler: handler{},
	}
}

func row(rc *config.Repo) commands.HelpRow {
	return commands.HelpRow{Command: "`/opsbot help`", What: "this reply", Who: commands.WhoByRole(rc.Help.MinRole)}
}

func args(_ *commands.Command, args []string, _ commands.Options) string {
	if len(args) != 1 || !strings.EqualFold(args[0], "help") {
		return "/opsbot takes one word: help"
	}
	return ""
}

type handler struct{}

func (handler) Prepare(_ context.Context, env commands.Env, in commands.Invocation, _ commands.Line) commands.Result {
	return commands.Result{Outcome: commands.Accepted, Reply: Reply(in.Actor.Login, env.Repo, env.Commands)}
}

// Reply is the answer to /opsbot help on a repository: every registered
// command's rows, notes and settings, in the registry's order.
func Reply(login string, rc *config.Repo, reg *commands.Registry) string {
	var rows []commands.HelpRow
	var about strings.Builder
	var settings []string
	for _, s := range reg.Specs() {
		h := s.Help(rc)
		rows = append(rows, h.Rows...)
		about.WriteString(h.About)
		settings = append(settings, h.Settings...)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s here is what opsbot does on **%s**.\n\n", mdtext.Mention(login), mdtext.Text(rc.Name))
	b.WriteString("| command | what it does | who may run it |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mdtext.Cell(r.Command), mdtext.Cell(r.What), mdtext.Cell(r.Who))
	}
	b.WriteString("\n`<run>` is a run id (digits) or the run's URL on this repository. A command is a line of its own; " +
		"nothing in code blocks, quotes, lists, tables, HTML or HTML comments is read, and commands added by editing a comment are not run.\n\n")
	b.WriteString(about.String())
	if len(settings) > 0 {
		b.WriteString("**Settings here.**\n")
		for _, s := range settings {
			b.WriteString("- " + s + "\n")
		}
	}
	return b.String()
}
