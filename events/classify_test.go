package events

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

var stamp = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func serveAll() *Schema {
	return &Schema{Repo: func(n string) (string, bool) { return n, true }, Commands: commandstest.Registry(), Now: func() time.Time { return stamp }}
}

// TestClassifyEveryFixture: every real payload is classified without
// error, either stored (with the PR that orders it) or ignored with a reason.
func TestClassifyEveryFixture(t *testing.T) {
	s := serveAll()
	for _, p := range fixtures.Webhooks(t) {
		t.Run(p.Event+"/"+p.Name, func(t *testing.T) {
			d, ignored, err := s.Classify(p.Event, "d-1", p.Body)
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if d == nil {
				if ignored == "" {
					t.Fatal("ignored without a reason")
				}
				if !slices.Contains(Used(false), p.Event) && ignored != IgnoredEvent && ignored != IgnoredUndeclared {
					t.Fatalf("ignored = %q, want %q (or, for an event a sequence kind may declare, %q)", ignored, IgnoredEvent, IgnoredUndeclared)
				}
				return
			}
			if ignored != "" {
				t.Fatalf("stored and ignored (%q)", ignored)
			}
			if !slices.Contains(Used(false), p.Event) {
				t.Fatalf("event %s is not used but was stored", p.Event)
			}
			if d.ID != "d-1" || d.Event != p.Event || d.Repo == "" || !d.ReceivedAt.Equal(stamp) || string(d.Body) != string(p.Body) {
				t.Fatalf("delivery = %+v", d)
			}
			if p.Event == "pull_request" && d.PR <= 0 {
				t.Fatalf("PR = %d, want the payload's PR", d.PR)
			}
		})
	}
}

