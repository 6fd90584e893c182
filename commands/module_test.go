package commands_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

type nopHandler struct{}

func (nopHandler) Prepare(context.Context, commands.Env, commands.Invocation, commands.Line) commands.Result {
	return commands.Result{}
}

// spec is a complete command named name offering buttons.
func spec(name string, buttons ...commands.Button) commands.Spec {
	return commands.Spec{
		Name:    name,
		Verbs:   []commands.Verb{{Word: "/" + name, Args: func(*commands.Command, []string, commands.Options) string { return "" }}},
		Access:  func(*config.Repo) config.Access { return config.Access{MinRole: "write"} },
		Help:    func(*config.Repo) commands.Help { return commands.Help{} },
		Handler: nopHandler{},
		Buttons: buttons,
	}
}

// button is a button labelled label (described, when labelled) that
// runs the command "one".
func button(id, label string) commands.Button {
	b := commands.Button{ID: id, Label: label, Command: func(int64) commands.Command { return commands.Command{Name: "one"} }}
	if label != "" {
		b.Description = "does " + label
	}
	return b
}

// A click names a button by its identifier alone: a registry whose buttons
// could be confused, cut by GitHub, or not shown is refused when opsbot
// starts, not found out when a maintainer's click runs another command.
func TestRegistryRefusesButtonsAClickCouldNotName(t *testing.T) {
	slackOnly := button("pin-cancel", "")
	slackOnly.Slack = func(int64) string { return "Cancel pin" }
	if _, err := commands.NewRegistry(spec("one", button("reuse", "Reuse"), slackOnly), spec("two", button("merge", "Merge"), button("echo", "Echo"))); err != nil {
		t.Fatalf("three check-run buttons and a Slack one: %v", err)
	}
	noCommand := button("x", "X")
	noCommand.Command = nil
	undescribed := button("x", "X")
	undescribed.Description = ""
	ownLabelled := button("x", "X")
	ownLabelled.Own = true
	ownSilent := button("x", "")
	ownSilent.Own = true
	elsewhere := button("x", "X")
	elsewhere.Command = func(int64) commands.Command { return commands.Command{Name: "not-a-command"} }
	for _, c := range []struct {
		name  string
		specs []commands.Spec
		want  string
	}{
		{"an identifier two commands share", []commands.Spec{spec("one", button("merge", "Merge")), spec("two", button("merge", "Echo the run"))}, `"merge" is another command's`},
		{"an identifier one command repeats", []commands.Spec{spec("one", button("a", "A"), button("a", "B"))}, `share the identifier "a"`},
		{"the gate's Sweep anyway", []commands.Spec{spec("one", button("sweep", "Sweep"))}, "Sweep anyway"},
		{"an identifier GitHub would cut", []commands.Spec{spec("one", button(strings.Repeat("i", 21), "I"))}, "1 to 20 characters"},
		{"an empty identifier", []commands.Spec{spec("one", button("", "I"))}, "1 to 20 characters"},
		{"a label GitHub would cut", []commands.Spec{spec("one", button("i", strings.Repeat("l", 21)))}, "too long"},
		{"no command", []commands.Spec{spec("one", noCommand)}, "runs no command"},
		{"a command not registered", []commands.Spec{spec("one", elsewhere)}, `runs "not-a-command", which is no registered command`},
		{"a label without a description", []commands.Spec{spec("one", undescribed)}, "no description"},
		{"a space that is not a space bar's", []commands.Spec{spec("one", button("a\u00a0b", "A"))}, "1 to 20 characters"},
		{"a carriage return", []commands.Spec{spec("one", button("a\rb", "A"))}, "1 to 20 characters"},
		{"offered nowhere", []commands.Spec{spec("one", button("i", ""))}, "offered nowhere"},
		{"its own, with a check-run label and no Slack words", []commands.Spec{spec("one", ownLabelled)}, "needs Slack words"},
		{"its own, without Slack words", []commands.Spec{spec("one", ownSilent)}, "offered nowhere"},
		{"a fourth check-run button", []commands.Spec{spec("one", button("a", "A"), button("b", "B")), spec("two", button("c", "C"), button("d", "D"))}, "3 at most"},
	} {
		_, err := commands.NewRegistry(c.specs...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

type reports struct{}

func (reports) Callback(context.Context, record.Reader, string, *github.RepositoryDispatchEvent) (string, plan.Plan, error) {
	return "", plan.Plan{}, nil
}

// The staging side's reports go to the one command that declares it takes
// them: two would leave which one gets them to the list's order, none
// would leave them ignored.
func TestOneModuleTakesTheStagingSidesReports(t *testing.T) {
	one := commands.Module{Spec: spec("stage"), Reports: reports{}}
	if got, err := commands.ReportsOf([]commands.Module{{Spec: spec("merge")}, one}); err != nil || got == nil {
		t.Fatalf("ReportsOf(one) = %v, %v", got, err)
	}
	two := one
	two.Spec = spec("restage")
	if _, err := commands.ReportsOf([]commands.Module{one, two}); err == nil || !strings.Contains(err.Error(), "restage takes the staging side's reports") {
		t.Errorf("two modules taking reports: %v", err)
	}
	if _, err := commands.ReportsOf([]commands.Module{{Spec: spec("merge")}}); err == nil {
		t.Error("no module taking reports was accepted")
	}
}

// A command's own buttons (offered in its own Slack messages and check
// runs) are never among those a finished sweep's message or check run
// offers, nor count against the check run's three; a click still finds
// them.
func TestOwnButtonsAreOfferedOnlyByTheirCommand(t *testing.T) {
	own := button("own", "Own")
	own.Own = true
	own.Slack = func(int64) string { return "Own" }
	reuse := button("reuse", "Reuse")
	reuse.Slack = func(int64) string { return "Reuse" }
	reg, err := commands.NewRegistry(spec("one", reuse, own, button("b", "B")), spec("two", button("c", "C")))
	if err != nil {
		t.Fatalf("three check-run buttons and a command's own labelled one: %v", err)
	}
	for _, b := range reg.SlackButtons(1, func(int64) string { return "" }) {
		if b.ActionID == "own" {
			t.Fatalf("a finished sweep's message offers a command's own button: %+v", b)
		}
	}
	for _, a := range reg.CheckActions() {
		if a.Identifier == "own" {
			t.Fatalf("a finished sweep's check run offers a command's own button: %+v", a)
		}
	}
	if _, _, ok := reg.Button("own"); !ok {
		t.Fatal("a click does not find a command's own button")
	}
}
