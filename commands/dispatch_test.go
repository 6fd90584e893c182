package commands_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testrig"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

const (
	repo     = testrig.Repo
	routeRun = "GET /repos/{owner}/{repo}/actions/runs/{id}"
)

// roles answers permission lookups from a table; a login it does not hold
// is a lookup GitHub did not answer.
type roles map[string]string

var _ auth.Lookup = roles(nil)

func (r roles) Permission(_ context.Context, _, login string) (auth.PermissionResponse, error) {
	role, ok := r[login]
	if !ok {
		return auth.PermissionResponse{}, errors.New("permission lookup: 502 Bad Gateway")
	}
	return auth.PermissionResponse{Permission: role, RoleName: role}, nil
}

func (r roles) TeamMember(context.Context, string, string) (bool, error) { return false, nil }

func (r roles) UserID(_ context.Context, login string) (int64, error) {
	for _, a := range []auth.Actor{maintainer, outsider, flaky} {
		if a.Login == login {
			return a.ID, nil
		}
	}
	return 0, errors.New("user lookup: 404 Not Found")
}

// parser reads comments with opsbot's commands.
var parser = commandstest.Registry()

// hrig is one repository's command handling over a temp store and the fake GitHub.
type hrig struct {
	env   commands.Env
	store *state.Store
	gh    *githubtest.Fake
}

var (
	maintainer = auth.Actor{ID: 7, Login: "maintainer", Type: "User"}
	outsider   = auth.Actor{ID: 8, Login: "outsider", Type: "User"}
	flaky      = auth.Actor{ID: 9, Login: "flaky", Type: "User"} // GitHub does not answer for this one
)

func newHRig(t *testing.T) *hrig {
	t.Helper()
	tr := testrig.New(t, state.Options{})
	rc, st, gh, c := tr.Repo, tr.Store, tr.GH, tr.Client
	gh.AddRun(repo, testrig.SweepRun(11, "c1"))
	pins := &reuse.Handler{Validators: func(int64) (reuse.Validator, error) { return &runs.Validator{GH: c}, nil }}
	env := commands.Env{Repo: rc, Commands: commandstest.Registry(pins.Module()), Checker: &auth.Checker{TTL: time.Minute, Now: time.Now},
		Lookup:  roles{"maintainer": "maintain", "outsider": "read"},
		Notices: &notices.Notifier{}, Users: &auth.Directory{}, State: st,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &hrig{env: env, store: st, gh: gh}
}

func comment(id int64, a auth.Actor, body string) commands.Comment {
	return commands.Comment{Invocation: commands.Invocation{Repo: repo, PR: 1, PRState: "open", Actor: a, Installation: 1,
		Origin: commands.Origin{Kind: commands.OriginComment, ID: id, URL: "https://github.com/" + repo + "/pull/1#issuecomment-1"}},
		Commands: parser.Parse(body, commands.Options{Repo: repo}), Author: a}
}

// edit is comment c as an edit of a comment that said old.
func edit(c commands.Comment, old string) commands.Comment {
	c.OldCommands = parser.Parse(old, commands.Options{Repo: repo})
	return c
}

// takenBackBy is comment id of the maintainer, edited or deleted by a.
func takenBackBy(id int64, a auth.Actor, body string) commands.Comment {
	c := comment(id, maintainer, body)
	c.Actor = a
	return c
}

// commit applies a handler's write as the delivery would.
func (r *hrig) commit(t *testing.T, w commands.Write) {
	t.Helper()
	if w == nil {
		t.Fatal("the handler returned no write")
	}
	if err := r.store.Update(func(tx *state.Tx) error { return w(tx) }); err != nil {
		t.Fatal(err)
	}
}

// outbox is what opsbot would tell GitHub: comment bodies and reactions.
func (r *hrig) outbox(t *testing.T) (comments, reactions []string) {
	t.Helper()
	ns, err := r.store.Outbox(state.ChannelGitHub)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		switch n.Kind {
		case state.NoticeComment, state.NoticeEdit:
			comments = append(comments, n.Body)
		case state.NoticeReaction:
			reactions = append(reactions, n.Reaction)
		}
	}
	return comments, reactions
}

