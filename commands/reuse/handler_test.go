package reuse_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const repo = "SemiAnalysisAI/InferenceX"

// roles answers permission lookups from a table.
type roles map[string]string

func (r roles) Permission(_ context.Context, _, login string) (auth.PermissionResponse, error) {
	role, ok := r[login]
	if !ok {
		return auth.PermissionResponse{}, errors.New("permission lookup: 502 Bad Gateway")
	}
	return auth.PermissionResponse{Permission: role, RoleName: role}, nil
}
func (r roles) TeamMember(context.Context, string, string) (bool, error) { return false, nil }
func (r roles) UserID(context.Context, string) (int64, error) {
	return 0, errors.New("no user lookups here")
}

// validator knows runs by id; the newest is the highest.
type validator map[int64]runs.Run

func (v validator) Validate(_ context.Context, _ runs.Rules, _ int, id int64) (runs.Run, error) {
	r, ok := v[id]
	if !ok {
		return runs.Run{}, &runs.Rejection{Rule: "exists", Reason: "run is not a sweep run of this repository"}
	}
	return r, nil
}
func (v validator) Newest(ctx context.Context, rl runs.Rules, pr int) (runs.Run, error) {
	var best int64
	for id := range v {
		best = max(best, id)
	}
	return v.Validate(ctx, rl, pr, best)
}

var (
	maintainer = auth.Actor{ID: 7, Login: "maintainer", Type: "User"}
	outsider   = auth.Actor{ID: 8, Login: "outsider", Type: "User"}
)

