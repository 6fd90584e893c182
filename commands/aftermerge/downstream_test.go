package aftermerge_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

const (
	resultsRepo = "SemiAnalysisAI/InferenceX-results"
	ingestRun   = int64(52000000001)
)

// downstreamWorld is the watch with the results repository's ingest
// followed.
func downstreamWorld(t *testing.T, clock *e2e.Clock) *e2e.World {
	t.Helper()
	w := e2e.New(t, e2e.Options{Repo: "    after_merge:\n      follow: true\n      ingest_job: trigger-ingest\n" +
		"      downstream:\n        repo: " + resultsRepo + "\n        workflow: .github/workflows/ingest.yml\n",
		Deps: func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }})
	w.GH.AddRepo(resultsRepo, "ingest.yml", 501)
	return w
}

// ingestRunOf adds the results repository's ingest run, named as its
// workflow's run-name names it.
func ingestRunOf(w *e2e.World, source int64, status, conclusion string) {
	w.GH.AddRun(resultsRepo, githubtest.Run{ID: ingestRun, WorkflowID: 501, Event: "repository_dispatch", Status: status,
		Conclusion: conclusion, HeadBranch: "main", HeadSHA: e2e.SHA("d0"), CreatedAt: time.Now(), Attempt: 1,
		DisplayTitle: "Ingest source " + strconv.FormatInt(source, 10) + " merge " + strconv.FormatInt(mainRun, 10)})
}

// reusedMergeSucceeded merges a PR whose head reused run 31147925932,
// its main run already succeeded with its ingest job, and waits for the
// watch's first step: it looks for the results repository's ingest run
// from its next step on.
func reusedMergeSucceeded(t *testing.T, w *e2e.World) {
	t.Helper()
	w.Comment(e2e.Maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	mainRunOf(w, "completed", "success", ingested)
	merged(w)
	waitStatus(t, w, "its ingest job `trigger-ingest` too", "⏳ looking for the ingest run in `"+resultsRepo+"` named for merge run 41000000001")
}

// A reused merge whose main run succeeds, with the results repository
// followed: the watch binds the ingest run by its run-name, follows it to
// its end across a restart, and says it took the source run opsbot's audit holds for the
// merged head, beside the merge run.
func TestAfterMergeFollowsTheResultsRepositorysIngest(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := downstreamWorld(t, clock)
	reusedMergeSucceeded(t, w)
	ingestRunOf(w, 31147925932, "in_progress", "")
	w.PassTime(clock, aftermerge.Poll)
	waitStatus(t, w, "⏳ the ingest run [52000000001](", "is in progress")
	w.Restart(nil, nil) // the watch, bound to the ingest run, is in its record
	w.GH.CompleteRun(resultsRepo, ingestRun, "success", nil)
	w.PassTime(clock, aftermerge.Poll)
	st := waitStatus(t, w, "📥 the ingest run [52000000001](", "dispatched with source run 31147925932 and merge run 41000000001, succeeded",
		"Its source run is the one opsbot's audit says authorized the merged head (run 31147925932, by @maintainer)")
	if strings.Contains(st, "⚠️") || strings.Contains(st, "⏳") {
		t.Fatalf("a matching ingest warned, or still waits:\n%s", st)
	}
}

// The ingest took another source run than the one opsbot's audit holds
// for the merged head: a warning, not silence; and a failed ingest run is
// said failed.
func TestAfterMergeWarnsOfAnIngestOfAnotherSourceRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := downstreamWorld(t, clock)
	reusedMergeSucceeded(t, w)
	ingestRunOf(w, 31000000099, "completed", "failure")
	w.PassTime(clock, aftermerge.Poll)
	st := waitStatus(t, w, "dispatched with source run 31000000099 and merge run 41000000001, ended `failure`",
		"⚠️ Its source run 31000000099 is not run 31147925932, which opsbot's audit says authorized the merged head `c2c2c2c` (by @maintainer)")
	var outcome string
	for _, r := range w.AuditRecords() {
		if r["kind"] == "after_merge" {
			outcome = r["outcome"].(string)
		}
	}
	if outcome != aftermerge.StepIngestFailed {
		t.Fatalf("the watch ended %q; want %q\n%s", outcome, aftermerge.StepIngestFailed, st)
	}
}

