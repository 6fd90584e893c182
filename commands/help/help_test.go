package help_test

import (
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
)

// The help reply lists every registered command's rows, notes and
// settings, for the repository's configuration.
func TestReplyGolden(t *testing.T) {
	rc := &config.Repo{Name: "SemiAnalysisAI/InferenceX", SweepWorkflow: ".github/workflows/run-sweep.yml",
		ResultArtifacts: []string{"results_bmk", "eval_results_all", "bmk_agentic_*"},
		ProtectedPaths:  []string{".github/**"}, GateActions: []string{"synchronize"}}
	rc.Reuse.MinRole, rc.Stage.MinRole, rc.Help.MinRole = "write", "maintain", "write"
	rc.Reuse.AllowTeams = []string{"SemiAnalysisAI/reviewers"}
	rc.Reuse.AllowedPaths = []string{"perf-changelog.yaml", "docs/**"}
	rc.Stage.Dispatch.Repo = "SemiAnalysisAI/staging"
	rc.Reuse.FullSweepLabels, rc.Reuse.IncompatibleLabels = config.DefaultFullSweepLabels, config.DefaultIncompatibleLabels
	reg := commandstest.Registry()
	golden.Assert(t, "help.md", help.Reply("octocat", rc, reg))
	rc.Reuse.AllowedPaths, rc.Reuse.AllowPartialPinned, rc.Stage.Dispatch.Repo, rc.Reuse.AllowTeams, rc.ProtectedPaths = nil, true, "", nil, nil
	rc.Reuse.FullSweepLabels, rc.Reuse.IncompatibleLabels = []string{}, []string{}
	golden.Assert(t, "help-minimal.md", help.Reply("octocat", rc, reg))
}
