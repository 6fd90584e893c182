package aftermerge_test

import (
	"fmt"
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

const (
	recoveryFile = ".github/workflows/recover-reused-ingest.yml"
	recoveryID   = int64(88)
	mainTipSHA   = "ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1ma1m"
)

// recoveryWorkflow is the benchmark repository's recover-reused-ingest.yml
// with explicitly read-only permissions (the rules opsbot holds it to).
const recoveryWorkflow = `name: Recover Reused Ingest
on:
  workflow_dispatch:
    inputs:
      source-run-id:
        required: true
        type: string
      merge-run-id:
        required: true
        type: string
permissions:
  contents: read
jobs:
  trigger-agentic-ingest:
    runs-on: ubuntu-latest
    steps:
      - run: echo dispatch
`

// recoverWorld is the server with the watch and recovery on.
func recoverWorld(t *testing.T, clock *e2e.Clock) *e2e.World {
	t.Helper()
	w := e2e.New(t, e2e.Options{Repo: "    gpus_per_runner:\n      \"gpu-*\": 8\n    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n" +
		"      recover:\n        workflow: " + recoveryFile + "\n        min_role: write\n",
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
	w.GH.AddWorkflow(e2e.Repo, "recover-reused-ingest.yml", recoveryID)
	onMain(w, recoveryWorkflow)
	return w
}

// onMain puts the recovery workflow file, as given, on main's tip.
func onMain(w *e2e.World, workflow string) {
	w.GH.GitCommit(e2e.Repo, mainTipSHA, nil, map[string]string{recoveryFile: workflow, "README.md": "InferenceX\n"})
	w.GH.SetBranchTip(e2e.Repo, "main", mainTipSHA)
}

// ingestFailed is a main run whose GPU jobs were skipped (the reuse) and
// whose ingest failed after the results were gathered.
var ingestFailed = []githubtest.Job{{Name: "single-node 1k1k / b200", Conclusion: "skipped", Labels: []string{"self-hosted", "gpu-b200"}},
	{Name: "collect-results", Conclusion: "success"}, {Name: "trigger-ingest", Conclusion: "failure", Error: "curl: (22) 502"}}

// reusedMergeFailed pins run 31147925932, pushes c2 (skipped on the pin),
// merges it as e1, and its main run fails as jobs say.
func reusedMergeFailed(t *testing.T, w *e2e.World, jobs []githubtest.Job) {
	t.Helper()
	w.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	mainRunOf(w, "completed", "failure", jobs)
	merged(w)
	waitStatus(t, w, "❌ run [41000000001](")
}

const recoveryTitle = "🛟 **Ingest recovery**"

// An ingest that failed after the results were gathered, on a merge that
// reused a run: /rerun-failed is refused and /recover-ingest, after every
// check the repository's helper makes, dispatches the recovery workflow
// once with the reused run and the main run, follows its run to its end
// and says so; the audit keeps the recovery.
func TestRecoverIngestDispatchesOnceAndFollowsTheRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	w.Comment(e2e.Maintainer, "/recover-ingest")
	st := w.WaitReply(recoveryTitle, "🛟 dispatched `"+recoveryFile+"` with source-run-id 31147925932 and merge-run-id 41000000001: run [")
	e2e.MustContain(t, "status", st, "🔎 checked: run [41000000001](", "failed in [trigger-ingest](", "at this PR's merge commit `e1e1e1e`",
		"run 31147925932, which opsbot reused for the merged head, has its result artifacts")
	ds := w.GH.WorkflowDispatches()
	if len(ds) != 1 || ds[0].WorkflowID != recoveryID || ds[0].Ref != "main" || ds[0].Inputs["source-run-id"] != "31147925932" ||
		ds[0].Inputs["merge-run-id"] != "41000000001" {
		t.Fatalf("dispatches: %+v; want one of the recovery workflow on main with the two runs", ds)
	}
	w.Comment(e2e.Maintainer, "/recover-ingest")
	e2e.MustContain(t, "a second ask's reply", w.LastReply(), "/recover-ingest cancel")
	w.GH.CompleteRun(e2e.Repo, ds[0].RunID, "success", nil)
	w.PassTime(clock, aftermerge.Poll)
	w.WaitReply(recoveryTitle, "✅ recovery run [", "succeeded: it dispatched the ingest with source-run-id 31147925932 and merge-run-id 41000000001")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches; want one", n)
	}
	// Recovered: asked again, it would publish the results twice.
	w.Comment(e2e.Maintainer, "/recover-ingest")
	e2e.MustContain(t, "an ask after the recovery's success", w.LastReply(), "the ingest of run [41000000001](",
		"was recovered already, by @maintainer (recovery run [", "a second recovery would publish its results again")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches after a recovery succeeded; want one", n)
	}
	// Its audit record carries the reused run's GPU time: what a re-run of
	// the sweep would have spent again (the digest sums it).
	if !slices.ContainsFunc(w.AuditRecords(), func(r map[string]any) bool {
		gpu, _ := r["gpu_seconds"].(float64)
		return r["outcome"] == aftermerge.RecoverSucceeded && gpu > 0
	}) {
		t.Fatalf("the recovery's end is not audited with the GPU time it saved: %v", w.AuditRecords())
	}
}

