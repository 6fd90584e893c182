package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// A click refused uses its button up as a click that acted does: each
// offered button carries its offer's nonce, and a captured click sent again
// under a new delivery id once what refused it has changed is refused as
// used, and does nothing. The cases below are each such refusal, replayed
// when it would otherwise act as the one who clicked.

// A maintainer types /merge-with-reuse and also clicks Merge with reuse
// (refused: a merge is under way), then cancels the merge; once the checks
// pass, the replayed click starts no merge.
func TestRefusedMergeClickReplayedAfterACancelMergesNothing(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := appWorldOpts(t, worldOpts{Repo: "    merge:\n      min_role: write\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	w.offerRun("c2", offeredRun)
	w.Comment(maintainer, "/merge-with-reuse 31200000020")
	w.WaitStatus("the merge waits for the checks", "(none yet;")
	captured := w.ClickPayload(maintainer, "c2", "merge", offeredRun)
	w.Send("check_run", captured)
	mustContain(t, "the refused click", w.LastReply(), "a merge of this PR is already under way")
	w.Comment(maintainer, "/merge-with-reuse cancel")
	w.WaitStatus("the merge cancelled", "cancelled")
	w.GreenChecks(sha("c2"))
	w.Send("check_run", captured)
	mustContain(t, "the replay", w.LastReply(), "nothing was done: this button was used already, by @maintainer",
		"its click was rejected", "Type `/merge-with-reuse 31200000020` on the PR to do it again.")
	pinned := 0
	for _, r := range w.audit() {
		if r["kind"] == "merge" && r["outcome"] == "pinned" {
			pinned++
		}
	}
	if pinned != 1 {
		t.Fatalf("%d merges began; want only the typed one: %v", pinned, w.trail())
	}
	if m := w.GH.Merges(); len(m) != 0 {
		t.Fatalf("the replayed click merged the PR: %+v", m)
	}
}

// A reader's click is refused for the role; replayed once the reader has
// write access, it pins nothing. A click on the same button by a
// maintainer is refused too: the button was used, and the reply names the
// command to type.
func TestRoleRefusedClickReplayedAfterAPromotionPinsNothing(t *testing.T) {
	t.Parallel()
	w := appWorldOpts(t, worldOpts{GitHub: "  role_cache_ttl: \"1ns\"\n"})
	w.offerRun("c2", offeredRun)
	captured := w.ClickPayload(reader, "c2", "reuse", offeredRun)
	w.Send("check_run", captured)
	mustContain(t, "reader's click", w.LastReply(), "@reader", "needs the `write` role")
	w.GH.SetRole(theRepo, readerLog, "write")
	w.Send("check_run", captured)
	mustContain(t, "the replay", w.LastReply(), "@reader nothing was done: this button was used already, by @reader", "its click was denied")
	w.ClickCheckRun(maintainer, "c2", "reuse", offeredRun)
	mustContain(t, "the maintainer's click", w.LastReply(), "@maintainer nothing was done: this button was used already, by @reader",
		"Type `/reuse-sweep-run 31200000020` on the PR")
	w.Push("c3")
	if !w.Swept("c3") {
		t.Fatalf("a replayed click pinned: %+v", w.Statuses("c3"))
	}
}

// A click refused because the PR's labels make its sweep partial, replayed
// once the labels are right, pins nothing.
func TestLabelRefusedClickReplayedPinsNothing(t *testing.T) {
	t.Parallel()
	w := appWorld(t)
	w.offerRun("c2", offeredRun)
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "evals-only")
	captured := w.ClickPayload(maintainer, "c2", "reuse", offeredRun)
	w.Send("check_run", captured)
	mustContain(t, "the refused click", w.LastReply(), "I did not pin run 31200000020", "labelled `evals-only`")
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled")
	w.Send("check_run", captured)
	mustContain(t, "the replay", w.LastReply(), "nothing was done: this button was used already, by @maintainer", "its click was rejected")
	w.Push("c3")
	if !w.Swept("c3") {
		t.Fatalf("a replayed click pinned: %+v", w.Statuses("c3"))
	}
}

// Sweep anyway clicked by a reader is refused for the role; replayed once
// the reader may pin, it overrides nothing.
func TestRefusedSweepAnywayReplayedOverridesNothing(t *testing.T) {
	t.Parallel()
	w := appWorldOpts(t, worldOpts{GitHub: "  role_cache_ttl: \"1ns\"\n"})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	if w.Swept("c2") {
		t.Fatalf("the pinned push swept: %+v", w.Statuses("c2"))
	}
	captured := w.ClickPayload(reader, "c2", "sweep", runR1)
	w.Send("check_run", captured)
	mustContain(t, "reader's Sweep anyway", w.LastReply(), "@reader nothing was done:", "`write`")
	w.GH.SetRole(theRepo, readerLog, "write")
	w.Send("check_run", captured)
	mustContain(t, "the replay", w.LastReply(), "nothing was done: this button was used already, by @reader", "Sweep anyway acts once for each skip.")
	if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "true" {
		t.Fatalf("the gate after a replayed Sweep anyway: %v", out)
	}
}

// A click refused because its check run's head is no longer the PR's,
// replayed after the author force-pushes that head back, pins nothing; the
// same on a fork's PR, whose check runs list no PR (the click is known by
// the PR its check run's external_id names).
func TestOldHeadClickReplayedAfterAForcePushBackPinsNothing(t *testing.T) {
	t.Parallel()
	for _, fork := range []bool{false, true} {
		t.Run(fmt.Sprintf("fork=%v", fork), func(t *testing.T) {
			t.Parallel()
			w := appWorld(t)
			w.offerRun("c2", offeredRun)
			w.Push("c3")
			captured := w.ClickPayload(maintainer, "c2", "reuse", offeredRun)
			if fork {
				setPath(captured, "check_run.pull_requests", []any{}) // as GitHub sends a fork's PR's
			}
			w.Send("check_run", captured)
			mustContain(t, "the refused click", w.LastReply(), "which is no longer this PR's head")
			w.forcePushBack("c2")
			// The head is c2 again: another button of its check run is not
			// refused for its head (the maintainer lacks merge's role).
			w.ClickCheckRun(maintainer, "c2", "merge", offeredRun)
			mustContain(t, "a click once c2 is the head again", w.LastReply(), "needs the `maintain` role")
			w.Send("check_run", captured)
			mustContain(t, "the replay", w.LastReply(), "nothing was done: this button was used already, by @maintainer", "its click was rejected")
			w.Push("c4")
			if !w.Swept("c4") {
				t.Fatalf("a replayed click pinned: %+v", w.Statuses("c4"))
			}
		})
	}
}

// forcePushBack force-pushes the PR's branch back to commit name (an older
// head), and sends its synchronize as GitHub does: a delivery of its own
// (stamped later than the pushes before it), stored and taken.
func (w *world) forcePushBack(name string) {
	w.T.Helper()
	w.GH.ForcePush(theRepo, thePR, []string{sha("c1"), sha(name)})
	p := w.SyncPayload(sha(name))
	setPath(p, "pull_request.updated_at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if code := w.SendAs(w.ID(), "pull_request", p); code != http.StatusAccepted {
		w.T.Fatalf("the synchronize back to %s was answered %d, not stored", name, code)
	}
}

// A database restored from a backup takes no click offered before the
// backup: a click used since, captured and sent again, finds a button
// opsbot does not know, and does nothing.
func TestRestoredDatabaseTakesNoClickOfferedBefore(t *testing.T) {
	t.Parallel()
	w := appWorld(t)
	w.offerRun("c2", offeredRun)
	copyPath := filepath.Join(t.TempDir(), "restored.db")
	if _, errOut, err := runCLI(t, tokenEnv, "backup", "--server", w.Srv.URL, "--out", copyPath); err != nil {
		t.Fatalf("backup: %v %s", err, errOut)
	}
	captured := w.ClickPayload(maintainer, "c2", "reuse", offeredRun)
	w.Send("check_run", captured)
	mustContain(t, "the click", w.LastReply(), "📌 @maintainer pinned run")
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	w.Srv.Stop(t)
	w.Srv = startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, "--state", copyPath)
	w.Send("check_run", captured)
	mustContain(t, "the replay on the restored database", w.LastReply(), "nothing was done: opsbot did not offer this button on this PR")
	w.Push("c3")
	if !w.Swept("c3") {
		t.Fatalf("a replayed click pinned on the restored database: %+v", w.Statuses("c3"))
	}
}

