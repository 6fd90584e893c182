package merge_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// A cancel stored while the merge's step reads the checks goes first: the
// step, before it merges, sees the cancel waiting for the PR and yields;
// the cancel stops the merge and revokes its pin, and nothing is merged.
func TestMergeWithReuseYieldsToACancelBeforeMerging(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	// The first read of the checks marks the merge; the second, in the
	// step that asks it, is held while the cancel comes.
	arrived, release := w.GH.HoldAfter(routeCheckRuns, 1)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the merging step reads the checks")
	cancel := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse cancel")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, cancel.ID, cancel.Body, ""))
	release()
	w.WaitStatus("the merge cancelled", "⛔ stopped: cancelled by @maintainer")
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("merged %+v after an acknowledged cancel", m)
	}
	e2e.MustContain(t, "cancel's reply", strings.Join(w.Replies(), "\n"), "@maintainer cancelled the merge of this PR asked by @maintainer")
	if !w.PinRevoked() {
		t.Fatalf("the merge's pin was not revoked: %v", w.Trail())
	}
}

// A merge GitHub made whose answer was lost (a proxy's 502) is merged: the
// client never sends a merge again (sent again, GitHub answers 405 "not
// mergeable", which read as a refusal revoked the pin); the engine reads
// the PR back before the merge says anything, finds it merged at the
// decided head, its pin stands, and the push to the default branch reuses
// the run.
func TestMergeWithReuseLostAnswerIsReadNotResent(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GreenChecks(e2e.SHA("c1"))
	w.GH.Inject(routeMerge, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	st := w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
	if strings.Contains(st, "did not answer") {
		t.Fatalf("said GitHub did not answer before the PR read back showed the merge:\n%s", st)
	}
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge was asked %d times; want once", n)
	}
	if strings.Contains(st, "refused") || w.PinRevoked() {
		t.Fatalf("a merge GitHub made was taken as refused:\n%s\n%v", st, w.Trail())
	}
	m := w.GH.Merges()
	w.ClosedMerged(m[0].Commit)
	if out := w.GateFlags("--event", "push", "--sha", m[0].Commit); out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("push gate after the merge = %v", out)
	}
}

// A crash right after GitHub merged, before opsbot wrote the step: the head
// being merged was recorded before the merge was asked, so the restart
// finds the PR merged at that head, says so, and keeps the pin (before, it
// took the merge for someone else's and revoked the pin).
func TestMergeWithReuseCrashAfterGitHubMerged(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	deps := func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := mergeWorld(t, "    main_sweeps: false\n", clock)
	w.GreenChecks(e2e.SHA("c1"))
	arrived, release := w.GH.HoldAnswer(routeMerge)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "GitHub merged")
	w.Srv.Stop(t) // the step never wrote what GitHub did
	release()
	w.Srv = startServerWith(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, deps)
	w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge was asked %d times; want once", n)
	}
	if w.PinRevoked() {
		t.Fatalf("the pin of a merge opsbot made was revoked: %v", w.Trail())
	}
	m := w.GH.Merges()
	w.ClosedMerged(m[0].Commit)
	if out := w.GateFlags("--event", "push", "--sha", m[0].Commit); out["reuse-enabled"] != "true" {
		t.Fatalf("push gate after the merge = %v", out)
	}
}

// A cancel, or the deadline, read while a merge whose answer was lost may
// have been made (the PR's read back failed too): the PR is read first,
// and a PR GitHub merged at the decided head is recorded as merged, its
// pin kept, and the cancel told it came too late (not "cancelled").
func TestMergeWithReuseCancelAfterALostMergeAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		act  func(w *world, clock *movingClock)
		told string
	}{
		{"cancel", func(w *world, _ *movingClock) { w.Comment(maintainer, "/merge-with-reuse cancel") },
			"@maintainer too late: the merge asked by @maintainer was made before this cancel was read"},
		{"deadline", func(w *world, clock *movingClock) { w.PassTime(clock, merge.DefaultChecksTimeout+time.Second) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := mergeWorld(t, "    main_sweeps: false\n", clock)
			w.GreenChecks(e2e.SHA("c1"))
			w.loseMergeUnread()
			tc.act(w, clock)
			st := w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
			if strings.Contains(st, "⛔") || w.PinRevoked() {
				t.Fatalf("a merge GitHub made was ended as stopped, or its pin revoked:\n%s\n%v", st, w.Trail())
			}
			if tc.told != "" {
				e2e.MustContain(t, "the cancel's reply", w.LastReply(), tc.told)
			}
		})
	}
}

// A cancel stored while the GitHub client waits out a secondary rate limit
// inside the merge goes first: GitHub refused the merge's first request
// under its limit, and the client's own second request, after the wait, is
// checked for a stop right before it goes out. Nothing is merged, and the
// cancel stops the merge (before, the request sent after the wait merged
// the PR after the cancel was acknowledged).
func TestMergeWithReuseCancelDuringARateLimitWaitInsideTheMerge(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := mergeWorld(t, "", clock)
	w.GreenChecks(e2e.SHA("c1"))
	arrived, release := w.GH.HoldThen(routeMerge, githubtest.Fault{Status: 403, Header: map[string]string{"Retry-After": "1"},
		Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
			`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`})
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the merge's first request reaches GitHub")
	cancel := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse cancel")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, cancel.ID, cancel.Body, ""))
	release() // refused under the limit: the client waits a second, then would send it again
	w.WaitStatus("the merge cancelled", "⛔ stopped: cancelled by @maintainer")
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("merged %+v after an acknowledged cancel", m)
	}
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge reached GitHub %d times; want once (refused under the limit), not again after the cancel", n)
	}
	e2e.MustContain(t, "cancel's reply", strings.Join(w.Replies(), "\n"), "@maintainer cancelled the merge of this PR asked by @maintainer")
	if !w.PinRevoked() {
		t.Fatalf("the merge's pin was not revoked: %v", w.Trail())
	}
}

// routePR is GitHub's read of a PR.
const routePR = "GET /repos/{owner}/{repo}/pulls/{n}"

// loseMergeUnread asks the merge; GitHub merges, its answer is lost (a
// proxy's 502), and the PR's read back fails (GitHub refusing reads for a
// moment): the merge waits, saying GitHub did not answer.
func (w *world) loseMergeUnread() {
	w.T.Helper()
	arrived, release := w.GH.HoldAnswer(routeMerge)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(w.T, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(w.T, arrived, "GitHub merged")
	w.GH.Inject(routePR, githubtest.Fault{Status: 403, Body: `{"message":"Resource not accessible by integration"}`, Times: 1})
	release()
	w.WaitStatus("unanswered", "GitHub did not answer the merge: reading the PR again")
}
