package aftermerge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const mainRun = int64(41000000001)

// world is the server with the watch on, on the clock the test moves.
func world(t *testing.T, clock *e2e.Clock) *e2e.World {
	t.Helper()
	return e2e.New(t, e2e.Options{Repo: "    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n",
		Top:  "audit_web:\n  enabled: true\n  user_env: TEST_AUDIT_USER\n  password_env: TEST_AUDIT_PASSWORD\n",
		Env:  map[string]string{"TEST_AUDIT_USER": "maint", "TEST_AUDIT_PASSWORD": "s3cret-page-0123456"},
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
}

// title starts the watch's comment.
const title = "🚀 **After the merge**"

// status is the watch's comment on the PR ("": none).
func status(w *e2e.World) string { return w.NewestReply(title) }

func waitStatus(t *testing.T, w *e2e.World, subs ...string) string {
	t.Helper()
	return w.WaitReply(title, subs...)
}

// merged merges the PR into main as commit e1, as GitHub's webhook says.
func merged(w *e2e.World) {
	w.T.Helper()
	w.GH.ClosePR(e2e.Repo, e2e.PR, true, e2e.SHA("e1"))
	w.Send("pull_request", closed(w, true, "main"))
}

// closed is the PR's closed webhook, merged into base (or not).
func closed(w *e2e.World, merged bool, base string) map[string]any {
	merge := ""
	if merged {
		merge = e2e.SHA("e1")
	}
	p := w.ClosedPayload(merged, merge)
	e2e.SetPath(p, "pull_request.base.ref", base)
	e2e.SetPath(p, "repository.default_branch", "main")
	e2e.SetPath(p, "pull_request.user.login", "author")
	return p
}

// ingested are a main run's jobs: a GPU job, the results gathered, and the
// ingest dispatched.
var ingested = []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "success"}, {Name: "collect-results", Conclusion: "success"},
	{Name: "trigger-ingest", Conclusion: "success"}}

// mainRunOf adds the sweep workflow's push run on the merge commit.
func mainRunOf(w *e2e.World, status, conclusion string, jobs []githubtest.Job) {
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: status, Conclusion: conclusion,
		HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: jobs, Attempt: 1})
}

// runCompleted completes the main run's attempt with conclusion, and
// GitHub's workflow_run completed for it reaches opsbot: the watch wakes on
// it within record.WakeGap, long before its next poll (RunPoll).
func runCompleted(w *e2e.World, clock *e2e.Clock, conclusion string) {
	w.T.Helper()
	w.GH.CompleteRun(e2e.Repo, mainRun, conclusion, nil)
	w.Send("workflow_run", runPayload(w, conclusion))
	w.PassTime(clock, record.WakeGap)
}

// runningMerge merges the decided PR, and the watch finds its main run in
// progress.
func runningMerge(t *testing.T, w *e2e.World, clock *e2e.Clock) {
	t.Helper()
	w.Push("c2")
	merged(w)
	mainRunOf(w, "in_progress", "", nil)
	w.PassTime(clock, aftermerge.Poll)
	waitStatus(t, w, "⏳ run [41000000001](", "is in progress")
}

// runPayload is GitHub's workflow_run completed of the main run: a push
// run on the merge commit, which lists no PR.
func runPayload(w *e2e.World, conclusion string) map[string]any {
	p := e2e.Payload(w.T, "workflow_run", "completed")
	e2e.SetPath(p, "repository.full_name", e2e.Repo)
	for k, v := range map[string]any{"id": mainRun, "head_sha": e2e.SHA("e1"), "head_branch": "main", "event": "push", "conclusion": conclusion,
		"path": ".github/workflows/run-sweep.yml", "pull_requests": []any{}} {
		e2e.SetPath(p, "workflow_run."+k, v)
	}
	return p
}