// What /recover-ingest refuses, each said, with nothing dispatched: the
// rules of the repository's helper, as opsbot checks them.
func TestRecoverIngestRefuses(t *testing.T) {
	t.Parallel()
	twoFailed := []githubtest.Job{{Name: "collect-results", Conclusion: "failure"}, {Name: "trigger-ingest", Conclusion: "failure"}}
	for _, c := range []struct {
		name string
		set  func(w *e2e.World)
		args string
		want string
	}{
		{"a run of another repository", nil, " https://github.com/SemiAnalysisAI/other/actions/runs/41000000001",
			"the run is of SemiAnalysisAI/other, not of this repository"},
		{"not a run URL", nil, " https://github.com/SemiAnalysisAI/InferenceX/pull/1", "must be a GitHub Actions run URL"},
		{"a run on a branch", func(w *e2e.World) {
			w.GH.AddRun(e2e.Repo, githubtest.Run{ID: 41000000002, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "failure",
				HeadSHA: e2e.SHA("e1"), HeadBranch: "kimi-tune", CreatedAt: time.Now(), Jobs: ingestFailed, Attempt: 1})
		}, " https://github.com/SemiAnalysisAI/InferenceX/actions/runs/41000000002", "ran on the branch `kimi-tune`, not on the default branch `main`"},
		{"a succeeded run", func(w *e2e.World) { w.GH.CompleteRun(e2e.Repo, mainRun, "success", nil) }, "", "ended `success`, not failed"},
		{"two failed jobs without a job", func(w *e2e.World) { setJobs(w, twoFailed) }, "", "ambiguous"},
		{"a failed job that is not the ingest", func(w *e2e.World) {
			setJobs(w, []githubtest.Job{{Name: "collect-results", Conclusion: "failure"}, {Name: "trigger-ingest", Conclusion: "skipped"}})
		}, "", "the failed job `collect-results` is not the ingest job `trigger-ingest`"},
		{"an earlier attempt's ingest failure its re-run mended", func(w *e2e.World) {
			mended := []githubtest.Job{{Name: "collect-results", Conclusion: "success"}, {Name: "trigger-ingest", Conclusion: "success"},
				{Name: "notify", Conclusion: "failure"}}
			w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "failure",
				HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: mended, Earlier: [][]githubtest.Job{ingestFailed}, Attempt: 2})
		}, " https://github.com/SemiAnalysisAI/InferenceX/actions/runs/41000000001/job/41000000001102",
			"job `trigger-ingest` failed in an earlier attempt, and succeeded in attempt 2"},
		{"a merge commit of two PRs", func(w *e2e.World) {
			w.GH.AddPR(e2e.Repo, 2808, "author", "other", e2e.SHA("b0"), []string{e2e.SHA("d1")})
			w.GH.ClosePR(e2e.Repo, 2808, true, e2e.SHA("e1"))
		}, "", "maps to the merged PRs"},
		{"expired artifacts", func(w *e2e.World) {
			w.GH.CompleteRun(e2e.Repo, e2e.RunR1, "success", []githubtest.Artifact{{Name: "results_bmk", Expired: true}})
		}, "", "have expired (`results_bmk`)"},
		{"a workflow that writes", func(w *e2e.World) {
			onMain(w, strings.Replace(recoveryWorkflow, "contents: read", "contents: write", 1))
		}, "", "permissions must be explicitly read-only"},
		{"a workflow with a matrix", func(w *e2e.World) {
			onMain(w, strings.Replace(recoveryWorkflow, "    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n        gpu: [b200]\n", 1))
		}, "", "may not use a matrix"},
		{"a workflow not on main", func(w *e2e.World) {
			w.GH.GitCommit(e2e.Repo, mainTipSHA, nil, map[string]string{"README.md": "InferenceX\n"})
		}, "", "is not on `main`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := e2e.NewClock()
			w := recoverWorld(t, clock)
			reusedMergeFailed(t, w, ingestFailed)
			if c.set != nil {
				c.set(w)
			}
			w.Comment(e2e.Maintainer, "/recover-ingest"+c.args)
			e2e.MustContain(t, "reply", w.LastReply(), c.want)
			if d := w.GH.WorkflowDispatches(); len(d) != 0 {
				t.Fatalf("dispatched %+v", d)
			}
		})
	}
}

