package events

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Routes is the router's table beyond opsbot's own rows (kinds): the
// events the sequence kinds route (seq.Kind.Routes), each with the kinds'
// routes in the kinds' order, and whether the commands offer buttons (the
// finished sweep and the click are then used: ButtonEvents). The intake
// finds a delivery's PR with it, the worker runs its routes' records, and
// the App's subscriptions list its events (Used). Nil routes nothing of a
// kind's.
type Routes struct {
	byEvent map[string][]seq.Route
	order   []string // the events no row of opsbot's own has, in the kinds' order
	buttons bool
}

// ButtonEvents are the events a command's button needs, whatever kind
// routes them: the finished sweep (workflow_run) whose check run and Slack
// message offer the buttons, and the click on the check run (check_run
// requested_action).
var ButtonEvents = []string{EventWorkflowRun, EventCheckRun}

var eventName = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

// NewRoutes is the table of the kinds ks' routes, with buttons or not, or
// the error that names the kind whose route cannot work: an event opsbot
// takes for every kind already (pull_request wakes every kind; comments
// and dispatches are the commands'), a Find on an event whose PR opsbot
// finds itself, an event opsbot has no row for without a Find (a typo such
// as check_suites would never be stored), or one without its label and why.
func NewRoutes(buttons bool, ks ...seq.Kind) (*Routes, error) {
	r := &Routes{byEvent: map[string][]seq.Route{}, buttons: buttons}
	for _, k := range ks {
		for _, rt := range k.Routes {
			if err := checkRoute(rt); err != nil {
				return nil, fmt.Errorf("sequence kind %s routes the event %q: %w", k.Name, rt.Event, err)
			}
			if _, own := kindOf(rt.Event); !own && len(r.byEvent[rt.Event]) == 0 {
				r.order = append(r.order, rt.Event)
			}
			r.byEvent[rt.Event] = append(r.byEvent[rt.Event], rt)
		}
	}
	return r, nil
}

func checkRoute(rt seq.Route) error {
	if !eventName.MatchString(rt.Event) {
		return fmt.Errorf("not an event name (GitHub's X-GitHub-Event, such as pull_request_review)")
	}
	row, own := kindOf(rt.Event)
	switch {
	case own && !row.declared:
		return fmt.Errorf("opsbot takes every %s delivery already (pull_request wakes every kind): drop the route", rt.Event)
	case own && row.classify != nil && rt.Find != nil:
		return fmt.Errorf("opsbot finds the PR of a %s delivery itself: leave Find nil (seq.On)", rt.Event)
	case !own || row.classify == nil:
		if rt.Find == nil {
			var names []string
			for _, k := range kinds {
				if k.declared && k.classify != nil {
					names = append(names, k.name)
				}
			}
			return fmt.Errorf("the route has no Find, and opsbot finds the PR itself only of %s: say how the PR is found (seq.PRNumber, or a Find of its own)",
				strings.Join(names, ", "))
		}
	}
	if !own && (rt.Label == "" || rt.Why == "") {
		return fmt.Errorf("an event opsbot has no row for needs its Label (its name in GitHub's webhook settings) and its Why")
	}
	return nil
}

// of are the routes of event.
func (r *Routes) of(event string) []seq.Route {
	if r == nil {
		return nil
	}
	return r.byEvent[event]
}

// uses reports whether event is used: routed by a kind, or a button's.
func (r *Routes) uses(event string) bool {
	if r == nil {
		return false
	}
	if r.buttons && slices.Contains(ButtonEvents, event) {
		return true
	}
	return len(r.byEvent[event]) > 0
}

// find is the Find that orders a delivery of event: the first route's
// that has one (nil: none).
func (r *Routes) find(event string) func(string, []byte) (seq.Found, error) {
	for _, rt := range r.of(event) {
		if rt.Find != nil {
			return rt.Find
		}
	}
	return nil
}

// Event is one webhook event opsbot uses: its name, its name in GitHub's
// webhook settings, and what opsbot uses it for.
type Event struct {
	Name, Label, Why string
}

// Events are the webhook events opsbot acts on with these routes, in
// order: opsbot's own rows first (those only a kind or a button uses when
// one does), then the events only the kinds route, in the kinds' order.
// The GitHub App subscribes to them, and the metrics count each from the
// start.
func (r *Routes) Events() []Event {
	var out []Event
	for _, k := range kinds {
		if !k.internal && (!k.declared || r.uses(k.name)) {
			out = append(out, Event{Name: k.name, Label: k.label, Why: r.why(k.name, k.why)})
		}
	}
	if r == nil {
		return out
	}
	for _, e := range r.order {
		out = append(out, Event{Name: e, Label: r.byEvent[e][0].Label, Why: r.why(e, "")})
	}
	return out
}

// why is what opsbot uses event for: own (its row's), then each route's.
func (r *Routes) why(event, own string) string {
	var why []string
	if own != "" {
		why = append(why, own)
	}
	for _, rt := range r.of(event) {
		if rt.Why != "" && !slices.Contains(why, rt.Why) {
			why = append(why, rt.Why)
		}
	}
	return strings.Join(why, "; ")
}

// Used are the webhook events opsbot acts on with the sequence kinds ks
// and, with buttons, the commands' buttons (Routes.Used). A kind whose
// routes NewRoutes refuses stops the server's start; here its routes are
// left out.
func Used(buttons bool, ks ...seq.Kind) []string {
	r, err := NewRoutes(buttons, ks...)
	if err != nil {
		r, _ = NewRoutes(buttons)
	}
	return r.Used()
}

// Used are the names of Events.
func (r *Routes) Used() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Name)
	}
	return out
}

// record runs the routes' records of a processed delivery d: their
// outcomes after out, their writes before w (opsbot's own write reads what
// they recorded: the gate notes what it said of a merge group beside what
// the queue did).
func (r *Routes) record(ctx context.Context, rc *config.Repo, d *state.Delivery, out string, w state.Write) (string, state.Write, error) {
	for _, rt := range r.of(d.Event) {
		if rt.Record == nil {
			continue
		}
		o, rw, err := rt.Record(ctx, rc, seq.Delivered{ID: d.ID, Event: d.Event, Action: d.Action, Repo: d.Repo, PR: d.PR, Body: d.Body})
		if err != nil {
			return "", nil, err
		}
		if o != "" {
			if out != "" {
				out += ","
			}
			out += o
		}
		if rw != nil {
			after := w
			w = func(tx *state.Tx) error {
				if err := rw(tx); err != nil {
					return err
				}
				if after != nil {
					return after(tx)
				}
				return nil
			}
		}
	}
	return out, w, nil
}
