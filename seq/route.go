package seq

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/SemiAnalysisAI/opsbot/config"
)

// Route is one webhook event a kind reacts to, declared by the kind
// (Kind.Routes): the router's table is built from the kinds' routes
// (events.NewRoutes), and the App's subscriptions, the metrics and
// `opsbot github events` list the events it names. A kind that reacts to an event
// no kind used before changes no file of the router.
//
// Every delivery a route stores wakes the PR's sequences when it is
// processed, in the PR's order with its other deliveries, at most once a
// record.WakeGap (10 s) after a sequence's last write. An event only wakes:
// the step re-reads what it waits for, and polls (a wake-up of its own)
// where an event may be lost.
type Route struct {
	// Event is GitHub's name of the event (its X-GitHub-Event header).
	Event string
	// Label is the event's name in GitHub's webhook settings ("Pull request
	// reviews"), which the README's setup and `opsbot github events` say; Why is
	// what opsbot uses it for. Both are needed only for an event opsbot
	// does not route itself (below).
	Label, Why string
	// Find reads which PR a delivery is about from its body, at intake,
	// before it is stored (nothing is read from GitHub there): the PR
	// orders the delivery with the PR's others. Nil for the events opsbot
	// finds the PR of itself: check_suite, check_run, status and
	// workflow_run (their completions on a PR's head, as opsbot recorded it
	// from the PR's own pull_request events; a check run's only when it
	// failed, a status only when not pending nor opsbot's own). Where two
	// kinds route one event, the first kind's Find orders it.
	Find func(action string, body []byte) (Found, error)
	// Record is what a stored delivery writes when it is processed, beside
	// waking the PR's sequences (nil: it only wakes them); outcome is the
	// delivery's outcome, audited and counted. An error is retried as any
	// delivery's.
	Record func(ctx context.Context, rc *config.Repo, d Delivered) (outcome string, wr Write, err error)
}

// Found is the PR a delivery is about: PR, or else the PR whose head, as
// opsbot recorded it, is the commit Head (the lowest-numbered, where a
// branch heads several); Ignored says why a delivery is not stored (a
// review dismissed, where only submitted ones matter).
type Found struct {
	PR      int
	Head    string
	Ignored string
}

// Delivered is a stored delivery as a route's Record reads it.
type Delivered struct {
	ID, Event, Action string
	Repo              string
	PR                int
	Body              []byte
}

// PRNumber is the Find of an event whose payload names its PR: its
// pull_request's number (pull_request_review, pull_request_review_comment,
// pull_request_review_thread), or its number.
func PRNumber(_ string, body []byte) (Found, error) {
	var p struct {
		Number      int `json:"number"`
		PullRequest *struct {
			Number int `json:"number"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return Found{}, fmt.Errorf("reading the pull request a delivery names: %w", err)
	}
	n := p.Number
	if p.PullRequest != nil && p.PullRequest.Number > 0 {
		n = p.PullRequest.Number
	}
	if n <= 0 || int64(n) > math.MaxInt32 {
		return Found{Ignored: "names no pull request"}, nil
	}
	return Found{PR: n}, nil
}

// On is the route of an event opsbot finds the PR of itself (check_suite,
// check_run, status, workflow_run): its completions wake the kind.
func On(event string) Route { return Route{Event: event} }
