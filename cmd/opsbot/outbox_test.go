package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// A notice that can never be sent wedges nothing: the staging
// acknowledgement is refused for good, so the callback's edit has no comment
// to edit. The edit is posted as a new comment instead, the refused
// acknowledgement is listed among the failed notices, the next push's
// commit status arrives within a second, and the idle server then makes no
// commits at all.
func TestStuckNoticeWedgesNothing(t *testing.T) {
	w := stageWorld(t, "")
	w.GH.Inject("POST /repos/{owner}/{repo}/issues/{n}/comments", githubtest.Fault{Status: 422, Times: 1})
	c := w.Comment(maintainer, "/stage-results 31147925932")
	if len(w.Replies()) != 0 {
		t.Fatalf("the acknowledgement was posted despite the refusal: %v", w.Replies())
	}

	cb := payload(t, "repository_dispatch", "")
	cb["action"] = "stage-results-completed"
	setPath(cb, "repository.full_name", theRepo)
	cb["client_payload"] = map[string]any{"comment-id": strconv.FormatInt(c.ID, 10), "run-id": strconv.FormatInt(runR1, 10),
		"pr-number": strconv.Itoa(thePR), "stage-succeeded": true, "request-token": w.requestToken(c.ID)}
	postNoSettle(t, w, "repository_dispatch", cb)

	w.GH.Push(theRepo, thePR, []string{sha("c2")}, nil)
	pushed := time.Now()
	postNoSettle(t, w, "pull_request", w.SyncPayload(sha("c2")))
	for len(w.Statuses("c2")) == 0 {
		if time.Since(pushed) > time.Second {
			t.Fatalf("no commit status for the next push within a second: the PR's notices are stuck behind the edit")
		}
		time.Sleep(5 * time.Millisecond)
	}

	w.Settle()
	mustContain(t, "the edit, posted as a new comment", w.LastReply(), "@maintainer staged run [31147925932]")
	out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--failed-notices", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "failed notices", out, `"kind": "comment"`, "staging run", "422")

	commits := w.Metrics()["opsbot_commit_seconds_count"]
	// An idle window is what is measured here: nothing is awaited.
	time.Sleep(500 * time.Millisecond)
	if got := w.Metrics()["opsbot_commit_seconds_count"]; got != commits {
		t.Fatalf("an idle server committed: %s commits, then %s half a second later", commits, got)
	}
}

// A burst of commands on one PR stays within GitHub's secondary rate limits
// (scaled down in time here: 10 content requests in any 500 ms, 100 in any
// 5 s, enforced by the fake GitHub as GitHub does), and a push to another
// PR during the burst gets its commit status within its fair share of the
// budget, long before the burst is answered. GitHub refuses nothing.
func TestCommandBurstStaysWithinSecondaryLimits(t *testing.T) {
	w := newWorldOpts(t, worldOpts{GitHub: "  content_rate: {per_minute: 10, per_hour: 100, minute: 500ms, hour: 5s}"})
	w.GH.LimitContent(githubtest.ContentLimits{PerMinute: 10, PerHour: 100, Minute: 500 * time.Millisecond, Hour: 5 * time.Second})
	const other = 3000
	w.GH.AddPR(theRepo, other, "author", "other-branch", sha("b0"), []string{sha("e1")})

	const burst = 40 // each answered with a reaction and a reply: 80 content requests
	for i := range burst {
		u := user{Login: fmt.Sprintf("member%d", i), ID: int64(7000 + i)}
		w.GH.AddUser(u.Login, u.ID, "User")
		w.GH.SetRole(theRepo, u.Login, "write")
		c := w.GH.AddComment(theRepo, thePR, u.Login, "/opsbot help")
		p := payload(t, "issue_comment", "created")
		setPath(p, "repository.full_name", theRepo)
		setPath(p, "issue.number", thePR)
		setPath(p, "issue.pull_request", map[string]any{"url": "x"})
		setPath(p, "comment.id", c.ID)
		setPath(p, "comment.body", c.Body)
		setPath(p, "comment.user", u.JSON())
		p["sender"] = u.JSON()
		postNoSettle(t, w, "issue_comment", p)
	}
	testkit.Eventually(t, "the burst's first replies are out", func() bool { return len(w.Replies()) >= 3 })

	w.GH.Push(theRepo, other, []string{sha("e2")}, nil)
	p := w.SyncPayload(sha("e2"))
	p["number"] = other
	setPath(p, "pull_request.number", other)
	setPath(p, "pull_request.head.ref", "other-branch")
	pushed := time.Now()
	postNoSettle(t, w, "pull_request", p)
	// Its fair share: the next send the window frees (every 50 ms on
	// average here) alternates between the two PRs, so the status comes
	// while the burst is still being answered. (How soon, in time, is
	// measured by the burst benchmark, not asserted here.)
	for len(w.Statuses("e2")) == 0 {
		if len(w.Replies()) >= burst || time.Since(pushed) > 60*time.Second {
			t.Fatalf("no status for the other PR's push while the burst was answered (%d of %d commands answered, %v): it waited behind the burst",
				len(w.Replies()), burst, time.Since(pushed).Round(time.Millisecond))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(w.Replies()); n >= burst {
		t.Fatalf("the status came only after the whole burst (%d replies): no fair share", n)
	}
	t.Logf("the other PR's status came %v after its push", time.Since(pushed).Round(time.Millisecond))

	// One PR's notices go one after another, each with two commits: on a
	// loaded machine that, not the pace, can set the burst's end.
	for deadline := testkit.Deadline(t); len(w.Replies()) < burst; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d commands answered", len(w.Replies()), burst)
		}
	}
	if n := w.GH.SecondaryRefusals(); n != 0 {
		t.Fatalf("GitHub refused %d requests under its secondary rate limit", n)
	}
}
