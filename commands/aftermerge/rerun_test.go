package aftermerge_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// rerunWorld is world with the GPU runners' labels known.
func rerunWorld(t *testing.T, clock *e2e.Clock) *e2e.World {
	t.Helper()
	return e2e.New(t, e2e.Options{Repo: "    gpus_per_runner:\n      \"gpu-*\": 8\n    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n",
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
}

// gpuFailed is a main run's attempt failing in a GPU job, before the
// results were gathered.
var gpuFailed = []githubtest.Job{
	{Name: "single-node 1k1k / b200", Conclusion: "failure", Labels: []string{"self-hosted", "gpu-b200"}, Took: 2 * time.Hour},
	{Name: "single-node 1k1k / h100", Conclusion: "success", Labels: []string{"self-hosted", "gpu-h100"}, Took: 2 * time.Hour},
	{Name: "lint", Conclusion: "failure", Labels: []string{"ubuntu-latest"}, Took: 6 * time.Minute},
	{Name: "multi-node 8k1k / mi300x", Conclusion: "skipped", Labels: []string{"self-hosted", "gpu-mi300x"}},
	{Name: "collect-results", Conclusion: "skipped"}, {Name: "trigger-ingest", Conclusion: "skipped"}}

// failedMerge merges a decided PR whose main run failed as jobs say, and
// waits for the watch to say so.
func failedMerge(t *testing.T, w *e2e.World, jobs []githubtest.Job) {
	t.Helper()
	w.Push("c2")
	mainRunOf(w, "completed", "failure", jobs)
	merged(w)
	waitStatus(t, w, "❌ run [41000000001](", "⏳ opsbot follows a re-run of the failed jobs until")
}

// askWhileTheStepReads posts a maintainer's /rerun-failed with the watch
// step's read of the run (before it sends) held, and waits for that read;
// release lets it go on.
func askWhileTheStepReads(t *testing.T, w *e2e.World) (c githubtest.Comment, release func()) {
	t.Helper()
	arrived, release := w.GH.Hold("GET /repos/{owner}/{repo}/actions/runs/{id}")
	t.Cleanup(release)
	c = w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/rerun-failed")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the re-run's step reads the run")
	return c, release
}

// /rerun-failed on a merged PR whose main run failed before the results
// were gathered: the reply says what it re-runs and the GPU jobs' time
// among it, by the run's own timing; GitHub is asked once, the new attempt
// is followed to its success; a second /rerun-failed of the same attempt
// is refused, naming who asked first.
func TestRerunFailedReRunsTheAttemptOnceAndFollowsIt(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	e2e.MustContain(t, "status", status(w), "`/rerun-failed` asks GitHub to, once per attempt")
	w.Comment(e2e.Maintainer, "/rerun-failed")
	e2e.MustContain(t, "reply", w.LastReply(), "@maintainer re-running the 2 failed jobs of attempt 1 of run [41000000001](",
		"`lint`, `single-node 1k1k / b200`", "It runs up to 2 jobs on GPU runners again (those failed, and those skipped after a failure); in that attempt they took "+
			"2.0 runner hours, 16.0 GPU hours, by the run's own timing")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer", "⏳ opsbot follows attempt 2")
	if r := w.GH.Reruns(); !slices.Equal(r, []int64{mainRun}) {
		t.Fatalf("re-runs asked: %v; want run %d once", r, mainRun)
	}
	w.Comment(e2e.Maintainer, "/rerun-failed")
	e2e.MustContain(t, "second ask's reply", w.LastReply(), "a re-run of attempt 1 of run [41000000001](",
		"was asked already, by @maintainer: opsbot re-runs an attempt once")
	w.PassTime(clock, aftermerge.Poll)
	waitStatus(t, w, "⏳ attempt 2 of run [41000000001](", "is queued")
	runCompleted(w, clock, "success")
	waitStatus(t, w, "✅ run [41000000001](", "succeeded at its re-run (attempt 1 failed)")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want one", r)
	}
	var outcomes []string
	for _, r := range w.AuditRecords() {
		if r["kind"] == "command" && strings.Contains(r["reason"].(string), "re-run") {
			outcomes = append(outcomes, r["outcome"].(string))
		}
	}
	if strings.Join(outcomes, ",") != "accepted,rejected" {
		t.Fatalf("the audit's /rerun-failed records: %v; want accepted, then rejected", outcomes)
	}
}