func env(t *testing.T, st record.Reader) commands.Env {
	t.Helper()
	cfg, err := config.Parse([]byte("repos: [{name: " + repo + ", sweep_workflow: .github/workflows/run-sweep.yml}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfg.Repo(repo)
	runs := validator{10: {ID: 10, HeadSHA: "c1", Conclusion: "success", PRHead: "c2", URL: "https://github.com/" + repo + "/actions/runs/10"}}
	pins := &reuse.Handler{Validators: func(int64) (reuse.Validator, error) { return runs, nil }}
	return commands.Env{Repo: rc, Commands: commandstest.Registry(pins.Module()), Checker: &auth.Checker{TTL: time.Minute, Now: time.Now},
		Lookup: roles{"maintainer": "maintain", "outsider": "read"}, Notices: &notices.Notifier{}, Users: &auth.Directory{}, State: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func comment(e commands.Env, id int64, a auth.Actor, body string) commands.Comment {
	return commands.Comment{Invocation: commands.Invocation{Repo: repo, PR: 1, PRState: "open", Actor: a, Installation: 1,
		Origin: commands.Origin{Kind: commands.OriginComment, ID: id, URL: "https://github.com/" + repo + "/pull/1#issuecomment-1"}},
		Commands: e.Commands.Parse(body, e.Options()), Author: a}
}

func trail(tx *commandstest.Tx) string {
	var out []string
	for _, r := range tx.Records {
		out = append(out, string(r.Kind)+"/"+r.Outcome)
	}
	return strings.Join(out, ",")
}

func said(tx *commandstest.Tx) (comments, reactions []string) {
	for _, n := range tx.Notices {
		switch n.Kind {
		case record.NoticeComment:
			comments = append(comments, n.Body)
		case record.NoticeReaction:
			reactions = append(reactions, n.Reaction)
		}
	}
	return comments, reactions
}

// The handler's write, run on a transaction in memory: no store, no bbolt.
// A maintainer's pin is granted from its origin, audited and answered; an
// outsider deleting the comment keeps the pin and says so; the author
// deleting it revokes it.
func TestPinGrantedAndTakenBackWithoutAStore(t *testing.T) {
	tx := &commandstest.Tx{}
	e := env(t, tx)
	_, w := commands.Created(t.Context(), e, comment(e, 100, maintainer, "/reuse-sweep-run 10"))
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	p, _ := tx.ActivePin(repo, 1)
	if p == nil || p.RunID != 10 || p.PRHeadAtGrant != "c2" || !p.Origin().Same(record.Origin{Kind: record.OriginComment, ID: 100}) ||
		p.CommentLine != "/reuse-sweep-run 10" {
		t.Fatalf("active pin = %+v, want run 10 at head c2 from comment 100", p)
	}
	comments, reactions := said(tx)
	if len(comments) != 1 || !strings.Contains(comments[0], "pinned run [10]") || strings.Join(reactions, ",") != "+1" {
		t.Fatalf("comments %q, reactions %q", comments, reactions)
	}
	if got := trail(tx); got != "command/accepted,pin/active" {
		t.Fatalf("audit %s", got)
	}
	if r := tx.Records[0]; r.RunID != 10 || r.HeadSHA != "c2" || r.CommentID != 100 || r.ActorID != maintainer.ID || r.Role != "maintain" {
		t.Fatalf("command record %+v", r)
	}

	// An outsider deleting it (someone else's comment) cannot take it back.
	byOutsider := comment(e, 100, maintainer, "/reuse-sweep-run 10")
	byOutsider.Actor = outsider
	_, w = commands.Deleted(t.Context(), e, byOutsider)
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	if p, _ := tx.ActivePin(repo, 1); p == nil {
		t.Fatal("an outsider's deletion revoked the pin")
	}
	if got := trail(tx); got != "command/accepted,pin/active,pin/kept" {
		t.Fatalf("audit %s", got)
	}
	// A deletion of another comment leaves it; the author's revokes it.
	_, w = commands.Deleted(t.Context(), e, comment(e, 101, maintainer, ""))
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	if p, _ := tx.ActivePin(repo, 1); p == nil {
		t.Fatal("deleting another comment revoked the pin")
	}
	_, w = commands.Deleted(t.Context(), e, comment(e, 100, maintainer, "/reuse-sweep-run 10"))
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	if p, _ := tx.ActivePin(repo, 1); p != nil {
		t.Fatalf("the author's deletion left pin %+v", p)
	}
	if got := trail(tx); got != "command/accepted,pin/active,pin/kept,pin/revoked" {
		t.Fatalf("audit %s", got)
	}
}

// An outsider's pin is denied with a reaction only, and a run that fails a
// rule is refused with the rule's reason: neither writes a pin.
func TestPinRefusalsWithoutAStore(t *testing.T) {
	tx := &commandstest.Tx{}
	e := env(t, tx)
	_, w := commands.Created(t.Context(), e, comment(e, 100, outsider, "/reuse-sweep-run 10"))
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	_, w = commands.Created(t.Context(), e, comment(e, 101, maintainer, "/use 11"))
	if err := w(tx); err != nil {
		t.Fatal(err)
	}
	if p, _ := tx.ActivePin(repo, 1); p != nil {
		t.Fatalf("pin %+v", p)
	}
	comments, reactions := said(tx)
	if len(comments) != 1 || !strings.Contains(comments[0], "I did not pin run 11: run is not a sweep run of this repository") ||
		strings.Join(reactions, ",") != "-1,-1" {
		t.Fatalf("comments %q, reactions %q", comments, reactions)
	}
	if got := trail(tx); got != "command/denied,command/rejected" {
		t.Fatalf("audit %s", got)
	}
}

// line is the first command of body as the dispatcher hands it to the
// handler, allowed with the maintainer's role.
func line(t *testing.T, e commands.Env, body string) commands.Line {
	t.Helper()
	cmds := e.Commands.Parse(body, e.Options())
	if len(cmds) != 1 || cmds[0].Error != "" {
		t.Fatalf("parse %q = %+v", body, cmds)
	}
	spec, _ := e.Commands.Spec(cmds[0].Name)
	return commands.Line{Command: cmds[0], Spec: spec, Verdict: auth.Verdict{Allowed: true, Role: auth.RoleMaintain}}
}

// The handler returns its change as a plan: the fact it decided on (the
// PR's active pin as it read it) and typed steps, with the reply already
// worded. No transaction runs here.
func TestPinPlans(t *testing.T) {
	h := &reuse.Handler{Validators: func(int64) (reuse.Validator, error) {
		return validator{10: {ID: 10, HeadSHA: "c1", Conclusion: "success", PRHead: "c2", URL: "https://github.com/" + repo + "/actions/runs/10"}}, nil
	}}
	held := &commandstest.Tx{}
	old := record.Pin{Repo: repo, PR: 1, RunID: 9, RunURL: "https://github.com/" + repo + "/actions/runs/9", ActorID: 6, ActorLogin: "other", OriginRef: record.OriginRef{CommentID: 90}}
	if _, err := held.Grant(&old, record.PinChange{}); err != nil {
		t.Fatal(err)
	}
	in := comment(env(t, held), 100, maintainer, "").Invocation
	origin := record.Origin{Kind: record.OriginComment, ID: 100, URL: in.Origin.URL}

	t.Run("a pin over another", func(t *testing.T) {
		e := env(t, held)
		r := h.Prepare(t.Context(), e, in, line(t, e, "/reuse-sweep-run 10"))
		if r.Outcome != commands.Accepted || r.Err != nil {
			t.Fatalf("result %+v", r)
		}
		want := record.Pin{Repo: repo, PR: 1, RunID: 10, RunSHA: "c1", RunURL: "https://github.com/" + repo + "/actions/runs/10",
			RunConclusion: "success", PRHeadAtGrant: "c2", ActorID: 7, ActorLogin: "maintainer", Role: "maintain",
			CommentLine: "/reuse-sweep-run 10"}
		want.SetOrigin(origin)
		ch := record.PinChange{ActorID: 7, ActorLogin: "maintainer"}
		ch.SetOrigin(origin)
		wantPlan := plan.Plan{Require: []plan.Fact{plan.ActivePin{Repo: repo, PR: 1, ID: old.ID}},
			Steps: []plan.Step{plan.GrantPin{Pin: want, Change: ch}}}
		if !reflect.DeepEqual(r.Plan, wantPlan) {
			t.Fatalf("plan\n%+v\nwant\n%+v", r.Plan, wantPlan)
		}
		if !strings.Contains(r.Reply, "pinned run [10]") || !strings.Contains(r.Reply, "replaces the pin of run [9]") {
			t.Fatalf("reply %q", r.Reply)
		}
	})
	t.Run("cancel with no pin", func(t *testing.T) {
		e := env(t, &commandstest.Tx{})
		r := h.Prepare(t.Context(), e, in, line(t, e, "/reuse-sweep-run cancel"))
		want := plan.Plan{Require: []plan.Fact{plan.ActivePin{Repo: repo, PR: 1}}}
		if !reflect.DeepEqual(r.Plan, want) || !strings.Contains(r.Reply, "no active pin on this PR to cancel") {
			t.Fatalf("plan %+v, reply %q", r.Plan, r.Reply)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		e := env(t, held)
		r := h.Prepare(t.Context(), e, in, line(t, e, "/reuse-sweep-run cancel"))
		if len(r.Plan.Steps) != 1 {
			t.Fatalf("plan %+v", r.Plan)
		}
		step, ok := r.Plan.Steps[0].(plan.ClosePin)
		if !ok || step.Pin.ID != old.ID || step.To != record.PinRevoked || step.Change.Reason != "cancelled by @maintainer" ||
			!strings.Contains(r.Reply, "revoked the pin of run [9]") {
			t.Fatalf("step %+v, reply %q", r.Plan.Steps[0], r.Reply)
		}
	})
	t.Run("an outsider deleting the pin's comment", func(t *testing.T) {
		e := env(t, held)
		spec, _ := e.Commands.Spec(reuse.Name)
		c := comment(e, old.CommentID, maintainer, "") // the maintainer's comment, deleted by an outsider
		c.Actor, c.Origin = outsider, old.Origin()
		p, err := h.TakeBack(t.Context(), e, commands.Change{Comment: c, Deleted: true, Spec: spec})
		if err != nil || len(p.Steps) != 2 {
			t.Fatalf("plan %+v, %v", p, err)
		}
		kept, ok := p.Steps[0].(plan.Audit)
		reply, ok2 := p.Steps[1].(plan.Reply)
		if !ok || !ok2 || kept.Record.Outcome != record.Kept || reply.ActorID != outsider.ID ||
			!strings.Contains(reply.Comment.Body, "so the pin stays") {
			t.Fatalf("steps %+v", p.Steps)
		}
	})
}

// A comment's whole write is one plan: the comment must still be as seen,
// it runs once, each line is audited and its own plan follows, then the
// one answer (the reply within the budget, the reaction). An outsider's
// command plans a quiet answer under the outsider reaction budget.
func TestCommentPlan(t *testing.T) {
	tx := &commandstest.Tx{}
	e := env(t, tx)
	out, p, err := commands.PlanCreated(t.Context(), e, comment(e, 100, maintainer, "/reuse-sweep-run 10"))
	if err != nil || out != "commands" {
		t.Fatalf("PlanCreated = %q, %v", out, err)
	}
	if want := []plan.Fact{plan.CommentMark{Repo: repo, CommentID: 100}}; !reflect.DeepEqual(p.Require, want) {
		t.Fatalf("facts %+v", p.Require)
	}
	if len(p.Steps) != 4 {
		t.Fatalf("steps %+v", p.Steps)
	}
	once, _ := p.Steps[0].(plan.Once)
	audit, _ := p.Steps[1].(plan.Audit)
	pin, _ := p.Steps[2].(plan.Plan)
	answer, _ := p.Steps[3].(plan.Answer)
	if once.CommentID != 100 || audit.Record.Outcome != string(commands.Accepted) || audit.Record.RunID != 10 || len(pin.Steps) != 1 {
		t.Fatalf("steps %+v", p.Steps)
	}
	if _, ok := pin.Steps[0].(plan.GrantPin); !ok || !answer.Plus || answer.Minus || answer.Reply == nil ||
		!strings.Contains(answer.Reply.Body, "pinned run [10]") || answer.ActorID != maintainer.ID {
		t.Fatalf("pin %+v, answer %+v", pin, answer)
	}
	// Applied twice (a commit retried), it grants one pin and answers once.
	for range 2 {
		if err := plan.Apply(tx, e.Notices.Teller(), p); err != nil {
			t.Fatal(err)
		}
	}
	if comments, reactions := said(tx); len(comments) != 1 || strings.Join(reactions, ",") != "+1" || len(tx.PinList) != 1 {
		t.Fatalf("comments %q, reactions %q, pins %d", comments, reactions, len(tx.PinList))
	}

	_, p, err = commands.PlanCreated(t.Context(), e, comment(e, 101, outsider, "/reuse-sweep-run 10"))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ = p.Steps[len(p.Steps)-1].(plan.Answer)
	if !answer.Quiet || !answer.Minus || answer.Plus || answer.Reply != nil || answer.Outsider.PerUser == 0 {
		t.Fatalf("an outsider's answer %+v", answer)
	}
}