// dispatchedRecovery is a world whose reused merge's ingest failed, and a
// maintainer's /recover-ingest dispatched the recovery.
func dispatchedRecovery(t *testing.T, clock *e2e.Clock) *e2e.World {
	t.Helper()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	w.Comment(e2e.Maintainer, "/recover-ingest")
	w.WaitReply(recoveryTitle, "🛟 dispatched `"+recoveryFile+"`")
	return w
}

// setJobs replaces the main run's jobs.
func setJobs(w *e2e.World, jobs []githubtest.Job) {
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "failure",
		HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: jobs, Attempt: 1})
}

// A merge opsbot decided by its own sweep has no reused run to publish
// from: refused.
func TestRecoverIngestRefusesAMergeWithoutReuse(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	w.Push("c2")
	mainRunOf(w, "completed", "failure", ingestFailed)
	merged(w)
	waitStatus(t, w, "❌ run [41000000001](")
	w.Comment(e2e.Maintainer, "/recover-ingest")
	e2e.MustContain(t, "reply", w.LastReply(), "opsbot decided the merged head by its own sweep, not by reuse")
}

// A cancel stored while the recovery is being checked goes first: the
// recovery begins, the cancel ends it before its dispatch, and nothing is
// dispatched; a cancel with no recovery under way says so.
func TestRecoverIngestCancelledBeforeTheDispatch(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	arrived, release := w.GH.Hold("GET /repos/{owner}/{repo}/git/blobs/{sha}") // the recovery workflow's read, the last check
	defer release()
	c := w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/recover-ingest")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the recovery workflow is read")
	cancel := w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/recover-ingest cancel")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, cancel.ID, cancel.Body, ""))
	release()
	w.WaitReply(recoveryTitle, "⛔ cancelled by @maintainer before the dispatch: nothing was dispatched")
	w.PassTime(clock, aftermerge.RerunPoll)
	if d := w.GH.WorkflowDispatches(); len(d) != 0 {
		t.Fatalf("dispatched %+v after the cancel", d)
	}
	w.Comment(e2e.Maintainer, "/recover-ingest cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "no recovery of this PR's ingest is under way")
}