// What /rerun-failed refuses, each said in its reply, with nothing asked
// of GitHub while the watch goes on: the ingest job failing after the
// results were gathered, alone or beside another job (recovery is the
// way), a cancelled run (a newer one may have replaced it), a run still
// running, a PR opsbot does not follow, an ask past the watch's deadline,
// and a commenter below the role.
func TestRerunFailedRefuses(t *testing.T) {
	t.Parallel()
	ingestFailed := []githubtest.Job{{Name: "single-node 1k1k / b200", Conclusion: "success"}, {Name: "collect-results", Conclusion: "success"},
		{Name: "trigger-ingest", Conclusion: "failure"}}
	for _, c := range []struct {
		name  string
		set   func(t *testing.T, w *e2e.World, clock *e2e.Clock)
		who   e2e.User
		want  string
		watch bool // a watch goes on: its next step asks nothing either
	}{
		{"ingest only", func(t *testing.T, w *e2e.World, _ *e2e.Clock) { failedMerge(t, w, ingestFailed) },
			e2e.Maintainer, "the ingest job `trigger-ingest` of run [41000000001](", true},
		{"ingest and another", func(t *testing.T, w *e2e.World, _ *e2e.Clock) {
			failedMerge(t, w, append(slices.Clone(ingestFailed), githubtest.Job{Name: "notify", Conclusion: "failure"}))
		}, e2e.Maintainer, "the ingest job `trigger-ingest` of run [41000000001](", true},
		{"cancelled", func(t *testing.T, w *e2e.World, _ *e2e.Clock) {
			w.Push("c2")
			mainRunOf(w, "completed", "cancelled", gpuFailed)
			merged(w)
			waitStatus(t, w, "It was cancelled")
		}, e2e.Maintainer, "was cancelled (by hand, or by a newer run of its concurrency group): opsbot does not re-run a cancelled run", true},
		{"running", func(t *testing.T, w *e2e.World, _ *e2e.Clock) {
			w.Push("c2")
			mainRunOf(w, "in_progress", "", nil)
			merged(w)
			waitStatus(t, w, "is in progress")
		}, e2e.Maintainer, "the default branch's run of this merge has not failed", true},
		{"not followed", func(t *testing.T, w *e2e.World, _ *e2e.Clock) { merged(w) }, e2e.Maintainer, "opsbot follows no run of this PR's merge", false},
		{"past the deadline", func(t *testing.T, w *e2e.World, clock *e2e.Clock) {
			failedMerge(t, w, gpuFailed)
			clock.Add(12*time.Hour + time.Minute) // the watch's end is due: processed before the ask, or not yet
		}, e2e.Maintainer, "deadline: re-run it on GitHub if it still matters", false},
		{"below the role", func(t *testing.T, w *e2e.World, _ *e2e.Clock) { failedMerge(t, w, gpuFailed) }, e2e.Reader, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := rerunWorld(t, clock)
			c.set(t, w, clock)
			w.Comment(c.who, "/rerun-failed")
			if c.want != "" {
				e2e.MustContain(t, "reply", w.LastReply(), c.want)
			} else if !slices.ContainsFunc(w.AuditRecords(), func(r map[string]any) bool {
				return r["kind"] == "command" && r["outcome"] == "denied" && r["actor_login"] == e2e.ReaderLogin
			}) {
				t.Fatalf("no denial audited for @%s: %v", e2e.ReaderLogin, w.AuditRecords())
			}
			if c.watch {
				w.PassTime(clock, aftermerge.RunPoll)
			}
			if r := w.GH.Reruns(); len(r) != 0 || w.GH.Count(githubtest.RouteRerunFailed) != 0 {
				t.Fatalf("re-ran %v", r)
			}
		})
	}
}

// GitHub refuses the re-run (the run is gone, or the App may not see it:
// 404): said in the comment, asked once, and the maintainer may ask again.
func TestRerunFailedRefusedByGitHubIsSaidOnce(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	w.GH.Inject(githubtest.RouteRerunFailed, githubtest.Fault{Status: 404, Body: `{"message":"Not Found"}`, Times: 1})
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "⛔ GitHub refused the re-run @maintainer asked (404: Not Found): ask again once that is fixed")
	w.PassTime(clock, aftermerge.RerunPoll)
	if n := w.GH.Count(githubtest.RouteRerunFailed); n != 1 {
		t.Fatalf("the refused re-run was asked %d times; want once", n)
	}
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
}

// GitHub took the re-run but its answer was lost: the engine reads the run
// back before anything is said, finds its new attempt, and never asks
// again.
func TestRerunFailedLostAnswerIsReadBack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	w.GH.Inject(githubtest.RouteRerunFailed, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer (GitHub's answer was lost; the run's new attempt shows it)")
	if n := w.GH.Count(githubtest.RouteRerunFailed); n != 1 {
		t.Fatalf("the re-run was asked %d times; want once", n)
	}
}