// audit is the PR's audit trail as "kind/outcome" items, oldest first.
func (r *hrig) audit(t *testing.T) string {
	t.Helper()
	recs, _, err := r.store.Audit(state.AuditQuery{Repo: repo, PR: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		out = append(out, string(rec.Kind)+"/"+rec.Outcome)
	}
	return strings.Join(out, ",")
}

func (r *hrig) activePin(t *testing.T) *state.Pin {
	t.Helper()
	p, err := r.store.ActivePin(repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantAudit checks the PR's audit trail.
func (r *hrig) wantAudit(t *testing.T, want string) {
	t.Helper()
	if got := r.audit(t); got != want {
		t.Fatalf("audit = %s, want %s", got, want)
	}
}

// pinned is a rig where the maintainer pinned run 10 with comment 100.
func pinned(t *testing.T) *hrig {
	t.Helper()
	r := newHRig(t)
	_, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "/reuse-sweep-run 10"))
	r.commit(t, w)
	return r
}

func TestCreated(t *testing.T) {
	t.Run("a recovered comment whose PR head moved pins nothing", func(t *testing.T) {
		r := newHRig(t)
		c := comment(100, maintainer, "/reuse-sweep-run 10")
		c.ExpectHead = "c0" // the head when it was posted; the PR is at c1 now
		_, w := commands.Created(t.Context(), r.env, c)
		r.commit(t, w)
		if p := r.activePin(t); p != nil {
			t.Fatalf("active pin = %+v, want none", p)
		}
		comments, _ := r.outbox(t)
		if len(comments) != 1 || !strings.Contains(comments[0], "the PR's head has moved") {
			t.Fatalf("comments %q", comments)
		}
		r.wantAudit(t, "command/rejected")
	})
	t.Run("a comment edited since its commands were chosen is chosen again", func(t *testing.T) {
		r := newHRig(t)
		c := comment(100, maintainer, "/reuse-sweep-run 10")
		_, w := commands.Created(t.Context(), r.env, c)
		if err := r.store.Update(func(tx *state.Tx) error { return tx.NoteComment(repo, 100, true) }); err != nil {
			t.Fatal(err)
		}
		if err := r.store.Update(func(tx *state.Tx) error { return w(tx) }); !errors.Is(err, plan.ErrStale) {
			t.Fatalf("write after a deletion was noted = %v, want plan.ErrStale", err)
		}
		if p := r.activePin(t); p != nil {
			t.Fatalf("active pin = %+v, want none", p)
		}
	})
	t.Run("no command writes nothing", func(t *testing.T) {
		r := newHRig(t)
		if outcome, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "looks good to me")); outcome != "no-commands" || w != nil {
			t.Fatalf("Created = %q, write %v; want no-commands and no write", outcome, w != nil)
		}
	})
	t.Run("a maintainer's pin is recorded, acknowledged and replied to, once", func(t *testing.T) {
		r := newHRig(t)
		c := comment(100, maintainer, "/reuse-sweep-run 10")
		outcome, w := commands.Created(t.Context(), r.env, c)
		if outcome != "commands" {
			t.Fatalf("outcome = %q, want commands", outcome)
		}
		r.commit(t, w)
		p := r.activePin(t)
		if p == nil || p.RunID != 10 || p.ActorID != maintainer.ID || p.Origin().ID != 100 || p.PRHeadAtGrant != "c1" {
			t.Fatalf("active pin = %+v, want run 10 by the maintainer from comment 100 at head c1", p)
		}
		comments, reactions := r.outbox(t)
		if len(comments) != 1 || !strings.Contains(comments[0], "pinned run [10]") || strings.Join(reactions, ",") != "+1" {
			t.Fatalf("outbox: comments %q, reactions %q; want one pinned reply and +1", comments, reactions)
		}
		r.wantAudit(t, "command/accepted,pin/active")
		// The same comment delivered again (or replayed) runs nothing.
		_, again := commands.Created(t.Context(), r.env, c)
		r.commit(t, again)
		if comments, reactions := r.outbox(t); len(comments) != 1 || len(reactions) != 1 {
			t.Fatalf("a redelivered comment wrote again: comments %q, reactions %q", comments, reactions)
		}
		r.wantAudit(t, "command/accepted,pin/active")
	})
	t.Run("a second pin supersedes the first", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Created(t.Context(), r.env, comment(101, maintainer, "/reuse-sweep-run 11"))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 11 {
			t.Fatalf("active pin = %+v, want run 11", p)
		}
		comments, _ := r.outbox(t)
		if len(comments) != 2 || !strings.Contains(comments[1], "which is now superseded") {
			t.Fatalf("comments = %q, want the second to say the first pin is superseded", comments)
		}
		r.wantAudit(t, "command/accepted,pin/active,command/accepted,pin/superseded,pin/active")
	})
	t.Run("an outsider gets a reaction only", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Created(t.Context(), r.env, comment(100, outsider, "/reuse-sweep-run 10"))
		r.commit(t, w)
		comments, reactions := r.outbox(t)
		if len(comments) != 0 || strings.Join(reactions, ",") != "-1" || r.activePin(t) != nil {
			t.Fatalf("outsider: comments %q, reactions %q, pin %v; want -1 only and no pin", comments, reactions, r.activePin(t))
		}
		r.wantAudit(t, "command/denied")
	})
	t.Run("an unanswered permission check of a stranger denies with a reaction only", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Created(t.Context(), r.env, comment(100, flaky, "/reuse-sweep-run 10"))
		r.commit(t, w)
		comments, reactions := r.outbox(t)
		if len(comments) != 0 || strings.Join(reactions, ",") != "confused" || r.activePin(t) != nil {
			t.Fatalf("comments %q, reactions %q; want no reply, a confused reaction and no pin", comments, reactions)
		}
		r.wantAudit(t, "command/error")
	})
	t.Run("a run GitHub does not answer for is not pinned", func(t *testing.T) {
		r := newHRig(t)
		r.gh.Inject(routeRun, githubtest.Fault{Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`})
		_, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "/reuse-sweep-run 10"))
		r.commit(t, w)
		comments, reactions := r.outbox(t)
		want := "I did not pin run 10: GitHub did not answer while I checked it. Please try again in a minute."
		if len(comments) != 1 || !strings.Contains(comments[0], want) || strings.Join(reactions, ",") != "-1" || r.activePin(t) != nil {
			t.Fatalf("comments %q, reactions %q; want %q, -1 and no pin", comments, reactions, want)
		}
		r.wantAudit(t, "command/error")
	})
	t.Run("a run that fails a rule is rejected", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "/reuse-sweep-run 999"))
		r.commit(t, w)
		comments, reactions := r.outbox(t)
		if len(comments) != 1 || !strings.Contains(comments[0], "I did not pin run 999") || strings.Join(reactions, ",") != "-1" || r.activePin(t) != nil {
			t.Fatalf("comments %q, reactions %q; want a rejection, -1 and no pin", comments, reactions)
		}
		r.wantAudit(t, "command/rejected")
	})
	t.Run("a closed PR takes no pin", func(t *testing.T) {
		r := newHRig(t)
		c := comment(100, maintainer, "/reuse-sweep-run 10")
		c.PRState = "closed"
		_, w := commands.Created(t.Context(), r.env, c)
		r.commit(t, w)
		comments, _ := r.outbox(t)
		if len(comments) != 1 || !strings.Contains(comments[0], "this PR is closed") || r.activePin(t) != nil {
			t.Fatalf("comments %q; want a closed-PR reply and no pin", comments)
		}
		r.wantAudit(t, "command/rejected")
	})
	t.Run("the last pin in a comment wins", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "/reuse-sweep-run 10\n/reuse-sweep-run 11"))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 11 {
			t.Fatalf("active pin = %+v, want run 11", p)
		}
		r.wantAudit(t, "command/ignored,command/accepted,pin/active")
	})
	t.Run("cancel revokes the active pin", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Created(t.Context(), r.env, comment(101, maintainer, "/reuse-sweep-run cancel"))
		r.commit(t, w)
		comments, _ := r.outbox(t)
		if r.activePin(t) != nil || len(comments) != 2 || !strings.Contains(comments[1], "revoked the pin of run [10]") {
			t.Fatalf("after cancel: pin %v, comments %q", r.activePin(t), comments)
		}
		r.wantAudit(t, "command/accepted,pin/active,command/accepted,pin/revoked")
	})
	t.Run("stage without staging configured is rejected", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Created(t.Context(), r.env, comment(100, maintainer, "/stage-results 10"))
		r.commit(t, w)
		comments, reactions := r.outbox(t)
		if len(comments) != 1 || !strings.Contains(comments[0], "staging is not configured") || strings.Join(reactions, ",") != "-1" {
			t.Fatalf("comments %q, reactions %q; want a not-configured reply and -1", comments, reactions)
		}
		r.wantAudit(t, "command/rejected")
	})
}

func TestEdited(t *testing.T) {
	t.Run("editing the pin's line away revokes the pin", func(t *testing.T) {
		r := pinned(t)
		outcome, w := commands.Edited(t.Context(), r.env, edit(comment(100, maintainer, "never mind"), "/reuse-sweep-run 10"))
		if outcome != "edited" {
			t.Fatalf("outcome = %q, want edited", outcome)
		}
		r.commit(t, w)
		comments, _ := r.outbox(t)
		if r.activePin(t) != nil || len(comments) != 2 || !strings.Contains(comments[1], "edited away by @") {
			t.Fatalf("after the edit: pin %v, comments %q", r.activePin(t), comments)
		}
		r.wantAudit(t, "command/accepted,pin/active,pin/revoked")
	})
	t.Run("an edit that keeps the line keeps the pin", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Edited(t.Context(), r.env, edit(comment(100, maintainer, "/reuse-sweep-run 10\nthanks"), "/reuse-sweep-run 10"))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 10 {
			t.Fatalf("active pin = %+v, want run 10 still", p)
		}
		if comments, _ := r.outbox(t); len(comments) != 1 {
			t.Fatalf("comments = %q, want the pin reply only", comments)
		}
		r.wantAudit(t, "command/accepted,pin/active")
	})
	t.Run("a command added by an edit is not run, and its editor is told", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Edited(t.Context(), r.env, edit(comment(100, maintainer, "/reuse-sweep-run 10"), "lgtm"))
		r.commit(t, w)
		comments, _ := r.outbox(t)
		if r.activePin(t) != nil || len(comments) != 1 || !strings.Contains(comments[0], "/reuse-sweep-run 10") {
			t.Fatalf("after the edit: pin %v, comments %q; want no pin and one reply naming the command", r.activePin(t), comments)
		}
		r.wantAudit(t, "edit/not_run")
	})
	t.Run("a command anyone may run, added by an outsider's edit, is not answered either", func(t *testing.T) {
		r := newHRig(t)
		r.env.Repo.Help.MinRole = "read" // outsiders may ask for help in a new comment
		_, w := commands.Edited(t.Context(), r.env, edit(comment(100, outsider, "/opsbot help"), "lgtm"))
		r.commit(t, w)
		if comments, reactions := r.outbox(t); len(comments)+len(reactions) != 0 {
			t.Fatalf("outsider's edit: comments %q, reactions %q; want nothing", comments, reactions)
		}
		r.wantAudit(t, "edit/not_run")
	})
	t.Run("an outsider's added command is audited, never answered", func(t *testing.T) {
		r := newHRig(t)
		_, w := commands.Edited(t.Context(), r.env, edit(comment(100, outsider, "/reuse-sweep-run 10"), "lgtm"))
		r.commit(t, w)
		if comments, reactions := r.outbox(t); len(comments)+len(reactions) != 0 {
			t.Fatalf("outsider's edit: comments %q, reactions %q; want nothing", comments, reactions)
		}
		r.wantAudit(t, "edit/not_run")
	})
}

func TestDeleted(t *testing.T) {
	t.Run("deleting the pin's comment revokes the pin", func(t *testing.T) {
		r := pinned(t)
		outcome, w := commands.Deleted(t.Context(), r.env, comment(100, maintainer, ""))
		if outcome != "deleted" {
			t.Fatalf("outcome = %q, want deleted", outcome)
		}
		r.commit(t, w)
		comments, _ := r.outbox(t)
		if r.activePin(t) != nil || len(comments) != 2 || !strings.Contains(comments[1], "the comment that created it was deleted") {
			t.Fatalf("after the delete: pin %v, comments %q", r.activePin(t), comments)
		}
		r.wantAudit(t, "command/accepted,pin/active,pin/revoked")
	})
	t.Run("someone below the pin's role deleting its comment keeps the pin, and the PR is told", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Deleted(t.Context(), r.env, takenBackBy(100, outsider, ""))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 10 {
			t.Fatalf("active pin = %+v, want run 10 still", p)
		}
		comments, _ := r.outbox(t)
		if len(comments) != 2 || !strings.Contains(comments[1], "the pin stays") || !strings.Contains(comments[1], "@outsider deleted the comment") {
			t.Fatalf("comments %q; want a reply saying the pin stays", comments)
		}
		r.wantAudit(t, "command/accepted,pin/active,pin/kept")
	})
	t.Run("someone below the pin's role editing its line away keeps the pin", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Edited(t.Context(), r.env, edit(takenBackBy(100, outsider, "never mind"), "/reuse-sweep-run 10"))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 10 {
			t.Fatalf("active pin = %+v, want run 10 still", p)
		}
		r.wantAudit(t, "command/accepted,pin/active,pin/kept")
	})
	t.Run("deleting another comment leaves the pin", func(t *testing.T) {
		r := pinned(t)
		_, w := commands.Deleted(t.Context(), r.env, comment(101, maintainer, ""))
		r.commit(t, w)
		if p := r.activePin(t); p == nil || p.RunID != 10 {
			t.Fatalf("active pin = %+v, want run 10 still", p)
		}
		r.wantAudit(t, "command/accepted,pin/active")
	})
}
