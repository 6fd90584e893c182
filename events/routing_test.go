package events_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testrig"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

const repo = testrig.Repo

type erig struct {
	h     *events.Handler
	store *state.Store
	gh    *githubtest.Fake
}

func newERig(t *testing.T) *erig {
	t.Helper()
	tr := testrig.New(t, state.Options{})
	cfg, st, gh, fac := tr.Cfg, tr.Store, tr.GH, tr.Factory
	gh.AddUser("maintainer", 7, "User")
	gh.SetRole(repo, "maintainer", "maintain")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := &notices.Notifier{}
	clients := ghclient.NewClients(fac, st)
	validators := &runs.Validators{Clients: clients}
	g := &gate.Gate{Cfg: config.NewLive(cfg), Store: st, Notifier: n, Log: log, Validators: validators.For}
	pins := &reuse.Handler{Validators: func(inst int64) (reuse.Validator, error) { return validators.For(inst) }}
	h := &events.Handler{Cfg: config.NewLive(cfg), Log: log, Clients: clients, Commands: commandstest.Registry(pins.Module()), Checker: &auth.Checker{TTL: time.Minute, Now: time.Now},
		Gate: g, Notices: n, SelfID: githubtest.BotID, SelfName: githubtest.BotLogin, Users: &auth.Directory{}, State: st}
	return &erig{h: h, store: st, gh: gh}
}

// delivery is a real payload of event/action, changed at the given paths
// (a nil value removes one).
func delivery(t *testing.T, event, action string, set map[string]any) *state.Delivery {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixtures.Webhook(t, event, action), &m); err != nil {
		t.Fatal(err)
	}
	if action != "" {
		m["action"] = action
	}
	for path, v := range set {
		at := m
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			next, ok := at[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[p] = next
			}
			at = next
		}
		if v == nil {
			delete(at, parts[len(parts)-1])
		} else {
			at[parts[len(parts)-1]] = v
		}
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d := &state.Delivery{ID: "d-" + event + "-" + action, Event: event, Action: action, Repo: repo, PR: 1, Body: body}
	if event != events.EventComment {
		return d
	}
	// A comment reaches the worker as ingest classified it, its parse
	// recorded; one ingest ignores (not on a PR) is given the empty parse
	// the inbox upgrade gives it.
	s := &events.Schema{Repo: func(n string) (string, bool) { return n, true }, Commands: commandstest.Registry()}
	c, _, err := s.Classify(event, d.ID, body)
	if err != nil {
		t.Fatal(err)
	}
	if c == nil {
		d.Parsed = json.RawMessage("{}")
		return d
	}
	return c
}

// onPR is a comment on PR 1 by login (id) with body.
func onPR(login string, id int64, body string) map[string]any {
	return map[string]any{
		"repository.full_name": repo, "issue.number": 1, "issue.state": "open",
		"issue.pull_request": map[string]any{"url": "https://api.github.com/repos/" + repo + "/pulls/1"},
		"comment.id":         500, "comment.body": body,
		"comment.user": map[string]any{"login": login, "id": id, "type": "User"},
		"sender":       map[string]any{"login": login, "id": id, "type": "User"},
		"installation": map[string]any{"id": 1},
	}
}

func pull(action string, set map[string]any) map[string]any {
	m := map[string]any{"repository.full_name": repo, "number": 1, "pull_request.number": 1,
		"pull_request.head.sha": "c2", "pull_request.state": "open", "installation": map[string]any{"id": 1},
		"pull_request.labels": []any{map[string]any{"name": "full-sweep-enabled"}}}
	for k, v := range set {
		m[k] = v
	}
	return m
}

