package approve_test

import (
	"os"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The world of the approval's behaviour tests: the benchmark repository
// on a fake GitHub, and opsbot serving it (internal/e2e).
const (
	theRepo  = e2e.Repo
	thePR    = e2e.PR
	maintLog = e2e.MaintLogin
	maintID  = e2e.MaintID

	// routeWorkflowRuns is GitHub's list of a workflow's runs.
	routeWorkflowRuns = "GET /repos/{owner}/{repo}/actions/workflows/{id}/runs"
)

type world struct{ *e2e.World }

type worldOpts = e2e.Options

type movingClock = e2e.Clock

var (
	resultArtifacts = e2e.ResultArtifacts
	maintainer      = e2e.Maintainer
	reader          = e2e.Reader
)

func newWorldOpts(t *testing.T, o worldOpts) *world {
	t.Helper()
	return &world{e2e.New(t, o)}
}

// approveWorld is the approval's world (e2e.ApproveWorld), repoExtra added
// to the repository's configuration.
func approveWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	return &world{e2e.ApproveWorld(t, worldOpts{Repo: repoExtra}, clock)}
}

func TestMain(m *testing.M) {
	testkit.WaitingTests(8)
	os.Exit(m.Run())
}
