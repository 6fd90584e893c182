package events

import (
	"context"
	"strconv"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// The GitHub events opsbot uses.
const (
	EventComment  = "issue_comment"       // PR comments: commands
	EventPull     = "pull_request"        // pushes (the gate), merges and closes
	EventDispatch = "repository_dispatch" // the staging side's reports
	// Completions on a PR's head, which wake the PR's sequences (a merge
	// waiting for its checks).
	EventCheckSuite  = "check_suite"
	EventCheckRun    = "check_run"
	EventStatus      = "status"
	EventWorkflowRun = "workflow_run"
	// The merge queue testing (checks_requested) and leaving (destroyed) a
	// PR's group commit.
	EventMergeGroup = "merge_group"
)

// kind is one event opsbot uses: how ingest reads what a delivery is about
// (its PR, which orders it: one worker per repo#PR, Delivery.Key) and
// where the worker routes it: opsbot's own events. An event a sequence
// kind reacts to is the kind's route (seq.Route, Routes), no row here.
type kind struct {
	name string
	// classify fills d (its PR, what ingest records) from the envelope, or
	// says why the delivery is ignored.
	classify func(s *Schema, env *envelope, id string, d *state.Delivery) (ignored string, err error)
	// handle is what a stored delivery means.
	handle func(h *Handler, ctx context.Context, rc *config.Repo, d *state.Delivery) (string, state.Write, error)
	// wakes makes the PR's sequences due when the delivery is processed:
	// something they wait for may have happened (a step re-reads it).
	wakes bool
	// internal is an event opsbot makes itself (never GitHub): not
	// subscribed to, and taken only with opsbot's own ids.
	internal bool
	// declared is an event used only when a sequence kind routes it
	// (seq.Kind.Routes) or, for a button's events, a command offers one
	// (Routes).
	declared bool
	// label is the event's name in GitHub's webhook settings; why, what
	// opsbot uses it for (`opsbot github events`).
	label, why string
}

var kinds = []kind{
	{name: EventComment, classify: (*Schema).classifyComment, handle: (*Handler).handleComment,
		label: "Issue comments", why: "comments carry the commands"},
	{name: EventPull,
		classify: func(_ *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
			return classifyPull(env, d), nil
		},
		handle: (*Handler).handlePull, wakes: true,
		label: "Pull requests", why: "pushes are gated, closes expire pins, and every change wakes the PR's sequences"},
	{name: EventDispatch,
		classify: func(_ *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
			return classifyDispatch(env, d), nil
		},
		handle: (*Handler).handleDispatch,
		label:  "Repository dispatches", why: "the staging side's reports"},
	{name: EventCheckSuite, classify: completions("completed"), handle: wakeOnly, wakes: true, declared: true,
		label: "Check suites", why: "a completed check suite on a PR's head wakes what waits for its checks"},
	{name: EventCheckRun, classify: failedRuns, handle: (*Handler).handleCheckRun, wakes: true, declared: true,
		label: "Check runs", why: "a failed check run on a PR's head wakes what waits for its checks; a click on a check run's button"},
	{name: EventStatus, classify: statuses, handle: wakeOnly, wakes: true, declared: true,
		label: "Statuses", why: "a status set on a PR's head wakes what waits for its checks"},
	{name: EventWorkflowRun, classify: workflowRuns, handle: (*Handler).handleWorkflowRun, wakes: true, declared: true,
		label: "Workflow runs", why: "a finished sweep offers the buttons; a completed run wakes what waits for it"},
	// A merge group names no PR: the route of the kind that follows the
	// queue finds it (and records what the queue did); the gate gives a
	// tested group its statuses.
	{name: EventMergeGroup, handle: (*Handler).handleMergeGroup, wakes: true, declared: true,
		label: "Merge groups", why: "a merge queue's group gets the gate's status"},
	{name: EventClick, internal: true,
		classify: func(_ *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
			return classifyClick(env, id, d), nil
		},
		handle: (*Handler).handleClick},
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

// IgnoredUndeclared is an event opsbot has a row for that no sequence kind
// in use declares.
const IgnoredUndeclared = "no sequence waits for this event"

// IgnoredNotCompleted is a check or status event that completes nothing
// (a check queued or started, a pending status): nothing waits for it.
const IgnoredNotCompleted = "not a completion"

// completions classifies an event that names only a commit and wakes the
// sequences of the PR it heads: only a completion (action, or for a status
// a state other than pending) is stored. One about a head whose push is
// still queued finds no PR and is ignored: a sequence waiting for it
// re-reads the checks at its next wake-up anyway.
func completions(action string) func(s *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
	return func(s *Schema, env *envelope, _ string, d *state.Delivery) (string, error) {
		if env.Action != action || env.State == "pending" {
			return IgnoredNotCompleted, nil
		}
		return s.classifyByHead(env, d)
	}
}

// IgnoredOwnStatus is a status opsbot set itself: it says what opsbot
// decided, and waking on it would loop.
const IgnoredOwnStatus = "a status opsbot set"

// statuses classifies a status: not a pending one, nor opsbot's own.
func statuses(s *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
	if strings.HasPrefix(env.Context, "opsbot/") {
		return IgnoredOwnStatus, nil
	}
	return completions("")(s, env, id, d)
}

// IgnoredCheckRunPassed is a check run that completed without failing: one
// job of a workflow run, whose suite's completion wakes what waits (a sweep
// has hundreds; a wake-up each would re-read every check each time).
const IgnoredCheckRunPassed = "a check run that did not fail (its suite's completion wakes)"

// failedRuns classifies a check run's completion: only a failure wakes,
// so that a merge stops at the first failed job.
func failedRuns(s *Schema, env *envelope, id string, d *state.Delivery) (string, error) {
	if env.Action == "requested_action" {
		// A click on one of opsbot's check runs' buttons: the PR opsbot
		// wrote into the check run's external_id (GitHub signs it, and it
		// holds for an older head's check run and a fork's PR alike, so the
		// click reaches its offer and uses its button up); else the PR the
		// check run names, else the PR the head index finds.
		if env.CheckRun != nil {
			prOf, _, _ := strings.Cut(env.CheckRun.ExternalID, ":")
			if n, err := strconv.Atoi(prOf); err == nil && n > 0 {
				d.PR = n
				return "", nil
			}
		}
		if env.CheckRun != nil && len(env.CheckRun.PullRequests) > 0 && env.CheckRun.PullRequests[0].Number > 0 {
			d.PR = env.CheckRun.PullRequests[0].Number
			return "", nil
		}
		return s.classifyByHead(env, d)
	}
	if env.Action != "completed" {
		return IgnoredNotCompleted, nil
	}
	switch env.CheckRun.conclusion() {
	case "success", "neutral", "skipped", "cancelled":
		return IgnoredCheckRunPassed, nil
	}
	return s.classifyByHead(env, d)
}

// wakeOnly is a completion: its only effect is the wake-up of the PR's
// sequences (kind.wakes).
func wakeOnly(*Handler, context.Context, *config.Repo, *state.Delivery) (string, state.Write, error) {
	return "woke-sequences", nil, nil
}
