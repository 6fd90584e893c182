package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

const slackSigning = e2e.SlackSecret

// clickWorld is a world with Slack, its buttons taken (a signing secret)
// and two Slack users mapped: the maintainer and the reader.
func clickWorld(t *testing.T, sl *slacktest.Fake, repoExtra string) *world {
	t.Helper()
	return newWorldOpts(t, worldOpts{
		Top: e2e.SlackTop(sl), Repo: repoExtra, Env: e2e.SlackEnv})
}

// click posts a click on one of opsbot's buttons as Slack does: a form
// whose payload is the interaction, signed with the signing secret at
// time at. It returns the answer's status.
func (w *world) click(sl *slacktest.Fake, user, action string, run int64, at time.Time, secret string) int {
	w.T.Helper()
	return w.clickFor(sl, user, action, run, w.GH.PRHead(theRepo, thePR), at, secret)
}

// clickFor is click on a button offered for head: the value of the newest
// message in Slack that offers it for head (with its offer's nonce), or,
// when none does, a value of opsbot's shape without a nonce.
func (w *world) clickFor(sl *slacktest.Fake, user, action string, run int64, head string, at time.Time, secret string) int {
	w.T.Helper()
	value, _ := json.Marshal(map[string]any{"repo": theRepo, "pr": thePR, "run": run, "head": head})
	for _, p := range sl.Posts() {
		if v := e2e.SlackValue(p.Blocks, action); strings.Contains(v, `"head":"`+head+`"`) {
			value = []byte(v)
		}
	}
	return w.SlackClickSigned(sl, user, action, string(value), at, secret)
}

// lastAnswer is the newest answer to a click.
func lastAnswer(t *testing.T, sl *slacktest.Fake) slacktest.Response {
	t.Helper()
	var r []slacktest.Response
	testkit.Eventually(t, "an answer to the click", func() bool { r = sl.Responses(); return len(r) > 0 })
	return r[len(r)-1]
}

// A sweep that finished offers its run in the PR's Slack thread; a mapped
// maintainer's click pins it as that GitHub account (the PR is told, the
// clicker answered only to them, the audit keeps the Slack user), and the
// next push skips.
func TestSlackClickPinsAsTheMappedAccount(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := clickWorld(t, sl, "")
	w.Push("c2")
	w.SweepCompleted("c2", 31147925932, "success")
	var offer slacktest.Post
	testkit.Eventually(t, "the run offered in Slack", func() bool {
		for _, p := range sl.Posts() {
			if strings.Contains(p.Blocks, "Reuse run 31147925932 for next push") {
				offer = p
				return true
			}
		}
		return false
	})
	mustContain(t, "offer", offer.Blocks, `"action_id":"reuse"`, `"action_id":"merge"`, `"action_id":"cancel"`, "The sweep of")

	if code := w.click(sl, "U0MAINT", "reuse", 31147925932, time.Now(), slackSigning); code != 200 {
		t.Fatalf("click answered %d", code)
	}
	mustContain(t, "PR reply", w.LastReply(), "📌 @maintainer pinned run [31147925932](", "(a click in Slack by Slack user U0MAINT)")
	a := lastAnswer(t, sl)
	if a.ResponseType != "ephemeral" || !strings.Contains(a.Text, "pinned run <https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932|31147925932>") {
		t.Fatalf("answer to the click: %+v", a)
	}
	var audited bool
	for _, r := range w.audit() {
		if r["kind"] == "command" && r["outcome"] == "accepted" && r["actor_login"] == maintLog && r["origin_kind"] == "slack" &&
			strings.Contains(fmt.Sprint(r["reason"]), "Slack user U0MAINT") {
			audited = true
		}
	}
	if !audited {
		t.Fatalf("the click is not audited with its Slack user: %v", w.audit())
	}
	w.Push("c3")
	if w.Swept("c3") {
		t.Fatal("the push after the click swept")
	}
	// A button offered for an older head does nothing.
	w.clickFor(sl, "U0MAINT", "merge", 31147925932, sha("c2"), time.Now(), slackSigning)
	mustContain(t, "stale button", lastAnswer(t, sl).Text, "Nothing was done: the button was offered for the PR's head c2c2c2c, which has moved")
	w.Push("c4")
	if !w.Swept("c4") {
		t.Fatal("a stale button pinned for the next push")
	}
}

