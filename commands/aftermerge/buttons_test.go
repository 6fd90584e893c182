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
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// slackWorld is rerunWorld with Slack, its clicks taken.
func slackWorld(t *testing.T, clock *e2e.Clock, sl *slacktest.Fake, repo string) *e2e.World {
	t.Helper()
	return e2e.New(t, e2e.Options{Repo: "    gpus_per_runner:\n      \"gpu-*\": 8\n    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n" + repo,
		Top: e2e.SlackTop(sl), Env: e2e.SlackEnv,
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
}

// A main run that failed before the results were gathered is offered for
// a re-run in the PR's Slack thread: a mapped maintainer's click asks
// /rerun-failed as that GitHub account (the PR is told, the re-run is
// asked once), and the button acts once: a later click does nothing.
func TestAfterMergeOffersARerunInSlack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	sl := slacktest.New(t)
	w := slackWorld(t, clock, sl, "")
	failedMerge(t, w, gpuFailed)
	value := w.SlackOffered(sl, "rerun-failed")
	var offer string
	for _, p := range sl.Posts() {
		if e2e.SlackValue(p.Blocks, "rerun-failed") != "" {
			offer = p.Blocks
		}
	}
	e2e.MustContain(t, "the offer", offer, "Re-run failed jobs", "failed (attempt 1)", "a re-run of its failed jobs may fix it")
	if strings.Contains(offer, `"action_id":"reuse"`) || strings.Contains(offer, `"action_id":"recover-ingest"`) {
		t.Fatalf("the failed run's message offers other buttons:\n%s", offer)
	}
	w.SlackClick(sl, "U0MAINT", "rerun-failed", value)
	e2e.MustContain(t, "the PR's reply", w.LastReply(), "@maintainer re-running the 2 failed jobs of attempt 1 of run [41000000001](",
		"(a click in Slack by Slack user U0MAINT)")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	if r := w.GH.Reruns(); !slices.Equal(r, []int64{mainRun}) {
		t.Fatalf("re-runs asked: %v; want run %d once", r, mainRun)
	}
	answers := len(sl.Responses())
	w.SlackClick(sl, "U0READ", "rerun-failed", value)
	e2e.MustContain(t, "a second click", e2e.SlackAnswer(t, sl, answers), "Nothing was done: this button was used already, by @maintainer")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want one", r)
	}
}

// A main run whose ingest failed after the results were gathered, with a
// recovery configured, is offered for a recovery instead (a re-run is not
// the way).
func TestAfterMergeOffersARecoveryInSlack(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	sl := slacktest.New(t)
	w := slackWorld(t, clock, sl, "      recover:\n        workflow: .github/workflows/recover-reused-ingest.yml\n")
	w.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
	failedMerge(t, w, ingestFailed)
	value := w.SlackOffered(sl, "recover-ingest")
	var offer string
	for _, p := range sl.Posts() {
		if e2e.SlackValue(p.Blocks, "recover-ingest") != "" {
			offer = p.Blocks
		}
	}
	e2e.MustContain(t, "the offer", offer, "Recover the ingest", "its ingest failed, after the results were gathered")
	if strings.Contains(offer, `"action_id":"rerun-failed"`) || value == "" {
		t.Fatalf("the ingest failure offers a re-run:\n%s", offer)
	}
}

// A button offered with attempt 1 does nothing once the run failed again
// at attempt 2: its message named attempt 1 (the newest message offers
// attempt 2's).
func TestAfterMergeRerunButtonOfAnOlderAttemptIsRefused(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	sl := slacktest.New(t)
	w := slackWorld(t, clock, sl, "")
	failedMerge(t, w, gpuFailed)
	first := w.SlackOffered(sl, "rerun-failed")
	failedAgain(t, w, clock)
	answers := len(sl.Responses())
	w.SlackClick(sl, "U0MAINT", "rerun-failed", first)
	e2e.MustContain(t, "the old button's answer", e2e.SlackAnswer(t, sl, answers), "this button was offered for attempt 1 of run 41000000001",
		"use the newest message's button")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want only the typed one", r)
	}
}

