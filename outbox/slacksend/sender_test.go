package slacksend_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/outbox/slacksend"
	"github.com/SemiAnalysisAI/opsbot/slackmirror"
	"github.com/SemiAnalysisAI/opsbot/state"
)

const repo = "SemiAnalysisAI/InferenceX"

var web notices.Web

type rig struct {
	t     *testing.T
	store *state.Store
	b     *notices.Notifier
	slack *slacktest.Fake
	loop  *outbox.Loop
	now   time.Time
}

func newRig(t *testing.T) *rig {
	t.Helper()
	cfg, err := config.Parse([]byte("slack: {channel: '#sweep-ops'}\nrepos:\n  - name: " + repo +
		"\n    sweep_workflow: .github/workflows/run-sweep.yml\n  - name: o/quiet\n    sweep_workflow: .github/workflows/s.yml\n    slack_channel: '#quiet'\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, slack: slacktest.New(t), now: time.Unix(1800000000, 0)}
	r.store, err = state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{Now: func() time.Time { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.store.Close() })
	r.b = &notices.Notifier{Mirror: &slackmirror.Mirror{Cfg: config.NewLive(cfg)}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.loop = &outbox.Loop{Store: r.store, Channel: state.ChannelSlack, Log: log, Now: func() time.Time { return r.now },
		Sender: &slacksend.Sender{Client: slacksend.NewClient("xoxb-test", r.slack.URL), Log: log, PRInfo: r.store.PRInfo}}
	return r
}

func (r *rig) notice(pr int, kind notices.Kind, text string) {
	r.t.Helper()
	err := r.store.Update(func(tx *state.Tx) error {
		if info, _ := tx.PRInfo(repo, pr); info == nil {
			if err := tx.PutPRInfo(&state.PRInfo{Repo: repo, PR: pr, Title: "kimik2.5 fp4 b200 <!here> *tune*", Author: "Ankur-singh"}); err != nil {
				return err
			}
		}
		_, err := r.b.Comment(tx, repo, pr, 0, kind, text, notices.Links{PR: web.PR(repo, pr),
			Comment: web.PR(repo, pr) + "#issuecomment-1", Run: web.Run(repo, 31147925932), Commit: web.Commit(repo, "c2")})
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) drain() { r.loop.Drain(r.t.Context()) }

func TestThreadPerPR(t *testing.T) {
	r := newRig(t)
	r.notice(2512, "reply", "📌 @maintainer pinned run [31147925932](https://github.com/x/actions/runs/31147925932): `success`.")
	r.notice(2512, "skip", "⏭️ **Sweep skipped for [`c2c2c2c`](https://github.com/x/commit/c2)**: reusing run 31147925932.")
	r.notice(7, "reply", "@maintainer revoked the pin.")
	r.drain()
	r.drain() // thread replies wait for their parent's ts
	posts := r.slack.Posts()
	if len(posts) != 5 {
		t.Fatalf("%d posts, want 5 (two parents, three replies): %+v", len(posts), posts)
	}
	var parent slacktest.Post
	parents := 0
	for _, p := range posts {
		if p.ThreadTS == "" {
			parents++
			if strings.Contains(p.Text, "#2512") {
				parent = p
			}
		}
	}
	if parents != 2 || parent.TS == "" || parent.Channel != "#sweep-ops" {
		t.Fatalf("want one parent per PR, PR 2512's in #sweep-ops: %+v", posts)
	}
	var replies2512 []slacktest.Post
	for _, p := range posts {
		if p.ThreadTS == parent.TS {
			replies2512 = append(replies2512, p)
		}
	}
	if len(replies2512) != 2 || !strings.Contains(replies2512[0].Text, "pinned run") || !strings.Contains(replies2512[1].Text, "Sweep skipped") {
		t.Fatalf("PR 2512's thread = %+v", replies2512)
	}
	if !replies2512[1].Broadcast || replies2512[0].Broadcast {
		t.Fatal("a skip is also sent to the channel; other replies stay in the thread")
	}
	// A later notice reuses the thread kept in bbolt: no second parent.
	r.notice(2512, "reply", "@maintainer pinned run 42.")
	r.drain()
	last := r.slack.Posts()[5]
	if last.ThreadTS != parent.TS || !strings.Contains(last.Text, "pinned run 42") {
		t.Fatalf("later notice not in the thread: %+v", last)
	}
	golden.Assert(t, "blocks-pin.json", pretty(t, replies2512[0].Blocks))
	golden.Assert(t, "blocks-skip.json", pretty(t, replies2512[1].Blocks))
	golden.Assert(t, "blocks-parent.json", pretty(t, parent.Blocks))
}

func TestRetryAfterIsHonoured(t *testing.T) {
	r := newRig(t)
	r.slack.Fail(&slacktest.Fault{Status: 429, RetryAfter: "30", Times: 1})
	r.notice(1, "reply", "one")
	r.drain()
	if n := len(r.slack.Posts()); n != 0 {
		t.Fatalf("%d posts while rate limited", n)
	}
	r.now = r.now.Add(29 * time.Second)
	r.drain()
	if c := r.slack.Calls(); c != 1 {
		t.Fatalf("%d calls before Retry-After passed, want 1", c)
	}
	r.now = r.now.Add(2 * time.Second)
	r.drain()
	r.drain()
	if n := len(r.slack.Posts()); n != 2 {
		t.Fatalf("%d posts after Retry-After, want 2 (parent, reply)", n)
	}
}

// A five-minute outage, replayed on an injected clock: every message is
// delivered once, in order, and nothing else waited for Slack.
func TestOutageLosesNothing(t *testing.T) {
	r := newRig(t)
	r.slack.Fail(&slacktest.Fault{Status: 500})
	var want []string
	for i := 0; i < 5; i++ {
		text := "message " + string(rune('A'+i))
		want = append(want, text)
		r.notice(2512, "reply", text)
	}
	end := r.now.Add(5 * time.Minute)
	for r.now.Before(end) {
		r.drain()
		r.now = r.now.Add(10 * time.Second)
	}
	if n := len(r.slack.Posts()); n != 0 {
		t.Fatalf("%d posts during the outage", n)
	}
	calls := r.slack.Calls()
	if calls > 40 {
		t.Fatalf("%d calls in 5 minutes: retries must back off", calls)
	}
	r.slack.Fail(nil)
	for i := 0; i < 20 && len(r.slack.Posts()) < 6; i++ {
		r.now = r.now.Add(time.Minute)
		r.drain()
	}
	posts := r.slack.Posts()
	if len(posts) != 6 {
		t.Fatalf("%d posts after the outage, want 6", len(posts))
	}
	for i, text := range want {
		if !strings.Contains(posts[i+1].Text, text) {
			t.Fatalf("post %d = %q, want %q: order within the thread is kept", i+1, posts[i+1].Text, text)
		}
	}
	if left, _ := r.store.Outbox(state.ChannelSlack); len(left) != 0 {
		t.Fatalf("%d Slack notices left after delivery", len(left))
	}
}

func TestBadChannelDegradesAndKeepsMessages(t *testing.T) {
	r := newRig(t)
	r.slack.Fail(&slacktest.Fault{Error: "channel_not_found"})
	r.notice(1, "reply", "kept")
	r.drain()
	s := r.loop.Sender.(*slacksend.Sender)
	if ok, why := s.Health(); ok || !strings.Contains(why, "channel_not_found") {
		t.Fatalf("health = %v %q", ok, why)
	}
	r.slack.Fail(nil)
	r.now = r.now.Add(6 * time.Minute)
	r.drain()
	r.drain()
	if n := len(r.slack.Posts()); n != 2 {
		t.Fatalf("%d posts once the channel exists, want 2", n)
	}
	if ok, _ := s.Health(); !ok {
		t.Fatal("health not restored")
	}
}

func TestAuthTest(t *testing.T) {
	f := slacktest.New(t)
	s := &slacksend.Sender{Client: slacksend.NewClient("xoxb-test", f.URL), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := s.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.RejectToken()
	if err := s.Check(t.Context()); err == nil {
		t.Fatal("a rejected token passed auth.test")
	}
	if ok, why := s.Health(); ok || !strings.Contains(why, "invalid_auth") {
		t.Fatalf("health = %v %q", ok, why)
	}
}

func pretty(t *testing.T, raw string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
	return b.String()
}
