package example_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// world is the server, with the command as one more module, on the clock
// the test moves.
func world(t *testing.T, o e2e.Options, clock *e2e.Clock) *e2e.World {
	t.Helper()
	o.Deps = func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
		d.Modules = []func(commands.Deps) commands.Module{Module}
	}
	return e2e.New(t, o)
}

// status is the newest of the command's status comments on the PR (""
// for none).
func status(w *e2e.World) string {
	out := ""
	for _, r := range w.Replies() {
		for _, mark := range []string{"⏳ ", "✅ ", "⌛ "} {
			if strings.HasPrefix(r, mark) {
				out = r
			}
		}
	}
	return out
}

func waitStatus(t *testing.T, w *e2e.World, subs ...string) string {
	t.Helper()
	testkit.Eventually(t, "the status says "+strings.Join(subs, ", "), func() bool {
		s := status(w)
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	})
	return status(w)
}

// Its event route: a check suite's completion on the PR's head wakes the
// sequence, which says the word in its status comment.
func TestEchoLaterSaysTheWordWhenTheChecksComplete(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{}, clock)
	w.Push("c2") // opsbot learns the PR's head from its push
	w.Comment(e2e.Maintainer, "/echo-later hello")
	waitStatus(t, w, "⏳ @maintainer: I will say `hello` when the head's checks complete (or give up in 1h)")
	w.CheckEvent(e2e.SHA("c2"))
	w.PassTime(clock, record.WakeGap)
	waitStatus(t, w, "✅ @maintainer: `hello` (a check suite of the head completed)")
}

// Its route of an event no other command uses: a review is stored only
// when it approves, by someone of the repository (its Find), ordered by
// the PR it names; its record
// notes the approver on the waiting echo, and the wake-up says the word.
// The metrics count the event by its name.
func TestEchoLaterSaysTheWordWhenAReviewApproves(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{}, clock)
	w.Comment(e2e.Maintainer, "/echo-later hello")
	waitStatus(t, w, "⏳ @maintainer: I will say `hello`")
	review := func(state string) map[string]any {
		p := e2e.Payload(t, "pull_request_review", "submitted")
		e2e.SetPath(p, "repository.full_name", e2e.Repo)
		e2e.SetPath(p, "pull_request.number", e2e.PR)
		e2e.SetPath(p, "review.state", state)
		e2e.SetPath(p, "review.user.login", "reviewer")
		e2e.SetPath(p, "review.author_association", "COLLABORATOR")
		return p
	}
	w.Send("pull_request_review", review("commented"))
	outsider := review("approved")
	e2e.SetPath(outsider, "review.author_association", "NONE")
	e2e.SetPath(outsider, "review.user.login", "passer-by")
	w.Send("pull_request_review", outsider)
	if st := status(w); !strings.HasPrefix(st, "⏳ ") {
		t.Fatalf("a review that does not approve ended the echo: %q", st)
	}
	w.Send("pull_request_review", review("approved"))
	w.PassTime(clock, record.WakeGap)
	waitStatus(t, w, "✅ @maintainer: `hello` (@reviewer approved the PR).")
	m := w.Metrics()
	if got := m[`opsbot_webhook_deliveries_total{event="pull_request_review",outcome="ignored"}`]; got != "2" {
		t.Errorf("ignored reviews counted %q, want 2 (the comment-only review, the outsider's approval): %v", got, m)
	}
	if got := m[`opsbot_deliveries_processed_total{event="pull_request_review",outcome="echo-approval-noted"}`]; got != "1" {
		t.Errorf("processed approvals counted %q, want 1", got)
	}
}

// Its deadline: the engine ends it at repos[].echo_later.wait, as every
// kind's, with no wake-up of its own set.
func TestEchoLaterGivesUpAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{Repo: "    echo_later:\n      wait: 10m\n"}, clock)
	w.Comment(e2e.Maintainer, "/echo-later hello")
	waitStatus(t, w, "give up in 10m")
	w.PassTime(clock, 10*time.Minute+time.Second)
	waitStatus(t, w, "⌛ @maintainer: no check suite of the head completed in time; `hello` stays unsaid")
}