// appWorld is rerunWorld run as a GitHub App: check runs and their
// buttons are an App's.
func appWorld(t *testing.T, clock *e2e.Clock, repo string) *e2e.World {
	t.Helper()
	return e2e.New(t, e2e.Options{App: true, Repo: "    gpus_per_runner:\n      \"gpu-*\": 8\n    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n" + repo,
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
}

// afterMergeCheck is the newest of the watch's check runs on the merge
// commit (CheckName; the zero value: none).
func afterMergeCheck(w *e2e.World) githubtest.CreatedCheckRun {
	var out githubtest.CreatedCheckRun
	for _, c := range w.CheckRunsOn("e1") {
		if c.Name == aftermerge.CheckName {
			out = c
		}
	}
	return out
}

// failedAgain has a maintainer re-run attempt 1's failed jobs by
// /rerun-failed, and attempt 2 fail.
func failedAgain(t *testing.T, w *e2e.World, clock *e2e.Clock) {
	t.Helper()
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w.PassTime(clock, aftermerge.Poll)
	runCompleted(w, clock, "failure")
	waitStatus(t, w, "ended `failure` at attempt 2")
}

// waitCheck waits for the watch's check run on the merge commit titled
// title (its notice is sent beside the comment's edit, in no order).
func waitCheck(t *testing.T, w *e2e.World, title string) githubtest.CreatedCheckRun {
	t.Helper()
	testkit.Eventually(t, "the merge commit's check run "+title, func() bool { return afterMergeCheck(w).Title == title })
	return afterMergeCheck(w)
}

// A failed main run is offered for a re-run on the merge commit's own
// check run too: a maintainer's click re-runs the failed jobs once, as
// /rerun-failed would; the button acts once; a reader's click is denied
// (and uses its button up, as every refused click does); and once the re-run succeeds, the check run says so and
// offers nothing. The check run holds only the watch's button, never the
// gate's.
func TestAfterMergeOffersARerunOnTheMergeCommitsCheckRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "")
	failedMerge(t, w, gpuFailed)
	c := waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	if !slices.Equal(c.Actions, []string{"rerun-failed"}) || c.Title != "Run 41000000001 failed (attempt 1)" || c.Conclusion != "neutral" {
		t.Fatalf("the merge commit's check run: %+v; want one button, Re-run failed jobs, for attempt 1", c)
	}
	e2e.MustContain(t, "its summary", c.Summary, "a re-run of its failed jobs may fix it", "`/rerun-failed` does the same")
	w.ClickCheckRun(e2e.Reader, "e1", "rerun-failed", 0)
	e2e.MustContain(t, "a reader's click", w.LastReply(), "Nothing was done: this command needs the `write` role on the repository or above (as @reader on GitHub)")
	if r := w.GH.Reruns(); len(r) != 0 {
		t.Fatalf("a reader's click re-ran %v", r)
	}
	w.PassTime(clock, aftermerge.RerunPoll)
	if again := afterMergeCheck(w); again.ExternalID != c.ExternalID {
		t.Fatalf("the watch offered another button without a new failure: %+v", again)
	}
	// The reader's denied click used the button up: the maintainer types
	// the command, then clicks the next failed attempt's button.
	failedAgain(t, w, clock)
	c2 := waitCheck(t, w, "Run 41000000001 failed (attempt 2)")
	if c2.Title != "Run 41000000001 failed (attempt 2)" || !slices.Equal(c2.Actions, []string{"rerun-failed"}) {
		t.Fatalf("the second failure's check run: %+v", c2)
	}
	payload := w.ClickPayload(e2e.Maintainer, "e1", "rerun-failed", 0)
	w.Send("check_run", payload)
	e2e.MustContain(t, "the maintainer's click", w.LastReply(), "@maintainer re-running the", "of attempt 2 of run [41000000001](",
		"a click on the check run of e1e1e1e")
	waitStatus(t, w, "🔁 the failed jobs of attempt 2 were re-run, asked by @maintainer")
	w.Send("check_run", payload) // the same click, delivered again
	e2e.MustContain(t, "the click again", w.LastReply(), "this button was used already, by @maintainer")
	if r := w.GH.Reruns(); len(r) != 2 {
		t.Fatalf("re-runs asked: %v; want two, one per attempt", r)
	}
	w.PassTime(clock, aftermerge.Poll)
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "queued", HeadSHA: e2e.SHA("e1"),
		HeadBranch: "main", CreatedAt: time.Now(), Jobs: ingested, Attempt: 3}) // attempt 3 gathers the results and dispatches the ingest
	runCompleted(w, clock, "success")
	waitStatus(t, w, "✅ run [41000000001](", "succeeded at its re-run", "its ingest job `trigger-ingest` too")
	end := waitCheck(t, w, "After the merge: succeeded")
	if end.Conclusion != "success" || len(end.Actions) != 0 || end.Title != "After the merge: succeeded" {
		t.Fatalf("the merge commit's check run after the success: %+v; want success, no button", end)
	}
	for _, ch := range w.CheckRunsOn("e1") {
		if ch.Name != aftermerge.CheckName && len(ch.Actions) > 0 {
			t.Fatalf("another check run on the merge commit offers buttons: %+v", ch)
		}
	}
}