// edit returns the payload with fn applied to its decoded JSON.
func edit(t *testing.T, body []byte, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// onPR makes an issue_comment fixture a comment on PR 7 with the given body.
func onPR(t *testing.T, action, body string) []byte {
	t.Helper()
	return edit(t, fixtures.Webhook(t, "issue_comment", action), func(m map[string]any) {
		issue := m["issue"].(map[string]any)
		issue["number"] = 7
		issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/7"}
		m["comment"].(map[string]any)["body"] = body
	})
}

func TestClassify(t *testing.T) {
	s := serveAll()
	dispatch := func(pr any) []byte {
		return edit(t, fixtures.Webhook(t, "repository_dispatch", ""), func(m map[string]any) {
			m["action"] = "stage-results-done"
			m["client_payload"] = map[string]any{"pr-number": pr}
		})
	}
	for _, tc := range []struct {
		name, event string
		body        []byte
		ignored     string
		pr          int
		noCommands  bool
		commands    []string // canonical names of the parsed commands
	}{
		{name: "comment on an issue", event: "issue_comment", body: fixtures.Webhook(t, "issue_comment", "created"), ignored: IgnoredIssue},
		{name: "comment without commands", event: "issue_comment", body: onPR(t, "created", "Looks good"), pr: 7, noCommands: true},
		{name: "comment with a slash but no command", event: "issue_comment", body: onPR(t, "created", "see a/b"), pr: 7, noCommands: true},
		{name: "command comment", event: "issue_comment", body: onPR(t, "created", "thanks\n/reuse-sweep-run 123\n/opsbot help"), pr: 7,
			commands: []string{reuse.Name, help.Name}},
		{name: "malformed command goes through", event: "issue_comment", body: onPR(t, "created", "/reuse-sweep-run x y"), pr: 7,
			commands: []string{reuse.Name}},
		{name: "edited comment", event: "issue_comment", body: onPR(t, "edited", "/reuse-sweep-run 5"), pr: 7,
			commands: []string{reuse.Name}},
		{name: "pull request", event: "pull_request", body: fixtures.Webhook(t, "pull_request", "synchronize"), pr: 2},
		{name: "unused event", event: "issues", body: []byte(`{"action":"opened","repository":{"full_name":"a/b"}}`), ignored: IgnoredEvent},
		{name: "no repository", event: "pull_request", body: []byte(`{"action":"opened","number":3}`), ignored: IgnoredRepo + ": the payload names no repository"},
		{name: "pull request without a number", event: "pull_request",
			body: []byte(`{"action":"opened","repository":{"full_name":"a/b"}}`), ignored: IgnoredNoPR},
		{name: "dispatch not from staging", event: "repository_dispatch", body: fixtures.Webhook(t, "repository_dispatch", ""),
			ignored: IgnoredDispatch},
		{name: "stage result, PR as a number", event: "repository_dispatch", body: dispatch(12), pr: 12},
		{name: "stage result, PR as a string", event: "repository_dispatch", body: dispatch("13"), pr: 13},
		{name: "stage result, PR out of range", event: "repository_dispatch", body: dispatch(float64(1 << 40)), pr: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ignored, err := s.Classify(tc.event, "d-1", tc.body)
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if got, want := ignored, tc.ignored; got != want {
				t.Fatalf("ignored = %q, want %q", got, want)
			}
			if tc.ignored != "" {
				if d != nil {
					t.Fatalf("ignored delivery returned: %+v", d)
				}
				return
			}
			if got, want := d.PR, tc.pr; got != want {
				t.Fatalf("PR = %d, want %d", got, want)
			}
			if got, want := d.NoCommands, tc.noCommands; got != want {
				t.Fatalf("NoCommands = %v, want %v", got, want)
			}
			if tc.event != "issue_comment" || d.NoCommands {
				// A comment with no command line is completed from the
				// header alone: nothing more is recorded.
				if len(d.Parsed) != 0 {
					t.Fatalf("Parsed = %s, want none", d.Parsed)
				}
				return
			}
			var in ingested
			if err := json.Unmarshal(d.Parsed, &in); err != nil || in.Comment == nil {
				t.Fatalf("Parsed = %s (%v), want the comment", d.Parsed, err)
			}
			// Ingest stores the comment without reading its commands:
			// the worker reads them, out of the webhook request.
			if in.Comment.Parser != 0 || len(in.Comment.Commands) != 0 {
				t.Fatalf("ingest read the commands: %s", d.Parsed)
			}
			if err := parseCommands(in.Comment, d.Body, s.Commands, commands.Options{Repo: d.Repo}); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range loadCommands(in.Comment.Commands) {
				names = append(names, c.Name)
			}
			if got, want := strings.Join(names, ","), strings.Join(tc.commands, ","); got != want {
				t.Fatalf("commands = %q, want %q", got, want)
			}
		})
	}
}

// TestClassifyKeepsTheParse: what the worker reads back of a record ingest
// stored is exactly what commands.Parse gives, every field, for the
// comment and an edit's old body, through a stored parse too.
func TestClassifyKeepsTheParse(t *testing.T) {
	s := serveAll()
	s.WebHost = "github.example.com"
	body := "/reuse-sweep-run https://github.example.com/Codertocat/Hello-World/actions/runs/99/attempts/2\n/use\n/reuse-sweep-run cancel"
	old := "/stage-results 5"
	raw := edit(t, onPR(t, "edited", body), func(m map[string]any) {
		m["changes"] = map[string]any{"body": map[string]any{"from": old}}
	})
	d, _, err := s.Classify("issue_comment", "d-1", raw)
	if err != nil || d == nil {
		t.Fatalf("Classify = %v, %v", d, err)
	}
	var in ingested
	if err := json.Unmarshal(d.Parsed, &in); err != nil {
		t.Fatal(err)
	}
	opt := commands.Options{Repo: "Codertocat/Hello-World", Host: s.WebHost}
	if err := parseCommands(in.Comment, d.Body, s.Commands, opt); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	in = ingested{}
	if err := json.Unmarshal(stored, &in); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		stored []storedCommand
		text   string
	}{{"commands", in.Comment.Commands, body}, {"old commands", in.Comment.OldCommands, old}} {
		got, want := loadCommands(c.stored), s.Commands.Parse(c.text, opt)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d read back, want %d", c.name, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("%s[%d] = %+v, want %+v", c.name, i, got[i], want[i])
			}
		}
	}
	if c := in.Comment; c.PR != 7 || c.ID == 0 || c.Author.Login == "" || c.Sender.Login == "" || c.Action != "edited" {
		t.Fatalf("comment record = %+v", c)
	}
}

