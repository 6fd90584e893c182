package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// appWorld is a world where opsbot runs as a GitHub App (check runs are
// an App's).
func appWorld(t *testing.T) *world {
	t.Helper()
	return appWorldOpts(t, worldOpts{})
}

// appWorldOpts is appWorld with additions to the configuration.
func appWorldOpts(t *testing.T, o worldOpts) *world {
	t.Helper()
	o.App = true
	return newWorldOpts(t, o)
}

// As a GitHub App, opsbot puts a check run on every decided head, and on a
// head whose sweep finished the buttons Reuse for next push and Merge with
// reuse: a maintainer's click pins the run as them and the next push
// skips; a click on a head that is no longer the PR's is refused saying
// why. With a token, no check run is made.
func TestCheckRunButtons(t *testing.T) {
	t.Parallel()
	w := appWorld(t)
	w.Push("c2")
	if cr := w.CheckRunsOn("c2"); len(cr) != 1 || cr[0].Conclusion != "neutral" || len(cr[0].Actions) != 0 {
		t.Fatalf("check runs on c2 after its sweep decision: %+v", cr)
	}
	const r2 = int64(31200000020)
	w.GH.AddRun(theRepo, githubtest.Run{ID: r2, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w.SweepCompleted("c2", r2, "success")
	cr := w.CheckRunsOn("c2")
	ids, labels := offered(t)
	if len(cr) != 2 || strings.Join(cr[1].Actions, ",") != ids || !strings.HasPrefix(cr[1].ExternalID, fmt.Sprintf("%d:%d:", thePR, r2)) ||
		strings.Join(cr[1].Labels, ",") != labels {
		t.Fatalf("check runs on c2 after its sweep finished: %+v, want the buttons %s (%s)", cr, ids, labels)
	}
	// Its summary says what each of its buttons does.
	mustContain(t, "the offer's summary", cr[1].Summary, "**Reuse for next push**: pin this run for the next push",
		"**Merge with reuse**: pin this run, then merge the PR")

	w.ClickCheckRun(maintainer, "c2", "reuse", r2)
	mustContain(t, "maintainer's click", w.LastReply(), "📌 @maintainer pinned run [31200000020](", "a click on the check run of c2c2c2c")
	w.Push("c3")
	if w.Swept("c3") {
		t.Fatalf("the push after the click swept: %+v", w.Statuses("c3"))
	}
	if cr := w.CheckRunsOn("c3"); len(cr) != 1 || cr[0].Conclusion != "success" || !strings.Contains(cr[0].Title, "reusing run 31200000020") {
		t.Fatalf("check run on the skipped head: %+v", cr)
	}
	if cr := w.CheckRunsOn("c3"); len(cr) != 1 || strings.Join(cr[0].Actions, ",") != "sweep" {
		t.Fatalf("the skipped head's check run offers %+v, want Sweep anyway", cr)
	}
	// The skipped head's workflow run completes too: it measured nothing,
	// and nothing offers it for reuse.
	w.GH.AddRun(theRepo, githubtest.Run{ID: 31200000021, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c3"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Minute)})
	w.SweepCompleted("c3", 31200000021, "success")
	if cr := w.CheckRunsOn("c3"); len(cr) != 1 {
		t.Fatalf("a skipped head's run was offered for reuse: %+v", cr)
	}
	w.ClickCheckRun(maintainer, "c3", "sweep", r2)
	mustContain(t, "sweep anyway", w.LastReply(), "🔁 @maintainer asked for the sweep of `c3c3c3c` after all")
	if out, _ := w.gate("--pr", "2512", "--sha", sha("c3")); out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"]+out["reason"], "sweep anyway") {
		t.Fatalf("the gate after Sweep anyway: %v", out)
	}
	// The skip saved nothing after all. The attempt that was skipped
	// measured nothing, whatever it uploaded (an aggregate of the reused
	// results): it cannot be pinned; the workflow's re-run, an attempt
	// started after Sweep anyway, is the head's own sweep and can be.
	saved, _, err := runCLI(t, map[string]string{"OPSBOT_API_TOKEN": apiToken}, "audit", "--server", w.Srv.URL, "--saved", "--format", "json")
	if err != nil || !strings.Contains(saved, `"skips": 0`) {
		t.Fatalf("saved totals after Sweep anyway: %v\n%s", err, saved)
	}
	w.Comment(maintainer, "/reuse-sweep-run 31200000021")
	mustContain(t, "pin of the skipped attempt", w.LastReply(), "I did not pin run 31200000021", "its attempt 1 started before the sweep of its commit `c3c3c3c` was asked for anyway")
	w.GH.RerunRun(theRepo, 31200000021)
	w.GH.CompleteRun(theRepo, 31200000021, "success", resultArtifacts)
	w.Comment(maintainer, "/reuse-sweep-run 31200000021")
	mustContain(t, "pin of the re-run", w.LastReply(), "📌 @maintainer pinned run [31200000021](")
	// A button of the old head's check run not used yet does nothing on
	// a head that is no longer the PR's.
	w.ClickCheckRun(maintainer, "c2", "merge", r2)
	mustContain(t, "old head's click", w.LastReply(), "nothing was done: the button is on the check run of `c2c2c2c`, which is no longer this PR's head (`c3c3c3c`)")

	tok := newWorld(t, "")
	tok.Push("c2")
	if n := len(tok.GH.CreatedCheckRuns()); n != 0 {
		t.Fatalf("with a token opsbot made %d check runs", n)
	}
}

// As a GitHub App, opsbot's own check run on a head is not one of the
// head's checks: a merge waits for the CI's.
func TestMergeWithReuseAsAnAppWaitsForCI(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorldOpts(t, worldOpts{Repo: "    merge:\n      min_role: write\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Behind = true })
	w.Comment(maintainer, "/merge-with-reuse 31147925932")
	w.WaitStatus("the update asked", "update asked")
	updated := w.GH.PRHead(theRepo, thePR)
	w.SendSync(updated, "") // opsbot's status and check run on the update: skipped
	w.PassTime(clock, record.WakeGap)
	w.WaitStatus("waiting, with no CI check yet", "(none yet;")
	if n := len(w.GH.Merges()); n != 0 {
		t.Fatalf("merged with only opsbot's own check run on the head: %+v", w.GH.Merges())
	}
	if cr := w.GH.CreatedCheckRuns(); len(cr) == 0 {
		t.Fatal("opsbot made no check run on the update")
	}
}

// Each button of opsbot's check runs acts once, whatever its click did:
// GitHub signs a click's body but not its delivery id, so a captured click
// sent again under a new id (after the maintainer cancelled what it did)
// is refused, saying who used the button and when, and changes nothing.
func TestCheckRunClickReplayedUnderANewIDDoesNothing(t *testing.T) {
	t.Parallel()
	w := appWorld(t)
	w.Push("c2")
	const r2 = int64(31200000020)
	w.GH.AddRun(theRepo, githubtest.Run{ID: r2, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w.SweepCompleted("c2", r2, "success")
	captured := w.ClickPayload(maintainer, "c2", "reuse", r2)
	w.Send("check_run", captured)
	mustContain(t, "the click", w.LastReply(), "📌 @maintainer pinned run [31200000020](")
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	mustContain(t, "cancel", w.LastReply(), "revoked")
	w.Send("check_run", captured) // the same signed body, a new delivery id
	mustContain(t, "the replay", w.LastReply(), "nothing was done: this button was used already, by @maintainer", "(its click acted)",
		"each button acts once. Type `/reuse-sweep-run 31200000020` on the PR to do it again.")
	w.Push("c3")
	if !w.Swept("c3") {
		t.Fatalf("the push after a replayed click = %+v; want a sweep: the replay pinned the run again", w.Statuses("c3"))
	}
	var refused bool
	for _, r := range w.audit() {
		refused = refused || (r["kind"] == "command" && r["outcome"] == "rejected" && strings.Contains(fmt.Sprint(r["reason"]), "the button was used already"))
	}
	if !refused {
		t.Fatalf("the replay is not in the audit: %v", w.trail())
	}
}

// offered are the buttons a finished sweep's check run offers, as the
// registry lists them (opsbot's own first: Reuse for next push and Merge
// with reuse; a command added later adds its own after them).
func offered(t *testing.T) (ids, labels string) { return e2e.Offered(t) }
