package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The approval's world (/approve-sweep of a fork's PR), shared by its own
// behaviour tests (commands/approve) and the server's tests that approve on
// the way.
const (
	ExternalWorkflow   = ".github/workflows/e2e-tests.yml"
	ExternalWorkflowID = int64(88)
	ForkRepo           = "contributor/InferenceX"
	ForkRepoID         = int64(4242)
)

// StagingRepo is where /stage-results dispatches; StageConfig is the
// repository's stage section that does.
const (
	StagingRepo = "SemiAnalysisAI/inferencemax-app"
	StageConfig = `    stage:
      dispatch: {repo: "` + StagingRepo + `", event_type: "stage-results"}
      url_template: "https://staging.example.com/inference?i_dates={{.RunDate}}~r{{.RunID}}"
`
)

// ApproveWorld is a world whose PR comes from a fork, whose repository
// dispatches e2e-tests.yml for approved heads, whose maintainer holds the
// maintain role, and whose server's clock the test moves (o adds to it).
func ApproveWorld(t *testing.T, o Options, clock *Clock) *World {
	t.Helper()
	o.Repo = "    external:\n      workflow: " + ExternalWorkflow + "\n" + o.Repo
	o.Deps = func(d *app.Deps) { d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond }
	w := New(t, o)
	w.GH.AddWorkflow(Repo, "e2e-tests.yml", ExternalWorkflowID)
	w.GH.SetRole(Repo, MaintLogin, "maintain")
	w.GH.SetPR(Repo, PR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = ForkRepoID, ForkRepo })
	return w
}

// ApprovalStatus is the newest approval's status comment on the PR (""
// for none).
func (w *World) ApprovalStatus() string {
	out := ""
	for _, r := range w.Replies() {
		if strings.Contains(r, "**External sweep**") {
			out = r
		}
	}
	return out
}

// WaitApproval waits until the approval's status comment says each of
// subs, then until the server settles.
func (w *World) WaitApproval(what string, subs ...string) string {
	w.T.Helper()
	testkit.Eventually(w.T, what, func() bool {
		s := w.ApprovalStatus()
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	})
	w.Settle()
	return w.ApprovalStatus()
}

// DispatchedRun waits for the one workflow dispatch and returns it.
func (w *World) DispatchedRun() githubtest.WorkflowDispatch {
	w.T.Helper()
	testkit.Eventually(w.T, "the workflow dispatch", func() bool { return len(w.GH.WorkflowDispatches()) > 0 })
	w.Settle()
	ds := w.GH.WorkflowDispatches()
	if len(ds) != 1 {
		w.T.Fatalf("workflow dispatches %+v; want one", ds)
	}
	return ds[0]
}