func TestClassifyRejects(t *testing.T) {
	s := serveAll()
	if _, _, err := s.Classify("pull_request", "d-1", []byte(`{"action":`)); err == nil {
		t.Fatal("Classify accepted a body that is not JSON")
	}
	s.Repo = func(string) (string, bool) { return "", false }
	d, ignored, err := s.Classify("pull_request", "d-1", fixtures.Webhook(t, "pull_request", "opened"))
	if err != nil || d != nil || !strings.HasPrefix(ignored, IgnoredRepo+": ") || !strings.Contains(ignored, `"Codertocat/Hello-World"`) {
		t.Fatalf("Classify of a repository not served = %v, %q, %v; want ignored %q", d, ignored, err, IgnoredRepo)
	}
}

// What recovery knew of a comment (the head when it was posted) is read
// only from recovery's own deliveries: a webhook body carrying the field
// says nothing.
func TestRecoveryFieldOnlyFromRecovery(t *testing.T) {
	s := serveAll()
	raw := edit(t, onPR(t, "created", "/reuse-sweep-run 5"), func(m map[string]any) {
		m["opsbot_recovery"] = map[string]any{"head_sha": strings.Repeat("a", 40)}
	})
	for id, want := range map[string]string{"d-1": "", RecoveryIDPrefix + "comment-1": strings.Repeat("a", 40)} {
		d, _, err := s.Classify("issue_comment", id, raw)
		if err != nil || d == nil {
			t.Fatalf("Classify(%s) = %v, %v", id, d, err)
		}
		var in ingested
		if err := json.Unmarshal(d.Parsed, &in); err != nil {
			t.Fatal(err)
		}
		if in.Comment.ExpectHead != want {
			t.Errorf("delivery %s: expected head %q, want %q", id, in.Comment.ExpectHead, want)
		}
	}
}