// A recovery cancelled after its dispatch (its run goes on) may publish
// the results: another /recover-ingest of the run is refused, and nothing
// more is dispatched.
func TestRecoverIngestCancelledAfterTheDispatchIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := dispatchedRecovery(t, clock)
	w.Comment(e2e.Maintainer, "/recover-ingest cancel")
	w.WaitReply(recoveryTitle, "⛔ cancelled by @maintainer: opsbot stopped following run [")
	w.Comment(e2e.Maintainer, "/recover-ingest")
	e2e.MustContain(t, "an ask after the cancel", w.LastReply(), "recovery of run [41000000001](", "may have published its results",
		"it ended `recover_cancelled`")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches; want one", n)
	}
}

// GitHub made the recovery's run but its answer to the dispatch was lost:
// opsbot cannot tell which run is its, never dispatches again, and says to
// look at the workflow's runs first.
func TestRecoverIngestLostDispatchIsNeverSentAgain(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	const route = "POST /repos/{owner}/{repo}/actions/workflows/{id}/dispatches"
	w.GH.Inject(route, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	w.Comment(e2e.Maintainer, "/recover-ingest")
	w.WaitReply(recoveryTitle, "⚠️ GitHub did not answer the dispatch of `"+recoveryFile+"`", "opsbot does not dispatch it again")
	w.PassTime(clock, aftermerge.RerunPoll)
	if n := w.GH.Count(route); n != 1 {
		t.Fatalf("the recovery was dispatched %d times; want once", n)
	}
	if !slices.ContainsFunc(w.AuditRecords(), func(r map[string]any) bool { return r["outcome"] == aftermerge.RecoverUnknown }) {
		t.Fatalf("the unknown dispatch is not audited as such")
	}
}

// The command's comment is deleted while the recovery is being checked:
// the recovery begins, the deletion takes it back before its dispatch,
// and nothing is dispatched.
func TestRecoverIngestTakenBackBeforeTheDispatch(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	arrived, release := w.GH.Hold("GET /repos/{owner}/{repo}/git/blobs/{sha}")
	defer release()
	c := w.GH.AddComment(e2e.Repo, e2e.PR, e2e.MaintLogin, "/recover-ingest")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the recovery workflow is read")
	w.GH.DeleteComment(c.ID)
	w.PostNoSettle("issue_comment", w.CommentPayload("deleted", e2e.Maintainer, e2e.Maintainer, c.ID, c.Body, ""))
	release()
	w.WaitReply(recoveryTitle, "⛔ taken back before the dispatch: @maintainer deleted the comment; nothing was dispatched")
	w.PassTime(clock, aftermerge.RerunPoll)
	if d := w.GH.WorkflowDispatches(); len(d) != 0 {
		t.Fatalf("dispatched %+v after the take-back", d)
	}
}

// A job URL of an earlier attempt, as the repository's helper takes one
// (it reads every attempt's jobs): the run failed in its ingest at attempt
// 1 and again at attempt 2, and /recover-ingest names attempt 1's failed
// job: it is accepted and dispatched once; a job of no attempt of the run
// is refused.
func TestRecoverIngestTakesAJobOfAnEarlierAttempt(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := recoverWorld(t, clock)
	reusedMergeFailed(t, w, ingestFailed)
	w.GH.RerunRun(e2e.Repo, mainRun) // by hand, on GitHub
	w.PassTime(clock, aftermerge.RerunPoll)
	waitStatus(t, w, "⏳ attempt 2 of run [41000000001](", "is queued")
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "failure",
		HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: ingestFailed, Earlier: [][]githubtest.Job{ingestFailed}, Attempt: 2})
	runCompleted(w, clock, "failure")
	waitStatus(t, w, "ended `failure` at attempt 2")
	jobURL := func(id int64) string {
		return fmt.Sprintf("https://github.com/%s/actions/runs/%d/job/%d", e2e.Repo, mainRun, id)
	}
	w.Comment(e2e.Maintainer, "/recover-ingest "+jobURL(mainRun*1000+999))
	e2e.MustContain(t, "a job of no attempt", w.LastReply(), fmt.Sprintf("job %d was not found in the target run", mainRun*1000+999))
	earlier := mainRun*1000 + 100 + 2 // attempt 1's trigger-ingest
	w.Comment(e2e.Maintainer, "/recover-ingest "+jobURL(earlier))
	st := w.WaitReply(recoveryTitle, "🛟 dispatched `"+recoveryFile+"` with source-run-id 31147925932 and merge-run-id 41000000001: run [")
	e2e.MustContain(t, "status", st, "failed in [trigger-ingest]("+jobURL(earlier)+")")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches; want one", n)
	}
}

