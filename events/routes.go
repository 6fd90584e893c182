package events

import (
	"context"
	"errors"
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
	byEvent map[string][]route
	order   []string // the events no row of opsbot's own has, in the kinds' order
	buttons bool
}

// route is a kind's route, with the kind's name (its errors say it).
type route struct {
	seq.Route
	kind string
}

// ButtonEvents are the events a command's button needs, whatever kind
// routes them: the finished sweep (workflow_run) whose check run and Slack
// message offer the buttons, and the click on the check run (check_run
// requested_action).
var ButtonEvents = []string{EventWorkflowRun, EventCheckRun}

var eventName = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

// NewRoutes is the table of the kinds ks' routes, with buttons or not, or
// the error that names the kind whose route cannot work: an event that is
// not one of GitHub's about a repository (a typo such as check_suites, or
// installation, which names none), one opsbot takes for every kind already
// (pull_request wakes every kind; comments and dispatches are the
// commands'), a Find on an event whose PR opsbot finds itself, an event
// opsbot has no row for without a Find, a second Find for an event (the
// first decides what is stored), a kind routing one event twice, or a new
// event without its label and why.
func NewRoutes(buttons bool, ks ...seq.Kind) (*Routes, error) {
	r := &Routes{byEvent: map[string][]route{}, buttons: buttons}
	for _, k := range ks {
		for _, rt := range k.Routes {
			err := checkRoute(rt)
			for _, had := range r.byEvent[rt.Event] {
				switch {
				case err != nil:
				case had.kind == k.Name:
					err = errors.New("the kind routes it twice")
				case had.Find != nil && rt.Find != nil:
					err = fmt.Errorf("sequence kind %s finds its PR already, and one Find decides what is stored: leave this one nil and "+
						"tell in Record what the kind takes of it", had.kind)
				}
			}
			if _, own := kindOf(rt.Event); err == nil && !own && len(r.byEvent[rt.Event]) == 0 && (rt.Label == "" || rt.Why == "") {
				err = errors.New("the first route of an event opsbot has no row for needs its Label (its name in GitHub's webhook settings) and its Why")
			}
			if err != nil {
				return nil, fmt.Errorf("sequence kind %s routes the event %q: %w", k.Name, rt.Event, err)
			}
			if _, own := kindOf(rt.Event); !own && len(r.byEvent[rt.Event]) == 0 {
				r.order = append(r.order, rt.Event)
			}
			r.byEvent[rt.Event] = append(r.byEvent[rt.Event], route{Route: rt, kind: k.Name})
		}
	}
	for _, k := range ks {
		for _, rt := range k.Routes {
			if row, own := kindOf(rt.Event); (!own || row.classify == nil) && r.find(rt.Event) == nil {
				var names []string
				for _, k := range kinds {
					if k.declared && k.classify != nil {
						names = append(names, k.name)
					}
				}
				return nil, fmt.Errorf("sequence kind %s routes the event %q: the route has no Find, no other kind's has one, and opsbot "+
					"finds the PR itself only of %s: say how the PR is found (seq.PRNumber, or a Find of its own)", k.Name, rt.Event,
					strings.Join(names, ", "))
			}
		}
	}
	return r, nil
}

// repositoryEvents are GitHub's webhook events that name their repository
// (a delivery's repository.full_name, which opsbot serves or not): the
// only ones a kind can route.
var repositoryEvents = map[string]bool{
	"branch_protection_configuration": true, "branch_protection_rule": true, "check_run": true, "check_suite": true,
	"code_scanning_alert": true, "commit_comment": true, "create": true, "custom_property_values": true, "delete": true,
	"dependabot_alert": true, "deploy_key": true, "deployment": true, "deployment_protection_rule": true,
	"deployment_review": true, "deployment_status": true, "discussion": true, "discussion_comment": true, "fork": true,
	"gollum": true, "issue_comment": true, "issues": true, "label": true, "member": true, "merge_group": true,
	"meta": true, "milestone": true, "package": true, "page_build": true, "public": true, "pull_request": true,
	"pull_request_review": true, "pull_request_review_comment": true, "pull_request_review_thread": true, "push": true,
	"registry_package": true, "release": true, "repository": true, "repository_advisory": true,
	"repository_dispatch": true, "repository_import": true, "repository_ruleset": true,
	"repository_vulnerability_alert": true, "secret_scanning_alert": true, "secret_scanning_alert_location": true,
	"security_and_analysis": true, "star": true, "status": true, "watch": true, "workflow_dispatch": true,
	"workflow_job": true, "workflow_run": true,
}

func checkRoute(rt seq.Route) error {
	if !eventName.MatchString(rt.Event) || !repositoryEvents[rt.Event] {
		return fmt.Errorf("not one of GitHub's webhook events about a repository (its X-GitHub-Event, such as pull_request_review)")
	}
	row, own := kindOf(rt.Event)
	switch {
	case own && !row.declared && (rt.Record == nil || rt.Find != nil):
		return fmt.Errorf("opsbot takes every %s delivery already (pull_request wakes every kind): a route of it only records (a Record, no Find)", rt.Event)
	case own && row.classify != nil && rt.Find != nil:
		return fmt.Errorf("opsbot finds the PR of a %s delivery itself: leave Find nil (seq.On)", rt.Event)
	}
	return nil
}

// of are the routes of event.
func (r *Routes) of(event string) []route {
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
// and, with buttons, the commands' buttons (Routes.Used). It panics on
// routes NewRoutes refuses: the kinds are opsbot's own list, and a route
// that cannot work is a bug its tests find (the server's start says why).
func Used(buttons bool, ks ...seq.Kind) []string {
	r, err := NewRoutes(buttons, ks...)
	if err != nil {
		panic(err)
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
// outcomes after out, their writes in the kinds' order and before w
// (opsbot's own write reads what they recorded: the gate notes what it
// said of a merge group beside what the queue did). A record's error
// names its kind, and the delivery is tried again as a whole.
func (r *Routes) record(ctx context.Context, rc *config.Repo, d *state.Delivery, out string, w state.Write) (string, state.Write, error) {
	var writes []seq.Write
	for _, rt := range r.of(d.Event) {
		if rt.Record == nil {
			continue
		}
		o, rw, err := rt.Record(ctx, rc, seq.Delivered{ID: d.ID, Event: d.Event, Action: d.Action, Repo: d.Repo, PR: d.PR, Body: d.Body})
		if err != nil {
			return "", nil, fmt.Errorf("sequence kind %s recording the %s delivery: %w", rt.kind, d.Event, err)
		}
		if o != "" {
			if out != "" {
				out += ","
			}
			out += o
		}
		if rw != nil {
			writes = append(writes, rw)
		}
	}
	if len(writes) == 0 {
		return out, w, nil
	}
	own := w
	return out, func(tx *state.Tx) error {
		for _, rw := range writes {
			if err := rw(tx); err != nil {
				return err
			}
		}
		if own != nil {
			return own(tx)
		}
		return nil
	}, nil
}