// The main run's workflow_run completion wakes the watch at once, ten
// minutes before its next poll would read the run; once the watch ended,
// the merge commit is no PR's, and its events are ignored at intake.
func TestAfterMergeWakesOnTheMainRunsCompletion(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	runningMerge(t, w, clock)
	runCompleted(w, clock, "success")
	waitStatus(t, w, "✅ run [41000000001](", "succeeded", "opsbot reused nothing for the merged head `c2c2c2c`")
	body, err := json.Marshal(runPayload(w, "success"))
	if err != nil {
		t.Fatal(err)
	}
	code, rep := e2e.Post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "workflow_run", w.ID(), body, e2e.Secret))
	if code != http.StatusAccepted || rep["status"] != "ignored" || !strings.Contains(fmt.Sprint(rep["reason"]), "nor one a sequence watches") {
		t.Fatalf("the ended watch's merge commit's run: %d %v; want it ignored", code, rep)
	}
}

// A reused merge whose main run succeeds: the comment, naming the author,
// says the run and its ingest job succeeded, and the run opsbot reused for
// the merged head and who authorized it, which is what the gate answers a
// push of the merge; the audit keeps the watch's steps.
func TestAfterMergeSaysTheRunsOfASucceededMainRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2") // the gate skips its sweep on the pin
	merged(w)
	waitStatus(t, w, "🚀 **After the merge**, for @author: merge commit `e1e1e1e` of head `c2c2c2c` on `main`",
		"no run of `.github/workflows/run-sweep.yml` on the merge commit yet")
	mainRunOf(w, "completed", "success", ingested)
	w.PassTime(clock, aftermerge.Poll)
	st := waitStatus(t, w, "✅ run [41000000001](", "on `main` succeeded, its ingest job `trigger-ingest` too")
	e2e.MustContain(t, "status", st, "opsbot decided the merged head `c2c2c2c` by reuse of run 31147925932, authorized by @maintainer")
	if ans := w.Gate(gate.Request{Event: "push", SHA: e2e.SHA("e1")}); !ans.ReuseEnabled || ans.RunID != 31147925932 {
		t.Fatalf("the gate answers a push of the merge %+v; the comment says run 31147925932", ans)
	}
	var steps []string
	for _, r := range w.AuditRecords() {
		if r["kind"] == "after_merge" {
			steps = append(steps, r["outcome"].(string))
		}
	}
	if strings.Join(steps, ",") != "waiting_run,succeeded" {
		t.Fatalf("the audit's after-merge steps are %v", steps)
	}
	// The PR's audit page shows the chain: the pin, the heads decided, and
	// after the merge the main run followed.
	req, err := http.NewRequest(http.MethodGet, w.Srv.URL+"/audit/"+e2e.Repo+"/"+strconv.Itoa(e2e.PR), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("maint", "s3cret-page-0123456")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, table, _ := strings.Cut(string(page), `<table id="after-merge">`)
	table, _, _ = strings.Cut(table, "</table>")
	if strings.Contains(table, "31147925932\">") {
		t.Fatalf("the after-merge table links the run the head reused as a main run:\n%s", table)
	}
	e2e.MustContain(t, "the after-merge table", table, "reused run 31147925932, authorized by @maintainer")
	e2e.MustContain(t, "the PR's audit page", string(page), `<h2>After the merge</h2>`, `<table id="after-merge">`,
		`/actions/runs/41000000001">41000000001</a>`, `/commit/`+e2e.SHA("e1"), "<td data-label=\"step\">succeeded</td>", `id="pins"`)
}

// A main run failing before the results were gathered (a GPU job): the
// comment lists the failed job with its link and its first error (the
// failure annotation, not a notice before it) and says a re-run is the way.
// One failing only in the ingest job: said to be after the results were
// gathered, where a re-run of the GPU jobs is not the way.
func TestAfterMergeSaysWhereTheMainRunFailed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		jobs []githubtest.Job
		want []string
	}{
		{"before gathering", []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "failure",
			Error: "Process completed with exit code 137.\nthe runner ran out of memory"}, {Name: "collect-results", Conclusion: "skipped"},
			{Name: "trigger-ingest", Conclusion: "skipped"}},
			[]string{"1 job failed: [single-node 1k1k / kimi](https://github.com/", "/actions/runs/41000000001/job/",
				"(failure: Process completed with exit code 137.)",
				"It failed before the results were gathered: re-running the failed jobs is the way"}},
		{"cancelled", []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "cancelled"}},
			[]string{"It was cancelled (by hand, or by a newer run of its concurrency group): nothing was ingested from it"}},
		{"in the ingest", []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "success"}, {Name: "collect-results", Conclusion: "success"},
			{Name: "trigger-ingest", Conclusion: "failure"}},
			[]string{"1 job failed: [trigger-ingest](", "Only the ingest failed, after the results were gathered: re-running the GPU jobs is not the way"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := world(t, clock)
			w.Push("c2") // decided: the gate sweeps it
			merged(w)
			waitStatus(t, w, "no run of `.github/workflows/run-sweep.yml` on the merge commit yet")
			conclusion := "failure"
			if c.name == "cancelled" {
				conclusion = "cancelled"
			}
			mainRunOf(w, "completed", conclusion, c.jobs)
			w.PassTime(clock, aftermerge.Poll)
			st := waitStatus(t, w, "❌ run [41000000001](", "ended `"+conclusion+"`", "⏳ opsbot follows a re-run of the failed jobs until")
			e2e.MustContain(t, "status", st, c.want...)
		})
	}
}

