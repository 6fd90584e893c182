package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// serveBinary stops the world's in-process server and serves the same
// configuration and database with the real binary, which a test may kill
// with SIGKILL; the world's helpers then talk to it.
func (w *world) serveBinary() *proc {
	w.T.Helper()
	w.Srv.Stop(w.T)
	bin := buildBinary(w.T)
	cmd := exec.Command(bin, "serve", "--config", filepath.Join(w.Dir, "opsbot.yaml"))
	cmd.Env = append(os.Environ(), "TEST_WEBHOOK_SECRET="+testSecret, "TEST_GITHUB_TOKEN=ghs_test", "TEST_API_TOKENS="+apiToken)
	p := startCmd(w.T, cmd, w.Dir)
	w.Srv = &testServer{URL: p.url}
	return p
}

// waitSlow waits for a held request to arrive at the fake GitHub from the
// binary, whose sequences are woken every 5 s.
func waitSlow(t *testing.T, arrived <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-arrived:
	case <-testkit.Expired(t):
		t.Fatalf("%s never reached GitHub", what)
	}
}

// kill9 kills the binary as SIGKILL does: nothing it did not commit is kept.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.cmd.Wait()
}

// kill -9 right after GitHub took an approval's dispatch, restarted within
// a minute while GitHub's list of runs lags: the mark the new process finds
// is not its own, so the dispatch may have been sent; it looks for the run
// by its name instead of sending a second one.
func TestKill9AfterGitHubTookADispatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	t.Parallel()
	w := approveWorld(t, "", e2e.NewClock())
	const runsRoute = "GET /repos/{owner}/{repo}/actions/workflows/{id}/runs"
	const dispatchRoute = "POST /repos/{owner}/{repo}/actions/workflows/{id}/dispatches"
	w.GH.Inject(runsRoute, githubtest.Fault{Status: 200, Body: `{"total_count":0,"workflow_runs":[]}`}) // GitHub's list lags
	arrived, release := w.GH.HoldAnswer(dispatchRoute)
	defer release()
	p := w.serveBinary()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/approve-sweep "+sha("c1"))
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	waitSlow(t, arrived, "the dispatch")
	p.kill9(t)
	release()
	w.serveBinary()
	st := w.WaitApproval("looking for the run", "GitHub did not answer the dispatch: looking for its run")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches after a restart with a mark; want the one GitHub took:\n%s", n, st)
	}
}

// kill -9 right after GitHub merged, before opsbot wrote the step: the
// head being merged was recorded with the merge's mark, so the restart
// finds the PR merged at that head and keeps the pin; the push to the
// default branch reuses the run.
func TestKill9AfterGitHubMerged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	t.Parallel()
	w := mergeWorld(t, "    main_sweeps: false\n", e2e.NewClock())
	w.GreenChecks(sha("c1"))
	arrived, release := w.GH.HoldAnswer(routeMerge)
	defer release()
	p := w.serveBinary()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/merge-with-reuse 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	waitSlow(t, arrived, "the merge")
	p.kill9(t)
	release()
	w.serveBinary()
	w.WaitStatus("the merge found", "🎉 the PR was found merged at `c1c1c1c`")
	if n := w.GH.Count(routeMerge); n != 1 {
		t.Fatalf("the merge was asked %d times; want once", n)
	}
	if w.PinRevoked() {
		t.Fatalf("the pin of a merge opsbot made was revoked: %v", w.trail())
	}
	m := w.GH.Merges()
	w.ClosedMerged(m[0].Commit)
	if out, _ := w.gate("--event", "push", "--sha", m[0].Commit); out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != strconv.FormatInt(runR1, 10) {
		t.Fatalf("push gate after the merge = %v", out)
	}
}