// GitHub closed the connection without taking the re-run, and the run's
// read back failed: the step says GitHub did not answer and never asks
// blindly again; the next step reads the run, finds no new attempt, and
// says the re-run was not sent, so the maintainer may ask again, which
// then re-runs it once.
func TestRerunFailedUnansweredIsNotSentBlindly(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	w.GH.Inject(githubtest.RouteRerunFailed, githubtest.Fault{Drop: true, Times: 1})
	// The step reads the run before it sends; the read back after is refused.
	w.GH.Inject("GET /repos/{owner}/{repo}/actions/runs/{id}", githubtest.Fault{Status: 403, Body: `{"message":"Resource not accessible by integration"}`,
		Times: 1, Skip: 1})
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "⏳ GitHub did not answer the re-run: reading the run again")
	w.PassTime(clock, aftermerge.Poll)
	waitStatus(t, w, "⚠️ the re-run @maintainer asked was not sent", "ask again with `/rerun-failed`")
	if r := w.GH.Reruns(); len(r) != 0 {
		t.Fatalf("re-ran %v", r)
	}
	if n := w.GH.Count(githubtest.RouteRerunFailed); n != 1 {
		t.Fatalf("the re-run reached GitHub %d times; want once (dropped)", n)
	}
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want one", r)
	}
}

