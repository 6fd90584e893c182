package stage_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const repo = "SemiAnalysisAI/InferenceX"

// Deleting the comment of a stage request not yet dispatched plans its
// withdrawal (which finds the request again in the transaction); a request
// already finished, or another comment's, plans nothing.
func TestTakeBackPlans(t *testing.T) {
	cfg, err := config.Parse([]byte("repos: [{name: " + repo + ", sweep_workflow: .github/workflows/run-sweep.yml, " +
		"stage: {dispatch: {repo: acme/site}}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfg.Repo(repo)
	st := &commandstest.Tx{}
	req := record.StageRequest{Repo: repo, PR: 1, RunID: 10, Requester: "maintainer", RequesterID: 7, Installation: 1,
		State: record.StageRequested, AckNotice: 3, DispatchNotice: 4, CommandLine: "/stage-results 10"}
	req.SetOrigin(record.Origin{Kind: record.OriginComment, ID: 100, URL: "https://github.com/" + repo + "/pull/1#issuecomment-100"})
	if err := st.AddStageRequest(&req); err != nil {
		t.Fatal(err)
	}
	h := &stage.Handler{}
	reg := commandstest.Registry(h.Module())
	spec, _ := reg.Spec(stage.Name)
	env := commands.Env{Repo: rc, Commands: reg, Checker: &auth.Checker{TTL: time.Minute, Now: time.Now}, Notices: &notices.Notifier{},
		Users: &auth.Directory{}, State: st}
	maintainer := auth.Actor{ID: 7, Login: "maintainer", Type: "User"}
	change := func(id int64) commands.Change {
		return commands.Change{Deleted: true, Spec: spec, Comment: commands.Comment{Author: maintainer,
			Invocation: commands.Invocation{Repo: repo, PR: 1, Installation: 1, Actor: maintainer,
				Origin: commands.Origin{Kind: commands.OriginComment, ID: id}}}}
	}

	p, err := h.TakeBack(t.Context(), env, change(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Require) != 0 {
		t.Fatalf("facts %+v: the withdrawal reads the request again in the transaction", p.Require)
	}
	if len(p.Steps) != 1 {
		t.Fatalf("steps %+v", p.Steps)
	}
	w, ok := p.Steps[0].(plan.WithdrawStage)
	if !ok || !w.Allowed || w.Request.Seq != req.Seq || w.Told.Of != 3 || !strings.Contains(w.Told.Body, "was cancelled before the staging side was asked") ||
		w.Cancelled.Outcome != string(record.StageCancelled) || w.Sent.Outcome != "not_cancelled" {
		t.Fatalf("step %+v", p.Steps[0])
	}

	// Another comment's deletion changes nothing, so long as that comment
	// still has no request.
	p, err = h.TakeBack(t.Context(), env, change(101))
	if want := (plan.Plan{Require: []plan.Fact{plan.StageRequest{Repo: repo, CommentID: 101}}}); err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("another comment's deletion plans %+v, %v; want %+v", p, err, want)
	}
	st.Stages[0].State = record.StageStaged
	if p, err := h.TakeBack(t.Context(), env, change(100)); err != nil || !p.Empty() {
		t.Fatalf("a staged request's deletion plans %+v, %v", p, err)
	}
}

// A staging side's report is decided on the request as read: the report
// step names the state it was made on, a report without the request's
// token is refused in the audit alone, and a success in the shared slot
// takes the slot with the staged URL in its words.
func TestCallbackPlans(t *testing.T) {
	cfg, err := config.Parse([]byte("repos: [{name: " + repo + ", sweep_workflow: .github/workflows/run-sweep.yml, " +
		"stage: {dispatch: {repo: acme/site}, slot: shared, url_template: 'https://staging.example.com/r{{.RunID}}'}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := &commandstest.Tx{}
	req := record.StageRequest{Repo: repo, PR: 1, RunID: 10, Requester: "maintainer", State: record.StageRequested, AckNotice: 3, Token: "secret"}
	req.SetOrigin(record.Origin{Kind: record.OriginComment, ID: 100})
	if err := st.AddStageRequest(&req); err != nil {
		t.Fatal(err)
	}
	h := &stage.Handler{Cfg: config.NewLive(cfg), Notices: &notices.Notifier{}, Log: slog.New(slog.DiscardHandler)}
	report := func(token string) *github.RepositoryDispatchEvent {
		payload, _ := json.Marshal(map[string]string{"comment-id": "100", "run-id": "10", "pr-number": "1", "stage-succeeded": "true",
			"request-token": token})
		return &github.RepositoryDispatchEvent{Action: github.String("stage-results-completed"), ClientPayload: payload,
			Sender: &github.User{Login: github.String("stager"), ID: github.Int64(55)}}
	}
	_, p, err := h.Callback(t.Context(), st, repo, report("forged"))
	if err != nil || len(p.Require) != 0 || len(p.Steps) != 1 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	if a, ok := p.Steps[0].(plan.Audit); !ok || a.Record.Outcome != "refused" || !strings.Contains(a.Record.Reason, "does not carry the request's token") {
		t.Fatalf("a forged report plans %+v", p.Steps[0])
	}

	_, p, err = h.Callback(t.Context(), st, repo, report("secret"))
	if err != nil || len(p.Steps) != 1 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	r, ok := p.Steps[0].(plan.ReportStage)
	if !ok || !r.TakesSlot || r.From != record.StageRequested || r.Request.State != record.StageStaged || r.Request.URL != "https://staging.example.com/r10" ||
		r.Told.Of != 3 || !strings.Contains(r.Told.Body, "staged run") || r.Audit.Outcome != string(record.StageStaged) {
		t.Fatalf("a report plans %+v", p.Steps[0])
	}
	if st.Stages[0].State != record.StageRequested {
		t.Fatalf("planning changed the stored request: %+v", st.Stages[0])
	}
}

// lookup answers role checks: err, or role for every login.
type lookup struct {
	role string
	err  error
}

func (l *lookup) Permission(_ context.Context, _, login string) (auth.PermissionResponse, error) {
	if l.err != nil {
		return auth.PermissionResponse{}, l.err
	}
	r := auth.PermissionResponse{Permission: l.role, RoleName: l.role}
	return r, nil
}
func (l *lookup) TeamMember(context.Context, string, string) (bool, error) { return false, l.err }
func (l *lookup) UserID(context.Context, string) (int64, error)            { return 0, l.err }

// A stage request's comment deleted by someone else whose role GitHub
// cannot tell is neither withdrawn nor kept: the take-back is an error, the
// deletion's write changes nothing (the delivery is tried again), and once
// the role is known the deletion is decided.
func TestTakeBackWhoseRoleCannotBeCheckedIsRetried(t *testing.T) {
	cfg, err := config.Parse([]byte("repos: [{name: " + repo + ", sweep_workflow: .github/workflows/run-sweep.yml, " +
		"stage: {dispatch: {repo: acme/site}}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := cfg.Repo(repo)
	st := &commandstest.Tx{}
	req := record.StageRequest{Repo: repo, PR: 1, RunID: 10, Requester: "maintainer", RequesterID: 7, Installation: 1,
		State: record.StageRequested, AckNotice: 3, DispatchNotice: 4, CommandLine: "/stage-results 10"}
	req.SetOrigin(record.Origin{Kind: record.OriginComment, ID: 100, URL: "https://github.com/" + repo + "/pull/1#issuecomment-100"})
	if err := st.AddStageRequest(&req); err != nil {
		t.Fatal(err)
	}
	h := &stage.Handler{}
	reg := commandstest.Registry(h.Module())
	spec, _ := reg.Spec(stage.Name)
	gh := &lookup{err: errors.New("GET /repos/o/r/collaborators/deleter/permission: 502 Bad Gateway")}
	env := commands.Env{Repo: rc, Commands: reg, Checker: &auth.Checker{TTL: time.Minute, Now: time.Now}, Lookup: gh,
		Notices: &notices.Notifier{}, Users: &auth.Directory{}, State: st, Log: slog.New(slog.DiscardHandler)}
	maintainer := auth.Actor{ID: 7, Login: "maintainer", Type: "User"}
	deleter := auth.Actor{ID: 8, Login: "deleter", Type: "User"}
	comment := commands.Comment{Author: maintainer, Invocation: commands.Invocation{Repo: repo, PR: 1, Installation: 1, Actor: deleter,
		Origin: commands.Origin{Kind: commands.OriginComment, ID: 100}}}

	p, err := h.TakeBack(t.Context(), env, commands.Change{Deleted: true, Spec: spec, Comment: comment})
	if !errors.Is(err, stage.ErrTakeBackUnchecked) || !p.Empty() {
		t.Fatalf("a take-back whose role could not be checked = %+v, %v; want no plan and ErrTakeBackUnchecked", p, err)
	}
	if !strings.Contains(err.Error(), "502 Bad Gateway") || !strings.Contains(err.Error(), "@deleter") {
		t.Fatalf("the error does not say whose role and why: %v", err)
	}
	// Through the dispatcher: the deletion's write fails, so the delivery
	// is retried, and writes nothing.
	_, w := commands.Deleted(t.Context(), env, comment)
	if err := w(st); !errors.Is(err, stage.ErrTakeBackUnchecked) {
		t.Fatalf("the deletion's write = %v, want ErrTakeBackUnchecked (retried)", err)
	}
	if st.Stages[0].State != record.StageRequested || len(st.Records) != 0 || len(st.Notices) != 0 {
		t.Fatalf("an unchecked deletion changed the request %+v, audited %+v, sent %+v", st.Stages[0], st.Records, st.Notices)
	}

	// GitHub answers on the retry: a reader may not withdraw it (kept,
	// audited); a writer may.
	for _, c := range []struct {
		role    string
		allowed bool
	}{{"read", false}, {"write", true}} {
		gh.err, gh.role = nil, c.role
		env.Checker = &auth.Checker{TTL: time.Minute, Now: time.Now}
		p, err := h.TakeBack(t.Context(), env, commands.Change{Deleted: true, Spec: spec, Comment: comment})
		if err != nil || len(p.Steps) != 1 {
			t.Fatalf("%s: %+v, %v", c.role, p, err)
		}
		if ws, ok := p.Steps[0].(plan.WithdrawStage); !ok || ws.Allowed != c.allowed {
			t.Fatalf("%s: step %+v, want a withdrawal allowed=%v", c.role, p.Steps[0], c.allowed)
		}
	}
}