// The check run's button of an older attempt does nothing once the run
// failed again: its command says which attempt it was offered for.
func TestAfterMergeCheckRunButtonOfAnOlderAttemptIsRefused(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "")
	failedMerge(t, w, gpuFailed)
	waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	first := w.ClickPayload(e2e.Maintainer, "e1", "rerun-failed", 0)
	failedAgain(t, w, clock)
	w.Send("check_run", first)
	e2e.MustContain(t, "the old button's click", w.LastReply(), "this button was offered for attempt 1 of run 41000000001")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want the command's one", r)
	}
}

// An ingest that failed after the results were gathered, with a recovery
// configured, is offered for a recovery on the merge commit's check run,
// not for a re-run.
func TestAfterMergeOffersARecoveryOnTheMergeCommitsCheckRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "      recover:\n        workflow: .github/workflows/recover-reused-ingest.yml\n")
	reusedMergeFailed(t, w, ingestFailed)
	c := waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	if !slices.Equal(c.Actions, []string{"recover-ingest"}) {
		t.Fatalf("the ingest failure's check run offers %v; want Recover the ingest alone", c.Actions)
	}
	e2e.MustContain(t, "its summary", c.Summary, "its ingest failed, after the results were gathered", "`/recover-ingest` does the same")
}

// A Recover the ingest button names the attempt whose ingest failed: once
// the run failed again, the older attempt's button dispatches nothing and
// says so; the newest attempt's dispatches the recovery once. Once the
// recovery succeeded, the merge commit's check run says so with no button,
// and the watch ends "recovered" at its next look: a re-run is refused.
func TestAfterMergeRecoverButtonOfAnOlderAttemptIsRefused(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "      recover:\n        workflow: "+recoveryFile+"\n        min_role: write\n")
	w.GH.AddWorkflow(e2e.Repo, "recover-reused-ingest.yml", recoveryID)
	onMain(w, recoveryWorkflow)
	reusedMergeFailed(t, w, ingestFailed)
	waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	first := w.ClickPayload(e2e.Maintainer, "e1", "recover-ingest", 0)
	w.GH.RerunRun(e2e.Repo, mainRun) // re-run on GitHub, by hand
	w.PassTime(clock, aftermerge.RerunPoll)
	waitStatus(t, w, "⏳ attempt 2 of run [41000000001](", "is queued")
	runCompleted(w, clock, "failure")
	waitCheck(t, w, "Run 41000000001 failed (attempt 2)")
	w.Send("check_run", first)
	e2e.MustContain(t, "the older attempt's click", w.LastReply(), "this button was offered for attempt 1 of run 41000000001, whose ingest failed")
	if d := w.GH.WorkflowDispatches(); len(d) != 0 {
		t.Fatalf("the older attempt's button dispatched %+v", d)
	}
	w.ClickCheckRun(e2e.Maintainer, "e1", "recover-ingest", 0)
	w.WaitReply(recoveryTitle, "🛟 dispatched `"+recoveryFile+"` with source-run-id 31147925932 and merge-run-id 41000000001: run [")
	ds := w.GH.WorkflowDispatches()
	if len(ds) != 1 {
		t.Fatalf("the newest attempt's button dispatched %d times; want once", len(ds))
	}
	w.GH.CompleteRun(e2e.Repo, ds[0].RunID, "success", nil)
	w.PassTime(clock, aftermerge.Poll)
	w.WaitReply(recoveryTitle, "✅ recovery run [")
	if c := waitCheck(t, w, "After the merge: ingest recovered"); c.Conclusion != "success" || len(c.Actions) != 0 {
		t.Fatalf("the merge commit's check run after the recovery: %+v; want success, no button", c)
	}
	w.PassTime(clock, aftermerge.RerunPoll)
	waitStatus(t, w, "🛟 the ingest of run [41000000001](", "was recovered by recovery run [", "asked by @maintainer")
	if c := waitCheck(t, w, "After the merge: recovered"); c.Conclusion != "success" || len(c.Actions) != 0 {
		t.Fatalf("the merge commit's check run once the watch ended: %+v; want success, no button", c)
	}
	w.Comment(e2e.Maintainer, "/rerun-failed")
	e2e.MustContain(t, "a re-run after the recovery", w.LastReply(), "was recovered already, by @maintainer",
		"a re-run would publish its results again")
}

