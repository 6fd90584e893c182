package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

func slackWorld(t *testing.T, sl *slacktest.Fake) *world {
	return newWorldWith(t, "slack:\n  api_url: \""+sl.URL+"\"\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n", "",
		map[string]string{"TEST_SLACK_TOKEN": "xoxb-test"})
}

// A maintainer following only Slack sees the pin and the skip in the PR's thread.
func TestSlackMirrorsPinAndSkip(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := slackWorld(t, sl)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	posts := sl.Posts()
	if len(posts) != 3 {
		t.Fatalf("%d Slack posts, want parent, pin, skip: %+v", len(posts), posts)
	}
	parent := posts[0]
	mustContain(t, "parent", parent.Text, "SemiAnalysisAI/InferenceX#2512")
	for _, p := range posts[1:] {
		if p.ThreadTS != parent.TS || p.Channel != "#sweep-ops" {
			t.Fatalf("not in PR 2512's thread: %+v", p)
		}
	}
	mustContain(t, "pin message", posts[1].Blocks, "pinned run", "issuecomment-")
	mustContain(t, "skip message", posts[2].Blocks, "Sweep skipped", "actions/runs/31147925932")
	if !posts[2].Broadcast {
		t.Error("the skip is not sent to the channel")
	}
}

// A Slack outage delays Slack only: the decision and the GitHub replies go on.
func TestSlackDownBlocksNothing(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	sl.Fail(&slacktest.Fault{Error: "channel_not_found"})
	w := slackWorld(t, sl)
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	announceComment(t, w, c.ID)
	testkit.Eventually(t, "the GitHub reply is posted", func() bool { return len(w.Replies()) == 1 })
	// The Slack sender works beside GitHub's; once it has failed, opsbot
	// stays ready and says Slack is degraded.
	testkit.Eventually(t, "/readyz says Slack is degraded", func() bool {
		resp, err := http.Get(w.Srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/readyz = %d %s, want ready with Slack degraded", resp.StatusCode, raw)
		}
		return strings.Contains(string(raw), "channel_not_found")
	})
	testkit.Eventually(t, "opsbot_slack_healthy is 0", func() bool { return w.Metrics()["opsbot_slack_healthy"] == "0" })
}

// announceComment announces comment id as a created comment without
// waiting for the outbox to drain (Slack is down).
func announceComment(t *testing.T, w *world, id int64) string {
	t.Helper()
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "x"})
	setPath(p, "comment.id", id)
	setPath(p, "comment.body", w.CommentBody(id))
	setPath(p, "comment.user", maintainer.JSON())
	p["sender"] = maintainer.JSON()
	return postNoSettle(t, w, "issue_comment", p)
}
