package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Module is one command as opsbot takes it in, everything about it
// declared in its own package: its Spec (grammar, help, access rule,
// handler and buttons), the kinds of sequence it steps (with the events
// each follows), and its configuration section. A command's package makes
// its module from the one Deps every command shares (a Module(Deps)
// function); the list of modules (commands/all) is the only place that
// names it.
type Module struct {
	Spec  Spec
	Kinds []seq.Kind
	// Section is the command's own section of the configuration (nil: it
	// reads one of config.Repo's); the program registers it before any
	// configuration is read.
	Section *config.Section
	// Reports, when set, takes the staging side's reports
	// (repository_dispatch): one module of the list does, declared here,
	// not found by the type of its handler.
	Reports Reports
}

// Reports takes the staging side's reports (a repository_dispatch event):
// what it comes to (the audit's outcome) and the plan that records it.
type Reports interface {
	Callback(ctx context.Context, st record.Reader, repo string, ev *github.RepositoryDispatchEvent) (string, plan.Plan, error)
}

// ReportsOf is the one module's Reports: an error when two declare it, or
// none (the staging side's reports would be ignored).
func ReportsOf(ms []Module) (Reports, error) {
	var out Reports
	for _, m := range ms {
		if m.Reports == nil {
			continue
		}
		if out != nil {
			return nil, fmt.Errorf("commands: %s takes the staging side's reports, and another command already does", m.Spec.Name)
		}
		out = m.Reports
	}
	if out == nil {
		return nil, errors.New("commands: no command takes the staging side's reports (a Module's Reports)")
	}
	return out, nil
}

// Button is a button opsbot offers for a command, declared beside its
// handler: on the check run of a head whose sweep finished (a GitHub App's)
// and in the PR's Slack thread. A click runs Command as the one who
// clicked, with the command's role check, validation, reply and audit.
type Button struct {
	// ID is what a click names: the check run action's identifier and the
	// Slack action's id (20 characters at most).
	ID string
	// Label and Description are the check run's button (20 and 40
	// characters at most); an empty Label: not on check runs.
	Label, Description string
	// Slack is the Slack button's words for the run the button offers
	// ("": not in Slack); SlackStyle its style (primary, danger, "").
	Slack      func(run int64) string
	SlackStyle string
	// NoRun is a button that names no run (Cancel pin).
	NoRun bool
	// Own is a button its command offers in its own Slack messages
	// (plan.SlackOffer) and, with a Label, on its own check run
	// (plan.CheckOffer), never on a finished sweep's message nor the gate's
	// check run; it has Slack words.
	Own bool
	// Command is the command line a click runs, given the button's run.
	Command func(run int64) Command
}

// Deps are what opsbot gives its commands: one set, built by the wiring,
// from which each command's Module takes what it needs. A command's tests
// build one with fakes.
type Deps struct {
	Cfg     *config.Live
	Log     *slog.Logger
	Now     func() time.Time
	Notices *notices.Notifier
	// State reads opsbot's state outside a write (the store).
	State State
	// GitHub is an installation's GitHub client; Validators its run
	// validator (the one the gate uses).
	GitHub     func(installation int64) (*ghclient.Client, error)
	Validators func(installation int64) (*runs.Validator, error)
	// AppID is opsbot's GitHub App (0: a token).
	AppID int64
	// Self is opsbot's own account and Users the allow_users logins bound
	// to accounts: both known once opsbot has started, before the workers
	// run (nil in a test that needs neither).
	Self  func() (id int64, login string)
	Users func() *auth.Directory
	// Registry is the registry of every module's command (built from the
	// list, after the modules: a command that offers the buttons of others
	// reads it when it offers them).
	Registry func() *Registry
	// Acts are the process's marks of the acts it cannot take back (a
	// merge, a branch move, a dispatch, a re-run), one set the sequence
	// engine holds and hands to each step (seq.Wakeup.Marks): a kind makes
	// an act's mark here (in a command's Prepare, or a step's) and the
	// engine's Send uses it up. Nil outside a running server (a module
	// asked for its spec); ActsOf gives a set then.
	Acts *seq.Marks
}

// ActsOf is d's act marks, or a set of the module's own where d has none
// (a module built for its spec or its help, which never sends).
func ActsOf(d Deps) *seq.Marks {
	if d.Acts == nil {
		return &seq.Marks{}
	}
	return d.Acts
}

// State is what a command reads of opsbot's state outside a write.
type State interface {
	record.Reader
	Sequence(repo string, pr int, kind string) (*record.Sequence, error)
	Decision(repo string, pr int, sha string) (*record.Decision, error)
	Approval(repo, id string) (*record.Approval, error)
	Approvals(repo string, pr int) ([]record.Approval, error)
	StagedRun(repo string, runID int64) (*record.StageRequest, error)
}

// RegistryOf is the registry of the modules' commands, in their order.
func RegistryOf(ms []Module, more ...Spec) (*Registry, error) {
	specs := make([]Spec, 0, len(ms)+len(more))
	for _, m := range ms {
		if m.Spec.Name == "" {
			continue // a module of kinds and a section alone: no command
		}
		specs = append(specs, m.Spec)
	}
	r, err := NewRegistry(append(specs, more...)...)
	if err != nil {
		return nil, err
	}
	r.kinds = map[string]seq.Kind{}
	for _, k := range KindsOf(ms) {
		r.kinds[k.Name] = k
	}
	return r, nil
}

// KindsOf are the kinds of sequence the modules step, in their order.
func KindsOf(ms []Module) []seq.Kind {
	var out []seq.Kind
	for _, m := range ms {
		out = append(out, m.Kinds...)
	}
	return out
}

// Button is the button a click names, and its command's spec.
func (r *Registry) Button(id string) (Button, *Spec, bool) {
	for _, s := range r.specs {
		for _, b := range s.Buttons {
			if b.ID == id {
				return b, s, true
			}
		}
	}
	return Button{}, nil, false
}

// HasButtons says whether a command offers a button: the events a click
// and its offer need are then used (events.ButtonEvents).
func (r *Registry) HasButtons() bool {
	for _, s := range r.specs {
		if len(s.Buttons) > 0 {
			return true
		}
	}
	return false
}

// CheckActions are the buttons a finished sweep's check run offers, in the
// commands' order (GitHub shows at most three).
func (r *Registry) CheckActions() []record.CheckAction {
	var out []record.CheckAction
	for _, s := range r.specs {
		for _, b := range s.Buttons {
			if b.Label != "" && !b.Own {
				out = append(out, record.CheckAction{Label: b.Label, Description: b.Description, Identifier: b.ID})
			}
		}
	}
	return out
}

// SlackButtons are the buttons a finished sweep's message in Slack offers
// for run, each with value (what the click carries back) made for the run
// it names (0 for a button that names none).
func (r *Registry) SlackButtons(run int64, value func(run int64) string) []record.SlackButton {
	var out []record.SlackButton
	for _, s := range r.specs {
		for _, b := range s.Buttons {
			if b.Slack == nil || b.Own {
				continue
			}
			named := run
			if b.NoRun {
				named = 0
			}
			out = append(out, record.SlackButton{Text: b.Slack(run), ActionID: b.ID, Value: value(named), Style: b.SlackStyle})
		}
	}
	return out
}