// A re-run and a recovery of one run are never both under way, nor one
// after the other: each would publish the results. /rerun-failed of a
// later attempt (re-run by hand, failed elsewhere) is refused while a
// recovery of the run is under way and once it succeeded; /recover-ingest
// is refused while a re-run opsbot asked runs.
func TestRerunAndRecoveryOfARunExcludeEachOther(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := dispatchedRecovery(t, clock)
	ds := w.GH.WorkflowDispatches()
	w.GH.RerunRun(e2e.Repo, mainRun) // by hand, on GitHub
	w.PassTime(clock, aftermerge.RerunPoll)
	waitStatus(t, w, "⏳ attempt 2 of run [41000000001](", "is queued")
	notify := []githubtest.Job{{Name: "collect-results", Conclusion: "success"}, {Name: "trigger-ingest", Conclusion: "success"},
		{Name: "notify", Conclusion: "failure"}}
	w.GH.AddRun(e2e.Repo, githubtest.Run{ID: mainRun, WorkflowID: 77, Event: "push", Status: "completed", Conclusion: "failure",
		HeadSHA: e2e.SHA("e1"), HeadBranch: "main", CreatedAt: time.Now(), Jobs: notify, Earlier: [][]githubtest.Job{ingestFailed}, Attempt: 2})
	runCompleted(w, clock, "failure")
	waitStatus(t, w, "ended `failure` at attempt 2")
	w.Comment(e2e.Maintainer, "/rerun-failed")
	e2e.MustContain(t, "a re-run while the recovery runs", w.LastReply(), "@maintainer's recovery of the ingest of run [41000000001](",
		"is under way: a re-run would publish its results again")
	w.GH.CompleteRun(e2e.Repo, ds[0].RunID, "success", nil)
	w.PassTime(clock, aftermerge.Poll)
	w.WaitReply(recoveryTitle, "✅ recovery run [")
	w.Comment(e2e.Maintainer, "/rerun-failed")
	e2e.MustContain(t, "a re-run after the recovery", w.LastReply(), "was recovered already, by @maintainer")
	if r := w.GH.Reruns(); len(r) != 0 {
		t.Fatalf("re-ran %v after a recovery of the run", r)
	}

	w2 := recoverWorld(t, clock)
	w2.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
	failedMerge(t, w2, []githubtest.Job{{Name: "lint", Conclusion: "failure"}, {Name: "collect-results", Conclusion: "skipped"},
		{Name: "trigger-ingest", Conclusion: "skipped"}})
	w2.Comment(e2e.Maintainer, "/rerun-failed")
	waitStatus(t, w2, "🔁 the failed jobs of attempt 1 were re-run, asked by @maintainer")
	w2.Comment(e2e.Maintainer, "/recover-ingest")
	e2e.MustContain(t, "a recovery while the re-run runs", w2.LastReply(), "a re-run of attempt 1 of run [41000000001](",
		"asked by @maintainer, is under way")
	if d := w2.GH.WorkflowDispatches(); len(d) != 0 {
		t.Fatalf("dispatched %+v while a re-run ran", d)
	}
}
