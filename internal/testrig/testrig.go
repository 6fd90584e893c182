// Package testrig is the fixture the tests of events, gate and commands
// share: one served repository's configuration, a store in the test's temp
// dir, a fake GitHub holding the repository, its PR 1 (head c1) and the
// PR's sweep run 10, and a GitHub client on the fake. It is linked into no
// binary.
package testrig

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Repo is the rig's repository.
const Repo = "SemiAnalysisAI/InferenceX"

// Rig is one repository's fixture.
type Rig struct {
	Cfg     *config.Config
	Repo    *config.Repo
	Store   *state.Store
	GH      *githubtest.Fake
	Factory *ghclient.Factory
	Client  *ghclient.Client
}

// New builds the rig; the store is opened with opt and closed when the test
// ends.
func New(t *testing.T, opt state.Options) *Rig {
	t.Helper()
	cfg, err := config.Parse([]byte("repos: [{name: " + Repo + ", sweep_workflow: .github/workflows/run-sweep.yml}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	rc, ok := cfg.Repo(Repo)
	if !ok {
		t.Fatalf("config has no %s", Repo)
	}
	st, err := state.Open(filepath.Join(t.TempDir(), "rig.db"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gh := githubtest.New(t)
	gh.AddRepo(Repo, "run-sweep.yml", 77)
	gh.AddPR(Repo, 1, "author", "b", "b0", []string{"c1"})
	gh.AddRun(Repo, SweepRun(10, "c1"))
	fac, err := ghclient.NewFactory(ghclient.Options{APIURL: gh.URL, Token: "t", MaxTries: 1,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fac.For(0)
	if err != nil {
		t.Fatal(err)
	}
	return &Rig{Cfg: cfg, Repo: rc, Store: st, GH: gh, Factory: fac, Client: c}
}

// SweepRun is a completed, successful sweep run of PR 1's branch on sha,
// with its result artifact.
func SweepRun(id int64, sha string) githubtest.Run {
	return githubtest.Run{ID: id, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha, HeadBranch: "b", Artifacts: []githubtest.Artifact{{Name: "results_bmk"}}}
}