// A failed attempt is followed by its re-run: the comment keeps the
// failure, says the re-run runs, and its success; without a re-run, the
// deadline ends the watch saying none succeeded.
func TestAfterMergeFollowsAReRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Push("c2")
	failing := []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "failure"}, {Name: "trigger-ingest", Conclusion: "skipped"}}
	mainRunOf(w, "completed", "failure", failing)
	merged(w)
	waitStatus(t, w, "❌ run [41000000001](", "⏳ opsbot follows a re-run of the failed jobs until")
	w.GH.RerunRun(e2e.Repo, mainRun)
	w.PassTime(clock, aftermerge.RerunPoll)
	waitStatus(t, w, "❌ run [41000000001](", "⏳ attempt 2 of run [41000000001](", "is queued")
	runCompleted(w, clock, "success")
	st := waitStatus(t, w, "✅ run [41000000001](", "succeeded at its re-run (attempt 1 failed)")
	e2e.MustContain(t, "status", st, "❌ run [41000000001](") // the failure stays in the comment

	w2 := world(t, clock)
	w2.Push("c2")
	mainRunOf(w2, "completed", "failure", failing)
	merged(w2)
	waitStatus(t, w2, "⏳ opsbot follows a re-run of the failed jobs until")
	w2.PassTime(clock, 12*time.Hour+time.Minute)
	waitStatus(t, w2, "⌛ no re-run of run [41000000001](", "succeeded within 12h of the merge")
}

// A merge whose closed webhook was lost: the reconcile finds the PR closed
// on GitHub while opsbot holds it open, takes its close in, and the merge
// is followed as the webhook would have had it followed (a reconcile whose
// read of the PR failed fails, and the next one reads the window again; one
// whose read found nothing skips it);
// the next reconcile takes nothing in again.
func TestAfterMergeFollowsAMergeWhoseWebhookWasLost(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	reconcile := func() string {
		t.Helper()
		r := w.Call(http.MethodPost, "/api/v1/reconcile", `{"repo":"`+e2e.Repo+`"}`)
		if r.Code != http.StatusOK {
			t.Fatalf("reconcile: %d %s", r.Code, r.Body)
		}
		w.Settle()
		return r.Body
	}
	reconcile() // the repository's first: it records what it finds
	w.Push("c2")
	mainRunOf(w, "completed", "success", ingested)
	w.GH.ClosePR(e2e.Repo, e2e.PR, true, e2e.SHA("e1")) // its webhook lost
	// The PR's read fails once: that reconcile fails, and the next one
	// reads the same window again.
	w.GH.Inject("GET /repos/{owner}/{repo}/pulls/{n}", githubtest.Fault{Status: 403,
		Body: `{"message":"Resource not accessible by integration"}`, Times: 1})
	if r := w.Call(http.MethodPost, "/api/v1/reconcile", `{"repo":"`+e2e.Repo+`"}`); r.Code == http.StatusOK ||
		!strings.Contains(r.Body, "reading the closed PR #"+strconv.Itoa(e2e.PR)) {
		t.Fatalf("a reconcile whose read of the closed PR failed: %d %s", r.Code, r.Body)
	}
	// One GitHub does not find is skipped, the reconcile done: failing on
	// it would hold every later one to this window.
	w.GH.Inject("GET /repos/{owner}/{repo}/pulls/{n}", githubtest.Fault{Status: 404, Body: `{"message":"Not Found"}`, Times: 2}) // a 404 is read twice
	if rep := reconcile(); strings.Contains(rep, "closes_recovered") {
		t.Fatalf("a reconcile that could not find the closed PR: %s", rep)
	}
	if rep := reconcile(); !strings.Contains(rep, `"closes_recovered":[`+strconv.Itoa(e2e.PR)+`]`) {
		t.Fatalf("the reconcile after the lost merge: %s", rep)
	}
	st := waitStatus(t, w, "🚀 **After the merge**", "merge commit `e1e1e1e` of head `c2c2c2c` on `main`", "✅ run [41000000001](",
		"on `main` succeeded, its ingest job `trigger-ingest` too")
	if rep := reconcile(); strings.Contains(rep, "closes_recovered") {
		t.Fatalf("a second reconcile takes the close in again: %s", rep)
	}
	if again := status(w); again != st {
		t.Fatalf("the status changed after the second reconcile:\n%s\nwas\n%s", again, st)
	}
}