// A click that names no offer (a check run made before buttons carried a
// nonce, or an external_id with another's) is refused, naming the buttons
// to use now, and does nothing.
func TestClickWithoutAnOfferIsRefused(t *testing.T) {
	t.Parallel()
	w := appWorld(t)
	w.offerRun("c2", offeredRun)
	p := w.ClickPayload(maintainer, "c2", "reuse", offeredRun)
	setPath(p, "check_run.external_id", fmt.Sprintf("%d:%d", thePR, offeredRun))
	w.Send("check_run", p)
	mustContain(t, "no nonce", w.LastReply(), "@maintainer nothing was done: opsbot did not offer this button on this PR",
		"Use the buttons of the newest check run on this PR's head `c2c2c2c`, or type the command.")
	setPath(p, "check_run.external_id", fmt.Sprintf("%d:%d:%s", thePR, offeredRun, "aaaaaaaaaaaaaaaaaaaaaaaaaa"))
	w.Send("check_run", p)
	mustContain(t, "an unknown nonce", w.LastReply(), "opsbot did not offer this button on this PR")
	w.Push("c3")
	if !w.Swept("c3") {
		t.Fatalf("a click without an offer pinned: %+v", w.Statuses("c3"))
	}
}

// offeredRun is the sweep run of c2 that offerRun offers.
const offeredRun = int64(31200000020)

// offerRun pushes commit name and completes its sweep run: opsbot's check
// run on it offers the run's buttons.
func (w *world) offerRun(name string, run int64) {
	w.T.Helper()
	w.Push(name)
	w.GH.AddRun(theRepo, githubtest.Run{ID: run, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha(name), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w.SweepCompleted(name, run, "success")
	if cr := w.CheckRunsOn(name); len(cr) == 0 || len(cr[len(cr)-1].Actions) == 0 {
		w.T.Fatalf("no check run on %s offers run %d: %+v", name, run, cr)
	}
}