// The events a sequence kind routes (seq.Kind.Routes) are used only
// with it: without, they are ignored and not subscribed to; with, their
// completions are classified by the PR their head is, and the rest ignored.
// A route that could not work is refused by the kind's name.
func TestRoutedEventsAreUsedOnlyWhenAKindRoutesThem(t *testing.T) {
	kind := seq.Kind{Name: "k", Routes: []seq.Route{seq.On(EventCheckSuite), seq.On(EventStatus)}}
	if got := Used(false); slices.Contains(got, EventCheckSuite) {
		t.Fatalf("Used(false) = %v: check_suite without a kind routing it", got)
	}
	if got := Used(false, kind); !slices.Contains(got, EventCheckSuite) || !slices.Contains(got, EventStatus) ||
		slices.Contains(got, EventCheckRun) {
		t.Fatalf("Used(false, kind) = %v: want check_suite and status, not check_run", got)
	}
	for _, c := range []struct {
		route seq.Route
		want  string
	}{
		{seq.On("check_suites"), `routes the event "check_suites": not one of GitHub's webhook events about a repository`},
		{seq.Route{Event: "pull_request_reviews", Find: seq.PRNumber, Label: "x", Why: "y"}, "not one of GitHub's webhook events"},
		{seq.Route{Event: "installation", Find: seq.PRNumber, Label: "x", Why: "y"}, "not one of GitHub's webhook events"},
		{seq.Route{Event: "pull_request_review", Label: "x", Why: "y"}, "the route has no Find, no other kind's has one, and opsbot finds the PR itself only of check_suite, check_run, status, workflow_run"},
		{seq.On(EventPull), "opsbot takes every pull_request delivery already"},
		{seq.On(EventComment), "opsbot takes every issue_comment delivery already"},
		{seq.On("Pull Request"), "not one of GitHub's webhook events"},
		{seq.Route{Event: EventCheckSuite, Find: seq.PRNumber}, "opsbot finds the PR of a check_suite delivery itself: leave Find nil"},
		{seq.On(EventMergeGroup), "the route has no Find"},
		{seq.Route{Event: "pull_request_review", Find: seq.PRNumber}, "needs its Label"},
	} {
		_, err := NewRoutes(false, seq.Kind{Name: "k", Routes: []seq.Route{c.route}})
		if err == nil || !strings.Contains(err.Error(), "sequence kind k") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewRoutes(a route of %q) = %v, want it refused naming the kind and %q", c.route.Event, err, c.want)
		}
	}
	// One Find an event: a second kind's would never see what the first's
	// filters out. A kind routing one event twice would record it twice.
	review := seq.Route{Event: "pull_request_review", Find: seq.PRNumber, Label: "Pull request reviews", Why: "w"}
	if _, err := NewRoutes(false, seq.Kind{Name: "a", Routes: []seq.Route{review}}, seq.Kind{Name: "b", Routes: []seq.Route{review}}); err == nil ||
		!strings.Contains(err.Error(), "sequence kind b routes the event \"pull_request_review\": sequence kind a finds its PR already") {
		t.Errorf("two Finds for one event: %v", err)
	}
	if _, err := NewRoutes(false, seq.Kind{Name: "a", Routes: []seq.Route{seq.On(EventStatus), seq.On(EventStatus)}}); err == nil ||
		!strings.Contains(err.Error(), "routes it twice") {
		t.Errorf("one kind routing status twice: %v", err)
	}
	if _, err := NewRoutes(false, seq.Kind{Name: "a", Routes: []seq.Route{review}}, seq.Kind{Name: "b", Routes: []seq.Route{{Event: review.Event}}}); err != nil {
		t.Errorf("a second kind taking the first's Find: %v", err)
	}
	// A route of pull_request only records (opsbot takes every delivery of
	// it already): a Record alone is taken, a Find is not.
	record := func(context.Context, *config.Repo, seq.Delivered) (string, seq.Write, error) { return "", nil, nil }
	if _, err := NewRoutes(false, seq.Kind{Name: "a", Routes: []seq.Route{{Event: EventPull, Record: record}}}); err != nil {
		t.Errorf("a pull_request route that only records: %v", err)
	}
	if _, err := NewRoutes(false, seq.Kind{Name: "a", Routes: []seq.Route{{Event: EventPull, Record: record, Find: seq.PRNumber}}}); err == nil ||
		!strings.Contains(err.Error(), "a route of it only records") {
		t.Errorf("a pull_request route with a Find: %v", err)
	}
	routes, err := NewRoutes(false, kind)
	if err != nil {
		t.Fatal(err)
	}
	// A button needs the finished sweep that offers it and the click,
	// whether or not a kind waits for either.
	if got := Used(true); !slices.Contains(got, EventCheckRun) || !slices.Contains(got, EventWorkflowRun) || slices.Contains(got, EventCheckSuite) {
		t.Fatalf("Used(buttons) = %v: want check_run and workflow_run, not check_suite", got)
	}
	s := serveAll()
	body := fixtures.Webhook(t, "check_suite", "completed")
	if _, ignored, _ := s.Classify(EventCheckSuite, "d-1", body); ignored != IgnoredUndeclared {
		t.Fatalf("unrouted check_suite ignored = %q, want %q", ignored, IgnoredUndeclared)
	}
	s.Routes = routes
	s.Heads = func(repo, sha string) ([]int, error) { return []int{42}, nil }
	d, ignored, err := s.Classify(EventCheckSuite, "d-1", body)
	if err != nil || d == nil || d.PR != 42 {
		t.Fatalf("routed check_suite completed = %+v, %q, %v; want stored for PR 42", d, ignored, err)
	}
	if _, ignored, _ := s.Classify(EventCheckSuite, "d-2", fixtures.Webhook(t, "check_suite", "requested")); ignored != IgnoredNotCompleted {
		t.Fatalf("check_suite requested ignored = %q, want %q", ignored, IgnoredNotCompleted)
	}
}
