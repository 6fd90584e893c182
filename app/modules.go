package app

import (
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/all"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// RegisterSections registers the configuration sections the commands'
// modules declare, and those of more (a test's commands, Deps.Modules):
// call it before any configuration is read (the program does, at its
// start; a test that reads one, in its TestMain or before it loads).
func RegisterSections(more ...func(commands.Deps) commands.Module) {
	mods := all.Modules(commands.Deps{})
	for _, mk := range more {
		mods = append(mods, mk(commands.Deps{}))
	}
	for _, m := range mods {
		if m.Section != nil {
			s := *m.Section
			s.Owner = m.Spec.Name
			config.RegisterSection(s)
		}
	}
}

// Grammar is the registry for reading comments only (opsbot parse): the
// commands as they are, reaching nothing.
func Grammar() *commands.Registry {
	reg, err := commands.RegistryOf(all.Modules(commands.Deps{}))
	if err != nil {
		panic(err) // the list is opsbot's own: a duplicate is a bug a test finds
	}
	return reg
}

// UsedEvents are the webhook events opsbot uses with its commands (their
// kinds' and buttons'): the App subscribes to them, and the metrics count
// them.
func UsedEvents() []string {
	return events.Used(Grammar().HasButtons(), commands.KindsOf(all.Modules(commands.Deps{}))...)
}

// Events are UsedEvents with their names in GitHub's webhook settings and
// what opsbot uses each for (`opsbot github events`), or the error that
// would stop the server's start (a kind's route that cannot work).
func Events() ([]events.Event, error) {
	r, err := events.NewRoutes(Grammar().HasButtons(), commands.KindsOf(all.Modules(commands.Deps{}))...)
	if err != nil {
		return nil, err
	}
	return r.Events(), nil
}

// approvalReader gives run validation opsbot's approvals (state.Store).
type approvalReader struct{ store *state.Store }

func (r approvalReader) ApprovalOfRun(repo string, run int64) (*runs.Approval, error) {
	a, err := r.store.ApprovalOfRun(repo, run)
	if err != nil || a == nil {
		return nil, err
	}
	return &runs.Approval{ID: a.ID, PR: a.PR, Head: a.Head, Workflow: a.Workflow, RunID: a.RunID, State: string(a.State), Attempt: a.RunAttempt}, nil
}

func (r approvalReader) ApprovedRuns(repo string, pr int) ([]int64, error) {
	list, err := r.store.Approvals(repo, pr)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, a := range list {
		if a.Counts() {
			out = append(out, a.RunID)
		}
	}
	return out, nil
}