// No ingest run named for the merge run comes: after a while the watch
// says the dispatch is the last thing it saw, and how the run-name must
// read. Runs of other merges, named otherwise, or not dispatched (a pull
// request's, whose name its author sets) are not taken.
func TestAfterMergeSaysWhenNoIngestRunCame(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := downstreamWorld(t, clock)
	w.GH.AddRun(resultsRepo, githubtest.Run{ID: ingestRun + 1, WorkflowID: 501, Event: "repository_dispatch", Status: "completed",
		Conclusion: "success", HeadBranch: "main", CreatedAt: time.Now(), DisplayTitle: "Ingest source 31147925932 merge 41000000002"})
	w.GH.AddRun(resultsRepo, githubtest.Run{ID: ingestRun + 2, WorkflowID: 501, Event: "repository_dispatch", Status: "completed",
		Conclusion: "success", HeadBranch: "main", CreatedAt: time.Now(), DisplayTitle: "Ingest"})
	// A pull request's run, named by its branch's author for this merge:
	// not a dispatch, never taken.
	w.GH.AddRun(resultsRepo, githubtest.Run{ID: ingestRun + 3, WorkflowID: 501, Event: "pull_request", Status: "completed",
		Conclusion: "success", HeadBranch: "evil", CreatedAt: time.Now(), DisplayTitle: "Ingest source 31147925932 merge 41000000001"})
	reusedMergeSucceeded(t, w)
	w.PassTime(clock, aftermerge.DownstreamWait)
	st := waitStatus(t, w, "⚠️ no dispatched ingest run of `"+resultsRepo+"` named for merge run 41000000001 came within 30m",
		"the dispatch to the ingest is the last thing opsbot saw")
	if strings.Contains(st, "📥") {
		t.Fatalf("another merge's ingest, or an unnamed one, was taken:\n%s", st)
	}
}

// A results repository named without its workflow, or not as owner/name,
// is refused when the configuration is read, saying what to give.
func TestDownstreamSettingsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		repo, workflow, want string // want "": no problem
	}{
		{"", "", ""},
		{resultsRepo, ".github/workflows/ingest.yml", ""},
		{resultsRepo, "", "downstream.workflow: \"\" is not a workflow file"},
		{"InferenceX-results", ".github/workflows/ingest.yml", "downstream.repo: \"InferenceX-results\" is not a repository: give owner/name"},
		{"a/b/c", ".github/workflows/ingest.yml", "is not a repository"},
		{"", ".github/workflows/ingest.yml", "is not a repository"},
		{resultsRepo, "ingest.yml", "is not a workflow file"},
	} {
		s := aftermerge.Settings{Deadline: 12 * time.Hour, Recover: aftermerge.RecoverSettings{Deadline: 2 * time.Hour},
			Downstream: aftermerge.DownstreamSettings{Repo: tc.repo, Workflow: tc.workflow}}
		var got []string
		for _, p := range aftermerge.Section.Check(&config.Repo{}, &s) {
			got = append(got, p.Key+": "+p.Message)
		}
		joined := strings.Join(got, "; ")
		if (tc.want == "") != (len(got) == 0) || !strings.Contains(joined, tc.want) {
			t.Errorf("repo %q workflow %q: problems %q; want %q", tc.repo, tc.workflow, joined, tc.want)
		}
	}
}

// Two dispatched runs named for the merge run: opsbot cannot tell which
// took the results, says so, and binds neither.
func TestAfterMergeTakesNoneOfTwoIngestRunsNamedForTheMerge(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := downstreamWorld(t, clock)
	reusedMergeSucceeded(t, w)
	ingestRunOf(w, 31147925932, "completed", "success")
	w.GH.AddRun(resultsRepo, githubtest.Run{ID: ingestRun + 1, WorkflowID: 501, Event: "workflow_dispatch", Status: "completed",
		Conclusion: "failure", HeadBranch: "main", CreatedAt: time.Now(), DisplayTitle: "Ingest source 31000000099 merge 41000000001"})
	w.PassTime(clock, aftermerge.Poll)
	st := waitStatus(t, w, "⚠️ 2 runs of `"+resultsRepo+"` are named for merge run 41000000001", "opsbot cannot tell which took the results")
	if strings.Contains(st, "📥") {
		t.Fatalf("one of two runs named for the merge was taken:\n%s", st)
	}
}
