package runs

import "github.com/SemiAnalysisAI/opsbot/config"

// Purpose is what a run is checked for; each has its rules.
type Purpose int

// Purposes.
const (
	// ForNamedPin is a run a command names to pin, and a pinned run the
	// gate uses: partial conclusions qualify when
	// reuse.allow_partial_pinned is set.
	ForNamedPin Purpose = iota
	// ForBarePin is the run a bare /reuse-sweep-run picks: success only.
	ForBarePin
	// ForStage is a run to stage: a sweep run of the repository on a commit
	// of the PR (or listing it), completed with success, failure or
	// cancelled, with unexpired required artifacts and at least one result
	// artifact.
	ForStage
)

// RulesFor are a repository's rules for a run checked for p. Every purpose
// keeps the protected paths and the default branch.
func RulesFor(rc *config.Repo, p Purpose) Rules {
	r := Rules{Repo: rc.Name, SweepWorkflow: rc.SweepWorkflow, ResultArtifacts: rc.ResultArtifacts,
		ProtectedPaths: rc.ProtectedPaths, DefaultBranch: rc.DefaultBranch, ExternalWorkflow: rc.External.Workflow}
	switch p {
	case ForStage:
		r.RequiredArtifacts, r.ListedPR = rc.Stage.RequiredArtifacts, true
		r.Conclusions = []string{"success", "failure", "cancelled"}
	case ForNamedPin, ForBarePin:
		r.AllowedPaths = rc.Reuse.AllowedPaths
		r.Labels = &rc.Reuse
		r.Coverage, r.MinCoverage, r.GPUs = true, rc.Reuse.MinCoverage, rc.GPUsPerRunner
		if p == ForNamedPin && rc.Reuse.AllowPartialPinned {
			r.Conclusions = []string{"success", "failure", "cancelled"}
		}
	}
	return r
}
