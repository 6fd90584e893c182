package slacksend_test

import (
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/outbox/slacksend"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// quietNotice mirrors a notice of o/quiet, whose messages go to #quiet.
func (r *rig) quietNotice(pr int, text string) {
	r.t.Helper()
	if err := r.store.Update(func(tx *state.Tx) error {
		_, err := r.b.Comment(tx, "o/quiet", pr, 0, "reply", text, notices.Links{})
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
}

func postsTo(r *rig, channel string) int {
	n := 0
	for _, p := range r.slack.Posts() {
		if p.Channel == channel {
			n++
		}
	}
	return n
}

// One repository's missing, archived or unjoined channel holds only that
// channel's messages: another repository's channel keeps receiving.
func TestChannelErrorHoldsOnlyThatChannel(t *testing.T) {
	for _, code := range []string{"channel_not_found", "is_archived", "not_in_channel"} {
		t.Run(code, func(t *testing.T) {
			r := newRig(t)
			r.loop.Scope = slacksend.Scope
			r.loop.Parallel = 1
			r.slack.Fail(&slacktest.Fault{Error: code, Channel: "#quiet"})
			r.quietNotice(3, "held")
			r.notice(1, "reply", "delivered")
			r.drain()
			r.drain()
			if n := postsTo(r, "#sweep-ops"); n != 2 {
				t.Fatalf("%d posts to #sweep-ops while #quiet fails with %s, want 2 (parent, reply)", n, code)
			}
			if n := postsTo(r, "#quiet"); n != 0 {
				t.Fatalf("%d posts to the failing channel", n)
			}
			r.slack.Fail(nil)
			r.now = r.now.Add(5*time.Minute + time.Second)
			r.drain()
			r.drain()
			if n := postsTo(r, "#quiet"); n != 2 {
				t.Fatalf("%d posts to #quiet once it works, want 2", n)
			}
		})
	}
}

// A token error holds every channel's messages (the token is the same).
func TestTokenErrorHoldsEveryChannel(t *testing.T) {
	r := newRig(t)
	r.loop.Scope = slacksend.Scope
	r.loop.Parallel = 1
	r.slack.Fail(&slacktest.Fault{Error: "invalid_auth"})
	r.quietNotice(3, "held")
	r.notice(1, "reply", "held too")
	r.drain()
	r.drain()
	if c := r.slack.Calls(); c != 1 {
		t.Fatalf("%d calls with a refused token, want 1: every channel waits", c)
	}
}

// A Retry-After of ten years is waited for at most MaxRetryAfter.
func TestHugeSlackRetryAfterIsCapped(t *testing.T) {
	r := newRig(t)
	r.slack.Fail(&slacktest.Fault{Status: 429, RetryAfter: "315360000", Times: 1})
	r.notice(1, "reply", "one")
	r.drain()
	r.now = r.now.Add(slacksend.MaxRetryAfter + time.Second)
	r.drain()
	r.drain()
	if n := len(r.slack.Posts()); n != 2 {
		t.Fatalf("%d posts %v after the capped Retry-After, want 2 (parent, reply)", n, slacksend.MaxRetryAfter)
	}
}