func (r *erig) pin(t *testing.T) {
	t.Helper()
	if err := r.store.Update(func(tx *state.Tx) error {
		_, err := tx.Grant(&state.Pin{Repo: repo, PR: 1, RunID: 10, RunSHA: "c1", PRHeadAtGrant: "c1", ActorID: 7, ActorLogin: "maintainer", OriginRef: state.OriginRef{CommentID: 500}}, state.PinChange{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// Each event and action reaches its handler; everything else is ignored
// with nothing written.
func TestRouting(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          func(t *testing.T, r *erig) *state.Delivery
		pinned     bool
		outcome    string
		wantWrite  bool
		wantPinned bool // after the write
	}{
		{name: "a command on a PR runs", outcome: "commands", wantWrite: true, wantPinned: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "issue_comment", "created", onPR("maintainer", 7, "/reuse-sweep-run 10"))
			}},
		{name: "a comment without a slash has no commands", outcome: "no-commands", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "issue_comment", "created", onPR("maintainer", 7, "lgtm"))
			}},
		{name: "a comment the server found no command in", outcome: "no-commands", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				d := delivery(t, "issue_comment", "created", onPR("maintainer", 7, "lgtm"))
				d.NoCommands, d.CommentID = true, 500
				return d
			}},
		{name: "opsbot's own comment is ignored", outcome: "ignored-self", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "issue_comment", "created", onPR(githubtest.BotLogin, githubtest.BotID, "/reuse-sweep-run 10"))
			}},
		{name: "a comment on an issue is ignored", outcome: "ignored-issue",
			d: func(t *testing.T, r *erig) *state.Delivery {
				set := onPR("maintainer", 7, "/reuse-sweep-run 10")
				set["issue.pull_request"] = nil
				return delivery(t, "issue_comment", "created", set)
			}},
		{name: "an edit that removes the pin's line revokes it", pinned: true, outcome: "edited", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				set := onPR("maintainer", 7, "never mind")
				set["changes.body.from"] = "/reuse-sweep-run 10"
				return delivery(t, "issue_comment", "edited", set)
			}},
		{name: "deleting the pin's comment revokes it", pinned: true, outcome: "deleted", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "issue_comment", "deleted", onPR("maintainer", 7, "/reuse-sweep-run 10"))
			}},
		{name: "another comment action is ignored", pinned: true, outcome: "ignored-action", wantPinned: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				set := onPR("maintainer", 7, "/reuse-sweep-run 10")
				set["action"] = "pinned"
				return delivery(t, "issue_comment", "created", set)
			}},
		{name: "a push is decided by the gate", pinned: true, outcome: "decision-skip", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				r.gh.Push(repo, 1, []string{"c2"})
				return delivery(t, "pull_request", "synchronize", pull("synchronize", nil))
			}},
		{name: "closing without merging expires the pin", pinned: true, outcome: "closed", wantWrite: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "pull_request", "closed", pull("closed", map[string]any{"pull_request.state": "closed", "pull_request.merged": false}))
			}},
		{name: "a label is only recorded", pinned: true, outcome: "pr-labeled", wantWrite: true, wantPinned: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "pull_request", "labeled", pull("labeled", nil))
			}},
		{name: "a dispatch without staging is ignored", outcome: "ignored-dispatch",
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "repository_dispatch", "", map[string]any{"action": "stage-results", "repository.full_name": repo})
			}},
		{name: "another event is ignored", pinned: true, outcome: "ignored", wantPinned: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				return delivery(t, "issues", "opened", map[string]any{"repository.full_name": repo})
			}},
		{name: "another repository is ignored", pinned: true, outcome: "ignored-repo", wantPinned: true,
			d: func(t *testing.T, r *erig) *state.Delivery {
				d := delivery(t, "issue_comment", "created", onPR("maintainer", 7, "/reuse-sweep-run 10"))
				d.Repo = "acme/other"
				return d
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newERig(t)
			if tc.pinned {
				r.pin(t)
			}
			d := tc.d(t, r)
			outcome, w, err := r.h.Handle(t.Context(), d)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if outcome != tc.outcome || (w != nil) != tc.wantWrite {
				t.Fatalf("Handle = %q, write %v; want %q, write %v", outcome, w != nil, tc.outcome, tc.wantWrite)
			}
			if w != nil {
				if err := r.store.Update(w); err != nil {
					t.Fatal(err)
				}
			}
			p, err := r.store.ActivePin(repo, 1)
			if err != nil {
				t.Fatal(err)
			}
			if (p != nil) != tc.wantPinned {
				recs, _, _ := r.store.Audit(state.AuditQuery{Repo: repo, PR: 1})
				t.Fatalf("active pin after %s: %+v, want pinned %v (audit %+v)", tc.outcome, p, tc.wantPinned, recs)
			}
		})
	}
}

// A payload that does not decode is a permanent failure: retrying cannot help.
func TestUndecodablePayloadIsPermanent(t *testing.T) {
	r := newERig(t)
	for _, event := range []string{"issue_comment", "pull_request", "repository_dispatch"} {
		_, _, err := r.h.Handle(t.Context(), &state.Delivery{ID: "bad", Event: event, Repo: repo, Body: []byte("{not json")})
		if err == nil || !worker.IsPermanent(err) {
			t.Fatalf("%s: Handle = %v, want a permanent error", event, err)
		}
	}
}