// Clicks opsbot does not act on: an unmapped Slack user or a mapped reader
// is answered (only to them) and nothing is pinned; a forged or stale
// signature gets 401 and nothing is stored.
func TestSlackClicksRefused(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := clickWorld(t, sl, "")
	w.Push("c2") // opsbot knows the PR
	w.SweepCompleted("c2", 31147925932, "success")
	w.click(sl, "U0NOBODY", "reuse", 31147925932, time.Now(), slackSigning)
	mustContain(t, "unmapped", lastAnswer(t, sl).Text, "Nothing was done: your Slack account is not mapped to a GitHub account")
	// Someone not mapped is told within a budget: three at once.
	for range 5 {
		w.click(sl, "U0NOBODY", "reuse", 31147925932, time.Now(), slackSigning)
	}
	unmapped := 0
	for _, r := range sl.Responses() {
		if strings.Contains(r.Text, "not mapped") {
			unmapped++
		}
	}
	if unmapped != 3 {
		t.Fatalf("%d answers to an unmapped user's 6 clicks, want 3 (the budget)", unmapped)
	}
	w.click(sl, "U0READ", "reuse", 31147925932, time.Now(), slackSigning)
	mustContain(t, "reader", lastAnswer(t, sl).Text, "Nothing was done:", "as @reader on GitHub")
	// The reader's click used the button up: each acts once, whatever its
	// click did. A value with no offer's nonce does nothing either.
	w.click(sl, "U0MAINT", "reuse", 31147925932, time.Now(), slackSigning)
	mustContain(t, "the used button", lastAnswer(t, sl).Text, "Nothing was done: this button was used already, by @reader",
		"each button acts once")
	w.clickFor(sl, "U0MAINT", "reuse", 31147925932, sha("c1"), time.Now(), slackSigning)
	mustContain(t, "no offer", lastAnswer(t, sl).Text, "Nothing was done: opsbot did not offer this button on this PR",
		"Use the buttons of the newest message in this thread")
	for _, r := range w.Replies() {
		if strings.Contains(r, "pinned run") {
			t.Fatalf("a refused click pinned: %s", r)
		}
	}
	before := len(w.audit())
	if code := w.click(sl, "U0MAINT", "reuse", 31147925932, time.Now(), "not-the-signing-secret-0000"); code != 401 {
		t.Fatalf("a forged signature got %d", code)
	}
	if code := w.click(sl, "U0MAINT", "reuse", 31147925932, time.Now().Add(-10*time.Minute), slackSigning); code != 401 {
		t.Fatalf("a stale signature got %d", code)
	}
	if n := len(w.audit()); n != before {
		t.Fatalf("refused clicks left %d audit records", n-before)
	}
	// A refused click is audited under the command its button runs.
	w.click(sl, "U0OTHER", "merge", 31147925932, time.Now(), slackSigning)
	mustContain(t, "unmapped merge", lastAnswer(t, sl).Text, "Nothing was done: your Slack account is not mapped")
	var merge bool
	for _, r := range w.audit() {
		if strings.Contains(fmt.Sprint(r["reason"]), "U0OTHER") {
			if r["command"] != "merge-with-reuse" {
				t.Fatalf("a refused merge click audited as %v: %v", r["command"], r)
			}
			merge = true
		}
	}
	if !merge {
		t.Fatalf("the refused merge click is not audited: %v", w.audit())
	}
}

// A click and a comment never stand for one another: a comment whose id
// is the number a click's pin records as its origin is deleted, and the
// pin stays (origins are told apart by kind and id).
func TestClickAndCommentOriginsNeverCollide(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := clickWorld(t, sl, "")
	w.Push("c2")
	w.SweepCompleted("c2", 31147925932, "success")
	w.click(sl, "U0MAINT", "reuse", 31147925932, time.Now(), slackSigning)
	mustContain(t, "PR reply", w.LastReply(), "📌 @maintainer pinned run")
	var origin int64
	for _, r := range w.audit() {
		if r["kind"] == "pin" && r["outcome"] == "active" {
			origin = int64(r["comment_id"].(float64))
		}
	}
	if origin == 0 {
		t.Fatalf("the click's pin records no origin id: %v", w.audit())
	}
	w.CommentEvent("deleted", maintainer, maintainer, origin, "/reuse-sweep-run 31147925932", "")
	w.Push("c3")
	if w.Swept("c3") {
		t.Fatalf("deleting comment %d took back the pin a click made", origin)
	}
}
