package aftermerge_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
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
	w.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w.PassTime(clock, aftermerge.Poll)
	runCompleted(w, clock, "failure")
	waitStatus(t, w, "ended `failure` at attempt 2")
	answers := len(sl.Responses())
	w.SlackClick(sl, "U0MAINT", "rerun-failed", first)
	e2e.MustContain(t, "the old button's answer", e2e.SlackAnswer(t, sl, answers), "this button was offered for attempt 1 of run 41000000001",
		"use the newest message's button")
	if r := w.GH.Reruns(); len(r) != 1 {
		t.Fatalf("re-runs asked: %v; want only the typed one", r)
	}
}