// The comment that asked is deleted while the watch's step reads the run
// before it sends: the step yields to the deletion, the ask is taken back
// (said and audited), and nothing is sent. A comment deleted after its
// re-run was sent changes nothing.
func TestRerunFailedTakenBackBeforeItIsSent(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	c, release := askWhileTheStepReads(t, w)
	w.GH.DeleteComment(c.ID)
	w.PostNoSettle("issue_comment", w.CommentPayload("deleted", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	release()
	waitStatus(t, w, "↩️ the re-run @maintainer asked of attempt 1 was taken back before it was sent: @maintainer deleted the comment")
	w.PassTime(clock, aftermerge.RerunPoll)
	if r := w.GH.Reruns(); len(r) != 0 || w.GH.Count(githubtest.RouteRerunFailed) != 0 {
		t.Fatalf("re-ran %v after the ask was taken back", r)
	}
	if !slices.ContainsFunc(w.AuditRecords(), func(r map[string]any) bool { return r["outcome"] == "rerun_taken_back" }) {
		t.Fatalf("the take-back is not audited")
	}
	c2 := w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/rerun-failed")
	w.Send("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, c2.ID, c2.Body, ""))
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w.GH.DeleteComment(c2.ID)
	w.Send("issue_comment", w.CommentPayload("deleted", e2e.Maintainer, e2e.Maintainer, c2.ID, c2.Body, ""))
	takenBack := 0
	for _, r := range w.AuditRecords() {
		if r["outcome"] == "rerun_taken_back" {
			takenBack++
		}
	}
	if st := status(w); strings.Count(st, "taken back") != 1 || takenBack != 1 || len(w.GH.Reruns()) != 1 {
		t.Fatalf("a sent re-run was taken back (%d audited), or asked again: %v\n%s", takenBack, w.GH.Reruns(), st)
	}
}

// The forgotten reuse: opsbot decided the merged head by reuse of a run,
// yet the main run ran its GPU jobs (the reuse did not reach main). Said on
// success and on failure, naming the run the head reused; on a failure,
// /rerun-failed is refused (it would spend GPU time on what that run
// covers). A main run whose GPU jobs were skipped says nothing of it.
func TestAfterMergeSaysAForgottenReuse(t *testing.T) {
	t.Parallel()
	gpuRan := func(conclusion string) []githubtest.Job {
		return []githubtest.Job{{Name: "single-node 1k1k / b200", Conclusion: conclusion, Labels: []string{"self-hosted", "gpu-b200"}, Took: time.Hour},
			{Name: "collect-results", Conclusion: "success"}, {Name: "trigger-ingest", Conclusion: "success"}}
	}
	const warning = "⚠️ It ran 1 GPU job (`single-node 1k1k / b200`) although opsbot decided the merged head `c2c2c2c` by reuse of run 31147925932"
	for _, c := range []struct {
		name, conclusion string
		jobs             []githubtest.Job
		want             string // "": no warning
	}{
		{"success", "success", gpuRan("success"), warning},
		{"failure", "failure", gpuRan("cancelled"), warning},
		{"reused as decided", "success", gpuRan("skipped"), ""},
		{"cancelled before it ran", "failure", []githubtest.Job{{Name: "single-node 1k1k / b200", Conclusion: "cancelled",
			Labels: []string{"self-hosted", "gpu-b200"}}, {Name: "lint", Conclusion: "failure"}}, ""},
		{"labels allow no reuse", "success", gpuRan("success"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := rerunWorld(t, clock)
			w.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
			w.Push("c2") // the gate skips its sweep on the pin
			mainRunOf(w, "completed", c.conclusion, c.jobs)
			if c.name == "labels allow no reuse" {
				// Labelled partial before the merge: the push gate sweeps it.
				w.GH.ClosePR(e2e.Repo, e2e.PR, true, e2e.SHA("e1"))
				p := closed(w, true, "main")
				e2e.SetPath(p, "pull_request.labels", []any{map[string]any{"name": "evals-only"}})
				w.Send("pull_request", p)
				st := waitStatus(t, w, "succeeded")
				e2e.MustContain(t, "status", st, "but the PR's labels at the merge allow no reuse")
				if strings.Contains(st, "forgotten") {
					t.Fatalf("a merge whose labels allow no reuse is said to have forgotten it:\n%s", st)
				}
				return
			}
			merged(w)
			end := "succeeded"
			if c.conclusion == "failure" {
				end = "ended `failure`"
			}
			st := waitStatus(t, w, end)
			if c.want == "" {
				if strings.Contains(st, "forgotten") {
					t.Fatalf("a reuse kept to main is said forgotten:\n%s", st)
				}
				return
			}
			e2e.MustContain(t, "status", st, c.want, "the reuse was forgotten on the way to `main`")
			if c.conclusion == "failure" {
				if strings.Contains(st, "`/rerun-failed` asks GitHub") {
					t.Fatalf("a forgotten reuse's failure offers a re-run:\n%s", st)
				}
				w.Comment(e2e.Maintainer, "/rerun-failed")
				e2e.MustContain(t, "reply", w.LastReply(), "ran GPU jobs although opsbot decided the merged head by reuse of run 31147925932")
				w.PassTime(clock, aftermerge.RerunPoll)
				if n := w.GH.Count(githubtest.RouteRerunFailed); n != 0 {
					t.Fatalf("re-ran a forgotten reuse's run %d times", n)
				}
			}
		})
	}
}

// The comment is deleted after the re-run's request went out and its
// answer was lost (the read back failed too): the ask may have reached
// GitHub, so it is not said taken back; the watch reads the run and
// follows the attempt GitHub made.
func TestRerunFailedNotTakenBackOnceItMayHaveBeenSent(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	w.GH.Inject(githubtest.RouteRerunFailed, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.GH.Inject("GET /repos/{owner}/{repo}/actions/runs/{id}", githubtest.Fault{Status: 403, Body: `{"message":"Resource not accessible by integration"}`,
		Times: 1, Skip: 1})
	c := w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/rerun-failed")
	w.Send("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	waitStatus(t, w, "⏳ GitHub did not answer the re-run: reading the run again")
	w.GH.DeleteComment(c.ID)
	w.Send("issue_comment", w.CommentPayload("deleted", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	if !slices.ContainsFunc(w.AuditRecords(), func(r map[string]any) bool { return r["outcome"] == "not_cancelled" }) {
		t.Fatalf("the deletion of an ask that may have been sent is not audited as not cancelled")
	}
	w.PassTime(clock, aftermerge.Poll)
	st := waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run (opsbot's ask on @maintainer's word")
	if strings.Contains(st, "taken back") {
		t.Fatalf("an ask GitHub took is said taken back:\n%s", st)
	}
}

// opsbot stops between a maintainer's /rerun-failed and its act (the step
// was reading the run before sending): the next process never sends an ask
// the process before it marked, says the re-run was not sent, and the
// maintainer's next ask re-runs it once.
func TestRerunFailedNotSentAcrossARestart(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := rerunWorld(t, clock)
	failedMerge(t, w, gpuFailed)
	_, release := askWhileTheStepReads(t, w)
	w.Srv.Stop(t)
	release()
	w.Srv = e2e.Start(t, w.ConfigPath(), w.Env, w.Deps)
	waitStatus(t, w, "⚠️ the re-run @maintainer asked was not sent", "ask again with `/rerun-failed`")
	if n := w.GH.Count(githubtest.RouteRerunFailed); n != 0 {
		t.Fatalf("the re-run marked by the stopped process was sent %d times", n)
	}
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want one", r)
	}
}
