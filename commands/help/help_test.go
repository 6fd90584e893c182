package help_test

import (
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/approve"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
)

// The help reply lists every registered command's rows, notes and
// settings, for the repository's configuration: shown here for opsbot's
// first five commands, named (a command added later shows its own rows in
// its own tests, and leaves these files as they are).
func TestReplyGolden(t *testing.T) {
	rc := &config.Repo{Name: "SemiAnalysisAI/InferenceX", SweepWorkflow: ".github/workflows/run-sweep.yml",
		ResultArtifacts: []string{"results_bmk", "eval_results_all", "bmk_agentic_*"},
		ProtectedPaths:  []string{".github/**"}, GateActions: []string{"synchronize"}}
	rc.Reuse.MinRole, rc.Stage.MinRole, rc.Help.MinRole = "write", "maintain", "write"
	rc.Reuse.AllowTeams = []string{"SemiAnalysisAI/reviewers"}
	rc.Reuse.AllowedPaths = []string{"perf-changelog.yaml", "docs/**"}
	rc.Stage.Dispatch.Repo = "SemiAnalysisAI/staging"
	rc.Reuse.FullSweepLabels, rc.Reuse.IncompatibleLabels = config.DefaultFullSweepLabels, config.DefaultIncompatibleLabels
	d := commands.Deps{State: &commandstest.Tx{}}
	reg, err := commands.RegistryOf([]commands.Module{reuse.Module(d), merge.Module(d), stage.Module(d), approve.Module(d), help.Module(d)})
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "help.md", help.Reply("octocat", rc, reg))
	rc.Reuse.AllowedPaths, rc.Reuse.AllowPartialPinned, rc.Stage.Dispatch.Repo, rc.Reuse.AllowTeams, rc.ProtectedPaths = nil, true, "", nil, nil
	rc.Reuse.FullSweepLabels, rc.Reuse.IncompatibleLabels = []string{}, []string{}
	golden.Assert(t, "help-minimal.md", help.Reply("octocat", rc, reg))
}