// A repository's first reconcile (a fresh or restored database) takes in
// no lost close, and a closed webhook of a merge older than the watch's
// deadline (redelivered, or a close taken in late) begins no watch: its run
// is history, and nothing offers to re-run or recover it.
func TestAfterMergeFollowsNoOldMerge(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Push("c2")
	mainRunOf(w, "completed", "failure", []githubtest.Job{{Name: "single-node 1k1k / kimi", Conclusion: "failure"}})
	w.GH.ClosePR(e2e.Repo, e2e.PR, true, e2e.SHA("e1")) // its webhook lost
	r := w.Call(http.MethodPost, "/api/v1/reconcile", `{"repo":"`+e2e.Repo+`"}`)
	if r.Code != http.StatusOK || !strings.Contains(r.Body, `"first":true`) || strings.Contains(r.Body, "closes_recovered") {
		t.Fatalf("a first reconcile after a lost merge: %d %s", r.Code, r.Body)
	}
	w.Settle()
	p := closed(w, true, "main")
	e2e.SetPath(p, "pull_request.merged_at", clock.Now().Add(-13*time.Hour).UTC().Format(time.RFC3339))
	w.Send("pull_request", p)
	if st := status(w); st != "" {
		t.Fatalf("a merge older than the deadline is followed:\n%s", st)
	}
	for _, rec := range w.AuditRecords() {
		if rec["kind"] == "after_merge" {
			t.Fatalf("audited: %v", rec)
		}
	}
}

// A merge of a PR opsbot never decided (no push of it was gated), a PR
// closed without merging, one merged into another branch: nothing is said,
// and nothing is followed.
func TestAfterMergeSaysNothingOfWhatItDoesNotFollow(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	merged(w)
	if st := status(w); st != "" {
		t.Fatalf("a merge opsbot never decided is followed:\n%s", st)
	}
	w.Push("c2") // decided from now on
	w.Send("pull_request", closed(w, false, "main"))
	w.Send("pull_request", closed(w, true, "release-1"))
	if st := status(w); st != "" {
		t.Fatalf("a PR closed unmerged, or merged into another branch, is followed:\n%s", st)
	}
	for _, r := range w.AuditRecords() {
		if r["kind"] == "after_merge" {
			t.Fatalf("audited: %v", r)
		}
	}
}

// A restart while the main run runs: the watch is in the record, and the
// next process follows it to its end.
func TestAfterMergeFollowsTheRunAcrossARestart(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	runningMerge(t, w, clock)
	w.Restart(nil, nil)
	w.GH.CompleteRun(e2e.Repo, mainRun, "success", nil) // its webhook lost: the poll finds it
	w.PassTime(clock, aftermerge.RunPoll)
	waitStatus(t, w, "✅ run [41000000001](", "succeeded", "opsbot reused nothing for the merged head `c2c2c2c`: it ran its own sweep")
}

