package merge_test

import (
	"os"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The world of merge's behaviour tests: the benchmark repository on a fake
// GitHub, and opsbot serving it (internal/e2e), with the merge's own
// helpers as methods.
const (
	theRepo  = e2e.Repo
	thePR    = e2e.PR
	apiToken = e2e.APIToken
	maintLog = e2e.MaintLogin

	// routeCheckRuns is GitHub's list of a commit's check runs.
	routeCheckRuns = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
)

type world struct{ *e2e.World }

type worldOpts = e2e.Options

type user = e2e.User

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

// newWorld is the benchmark repository's world, with extra appended to
// the repository's configuration.
func newWorld(t *testing.T, repoExtra string) *world {
	t.Helper()
	return newWorldOpts(t, worldOpts{Repo: repoExtra})
}

// postNoSettle posts a payload and returns its delivery id without waiting.
func postNoSettle(t *testing.T, w *world, event string, p map[string]any) string {
	t.Helper()
	return w.PostNoSettle(event, p)
}

// startServerWith serves the configuration at path again, on the world's
// database, with the server's dependencies adjusted by deps.
func startServerWith(t *testing.T, path string, getenv func(string) string, deps func(*app.Deps)) *e2e.Server {
	t.Helper()
	return e2e.Start(t, path, getenv, deps)
}

// mergeWorld is the merge's world (e2e.MergeWorld).
func mergeWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	return &world{e2e.MergeWorld(t, repoExtra, clock)}
}

func TestMain(m *testing.M) {
	testkit.WaitingTests(8)
	os.Exit(m.Run())
}