// Its own role, from its own section: with min_role maintain the
// maintainer (write) is refused, saying what is needed; a listed login may
// whatever its role.
func TestEchoLaterHasItsOwnRole(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{Repo: "    echo_later:\n      min_role: maintain\n      allow_users: [reader]\n"}, clock)
	w.Comment(e2e.Maintainer, "/echo-later hello")
	e2e.MustContain(t, "refusal", w.LastReply(), "@maintainer", "`maintain`")
	w.Comment(e2e.Reader, "/echo-later hi")
	waitStatus(t, w, "⏳ @reader: I will say `hi`")
}

// Its section is checked as every section is: a role that is no role is
// refused at load, naming the key, and so is a wait out of range.
func TestEchoLaterSectionIsChecked(t *testing.T) {
	app.RegisterSections(Module)
	dir := t.TempDir()
	path := filepath.Join(dir, "opsbot.yaml")
	cfg := "repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n    echo_later:\n      min_role: wrtie\n      wait: 48h\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.LoadFileOnly(path)
	if err == nil {
		t.Fatal("a section with a role that is no role loaded")
	}
	e2e.MustContain(t, "problems", err.Error(), `repos[0].echo_later.min_role: "wrtie" is not a role`, "repos[0].echo_later.wait: 48h0m0s is out of range")
}

// Its button: a finished sweep's check run offers it beside opsbot's own,
// and a click runs the command as the one who clicked.
func TestEchoLaterButton(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{App: true}, clock)
	w.Push("c2")
	const r2 = int64(31200000020)
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: r2, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: e2e.SHA("c2"), HeadBranch: "kimi-tune", Artifacts: e2e.ResultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w.SweepCompleted("c2", r2, "success")
	runs := w.CheckRunsOn("c2")
	if last := runs[len(runs)-1]; strings.Join(last.Actions, ",") != "reuse,merge,echo" {
		t.Fatalf("the finished sweep's check run offers %v; want opsbot's buttons and the command's", last.Actions)
	}
	w.ClickCheckRun(e2e.Maintainer, "c2", "echo", r2)
	waitStatus(t, w, "⏳ @maintainer: I will say `31200000020`")
}

// Its help: `/opsbot help` lists its row beside opsbot's own (the help's
// golden files show opsbot's first commands only: a command shows its own
// rows here).
func TestEchoLaterIsInTheHelp(t *testing.T) {
	t.Parallel()
	w := world(t, e2e.Options{}, e2e.NewClock())
	w.Comment(e2e.Maintainer, "/opsbot help")
	e2e.MustContain(t, "help", w.LastReply(), "| `/echo-later <word>` | ", "| `/reuse-sweep-run <run>` |")
}

// A second /echo-later while one waits is answered, never a dead letter:
// one live sequence per PR and kind holds for every kind, the engine's
// rule, though this handler does not look for one. The first goes on.
func TestEchoLaterTwiceIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, e2e.Options{}, clock)
	w.Push("c2")
	w.Comment(e2e.Maintainer, "/echo-later hello")
	waitStatus(t, w, "⏳ @maintainer: I will say `hello`")
	w.Comment(e2e.Maintainer, "/echo-later again")
	e2e.MustContain(t, "the second command's reply", w.LastReply(), "@maintainer this PR has a `/echo-later` under way already",
		"(asked by @maintainer, at step `waiting`): one at a time; it ends by itself by ")
	if m := w.Metrics(); m["opsbot_dead_letters"] != "0" {
		t.Fatalf("dead letters after the second command: %s", m["opsbot_dead_letters"])
	}
	var refused bool
	for _, r := range w.AuditRecords() {
		refused = refused || (r["command"] == Name && r["outcome"] == "rejected" && strings.Contains(r["reason"].(string), "echo_later sequence of this PR waits"))
	}
	if !refused {
		t.Fatalf("the refusal is not in the audit: %v", w.AuditRecords())
	}
	w.CheckEvent(e2e.SHA("c2"))
	w.PassTime(clock, record.WakeGap)
	waitStatus(t, w, "✅ @maintainer: `hello`")
}