// A merge commit that is also another PR's head (a PR opened from the
// default branch, by anyone who can push a branch): the run's completion
// is ordered by that PR, and it still wakes the watch.
func TestAfterMergeWakesWhenItsMergeCommitHeadsAnotherPR(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	runningMerge(t, w, clock)
	w.GH.AddPR(e2e.Repo, e2e.PR+1, "author", "from-main", e2e.SHA("b0"), []string{e2e.SHA("e1")})
	p := w.SyncPayload(e2e.SHA("e1"))
	p["number"] = e2e.PR + 1
	e2e.SetPath(p, "pull_request.number", e2e.PR+1)
	e2e.SetPath(p, "pull_request.head.ref", "from-main")
	w.Send("pull_request", p)
	runCompleted(w, clock, "success")
	waitStatus(t, w, "✅ run [41000000001](", "succeeded")
}

// A watch stored by a build from before watches held their merge commit
// (no commit, no index entry): its next poll after the restart adds the
// merge commit, and the run's completion then wakes it.
func TestAfterMergeWatchOfAnOlderBuildWakesOnItsRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	runningMerge(t, w, clock)
	w.Restart(func(cfg string) string {
		st, err := state.Open(filepath.Join(w.Dir, "opsbot.db"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Update(func(tx *state.Tx) error {
			s, err := tx.Sequence(e2e.Repo, e2e.PR, aftermerge.SeqKind)
			if err != nil || s == nil {
				return fmt.Errorf("the watch: %v %v", s, err)
			}
			s.Commits = nil
			return tx.PutSequence(s, s.Version)
		}); err != nil {
			t.Fatal(err)
		}
		if prs, err := st.PRsOfCommit(e2e.Repo, e2e.SHA("e1")); err != nil || len(prs) != 0 {
			t.Fatalf("the older build's watch is found by its merge commit: %v %v", prs, err)
		}
		return cfg
	}, nil)
	w.PassTime(clock, aftermerge.RunPoll) // its poll: the run still runs
	runCompleted(w, clock, "success")
	waitStatus(t, w, "✅ run [41000000001](", "succeeded")
}

// The closed webhook of a merge followed already, delivered again with
// another body (GitHub's redelivery, a late edit of the PR): one comment,
// the watch not begun again.
func TestAfterMergeFollowsAMergeOnce(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Push("c2")
	mainRunOf(w, "completed", "success", ingested) // there when the watch first looks
	merged(w)
	waitStatus(t, w, "✅ run [41000000001](")
	again := closed(w, true, "main")
	e2e.SetPath(again, "pull_request.title", "edited after the merge")
	w.Send("pull_request", again)
	n := 0
	for _, r := range w.Replies() {
		if strings.HasPrefix(r, title) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d after-merge comments; want the one", n)
	}
}

// No run on the merge commit by the deadline: the watch says so and ends.
func TestAfterMergeEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Push("c2")
	merged(w)
	waitStatus(t, w, "no run of `.github/workflows/run-sweep.yml` on the merge commit yet")
	w.PassTime(clock, 12*time.Hour+time.Minute)
	waitStatus(t, w, "⌛ no run of `.github/workflows/run-sweep.yml` on the merge commit was found within 12h of the merge")
}

// GitHub failing every read of the merge commit's runs for a while: the
// wake-ups fail (retried, then again in the next retry window), nothing is
// said wrongly, and once GitHub answers the watch goes on to the run's end.
func TestAfterMergeOutlivesGitHubFailing(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := world(t, clock)
	w.Push("c2")
	w.GH.Inject("GET /repos/{owner}/{repo}/actions/runs", githubtest.Fault{Status: 500})
	merged(w)
	testkit.Eventually(t, "a wake-up of the watch failed", func() bool {
		return strings.Contains(w.Srv.Stderr.String(), "listing the runs of e1e1e1e")
	})
	if st := status(w); !strings.Contains(st, "⏳ opsbot follows the run of") {
		t.Fatalf("the watch said something while GitHub failed:\n%s", st)
	}
	mainRunOf(w, "completed", "success", ingested)
	w.GH.Heal("GET /repos/{owner}/{repo}/actions/runs")
	w.PassTime(clock, seq.Retry)
	waitStatus(t, w, "✅ run [41000000001](", "succeeded, its ingest job `trigger-ingest` too")
}