// An attempt that no button mends (cancelled) after one that offered a
// re-run: the merge commit's check run says the attempt failed and takes
// the older button away.
func TestAfterMergeCheckRunOffersNothingForACancelledAttempt(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "")
	failedMerge(t, w, gpuFailed)
	waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w.PassTime(clock, aftermerge.Poll)
	runCompleted(w, clock, "cancelled")
	if c := waitCheck(t, w, "Run 41000000001 failed (attempt 2)"); len(c.Actions) != 0 || c.Conclusion != "neutral" {
		t.Fatalf("the cancelled attempt's check run: %+v; want no button", c)
	}
}

// A success the watch warns of (the ingest took another source run than
// the audit's) ends the merge commit's check run neutral, not green.
func TestAfterMergeCheckRunIsNotGreenWithAWarning(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorld(t, clock, "      downstream:\n        repo: "+resultsRepo+"\n        workflow: .github/workflows/ingest.yml\n")
	w.GH.AddRepo(resultsRepo, "ingest.yml", 501)
	lint := []githubtest.Job{{Name: "lint", Conclusion: "failure", Labels: []string{"ubuntu-latest"}},
		{Name: "collect-results", Conclusion: "skipped"}, {Name: "trigger-ingest", Conclusion: "skipped"}}
	reusedMergeFailed(t, w, lint)
	waitCheck(t, w, "Run 41000000001 failed (attempt 1)")
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "success",
		HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: ingested, Attempt: 2})
	runCompleted(w, clock, "success")
	waitStatus(t, w, "its ingest job `trigger-ingest` too")
	ingestRunOf(w, 31000000099, "completed", "success")
	w.PassTime(clock, aftermerge.Poll)
	waitStatus(t, w, "⚠️ Its source run 31000000099 is not run 31147925932")
	if c := waitCheck(t, w, "After the merge: succeeded"); c.Conclusion != "neutral" {
		t.Fatalf("the check run of a success with a warning: %+v; want neutral", c)
	}
}
