package events

import (
	"context"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// The GitHub events opsbot uses.
const (
	EventComment  = "issue_comment"       // PR comments: commands
	EventPull     = "pull_request"        // pushes (the gate), merges and closes
	EventDispatch = "repository_dispatch" // the staging side's reports
)

// kind is one event opsbot uses: how ingest reads what a delivery is about
// (its PR, which orders it: one worker per repo#PR, Delivery.Key) and
// where the worker routes it. A new event is one row of kinds.
type kind struct {
	name string
	// classify fills d (its PR, what ingest records) from the envelope, or
	// says why the delivery is ignored.
	classify func(s *Schema, env *envelope, id string, d *state.Delivery) (ignored string, err error)
	// handle is what a stored delivery means.
	handle func(h *Handler, ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error)
	// internal is an event opsbot makes itself (never GitHub): not
	// subscribed to, and taken only with opsbot's own ids.
	internal bool
}

var kinds = []kind{
	{name: EventComment, classify: (*Schema).classifyComment, handle: (*Handler).handleComment},
	{name: EventPull,
		classify: func(_ *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
			return classifyPull(env, d), nil
		},
		handle: (*Handler).handlePull},
	{name: EventDispatch,
		classify: func(_ *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
			return classifyDispatch(env, d), nil
		},
		handle: (*Handler).handleDispatch},
	{name: seq.Event, internal: true,
		classify: func(_ *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
			return classifyWakeup(env, id, d), nil
		},
		handle: (*Handler).handleWakeup},
}

func kindOf(event string) (*kind, bool) {
	for i := range kinds {
		if kinds[i].name == event {
			return &kinds[i], true
		}
	}
	return nil, false
}

// Used are the events opsbot acts on, in order: the GitHub App subscribes
// to them, and the metrics count each from the start.
func Used() []string {
	var out []string
	for _, k := range kinds {
		if !k.internal {
			out = append(out, k.name)
		}
	}
	return out
}
