package app

import (
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/approve"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// RegisterSections registers the commands' own configuration sections:
// call it once, before any configuration is read (the program does, at
// its start; a test that reads one, in its TestMain).
func RegisterSections() {
	config.RegisterSection(merge.Section.Section())
	config.RegisterSection(approve.ConfigSection)
}

// commandSet is the handlers of the commands opsbot runs: the server and
// the tests (and `opsbot parse`) share this one list. A new command is a
// package under commands/, a field here and a line in specs (and in kinds
// when it steps a sequence).
type commandSet struct {
	pins     *reuse.Handler
	stager   *stage.Handler
	merger   *merge.Handler
	approver *approve.Handler
}

// specs are the commands, in the order /opsbot help lists them.
func (c commandSet) specs() []commands.Spec {
	return []commands.Spec{
		reuse.Spec(c.pins),
		merge.Spec(c.merger),
		stage.Spec(c.stager),
		approve.Spec(c.approver),
		help.Spec(),
	}
}

// kinds are the kinds of sequence the commands step, each declared by its
// command's package.
func (c commandSet) kinds() []seq.Kind {
	return []seq.Kind{stage.Kind(c.stager), merge.Kind(c.merger), approve.Kind(c.approver)}
}

// inert is the set with handlers that reach nothing: what the commands
// are, not what they do.
func inert() commandSet {
	return commandSet{pins: &reuse.Handler{}, stager: &stage.Handler{}, merger: &merge.Handler{}, approver: &approve.Handler{}}
}

// Grammar is the registry for reading comments only (opsbot parse).
func Grammar() *commands.Registry { return commands.MustRegistry(inert().specs()...) }

// UsedEvents are the webhook events opsbot uses with its commands: the
// App subscribes to them, and the metrics count them.
func UsedEvents() []string { return events.Used(inert().kinds()...) }

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
