package runs

import (
	"fmt"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/config"
)

// PRLabels are the names of a PR's labels as GitHub read them.
func PRLabels(p *github.PullRequest) []string {
	out := make([]string, 0, len(p.Labels))
	for _, l := range p.Labels {
		out = append(out, l.GetName())
	}
	return out
}

// LabelRejection is why a PR's labels keep its runs from being reused, or
// nil when they make its sweep a full one.
func LabelRejection(pr int, v config.LabelVerdict) *Rejection {
	switch {
	case len(v.Incompatible) > 0:
		return &Rejection{RuleLabels, fmt.Sprintf("PR #%d is labelled %s, which makes its sweep partial, and a partial sweep's run is "+
			"not reused (remove the label and let a full sweep run)", pr, codeList(v.Incompatible))}
	case v.NoFullSweep:
		return &Rejection{RuleLabels, fmt.Sprintf("PR #%d has none of the full-sweep labels (%s), so its sweep is not a full one, and only "+
			"a full sweep's run is reused", pr, orList(v.FullSweep))}
	}
	return nil
}

// NotGated is why the repository's workflow does not gate a push of a PR
// with this verdict ("" when it does): "draft", "labelled `evals-only`",
// "no full-sweep label (…)".
func NotGated(v config.LabelVerdict) string {
	switch {
	case len(v.Incompatible) > 0:
		return "labelled " + codeList(v.Incompatible)
	case v.NoFullSweep:
		return "no full-sweep label (" + orList(v.FullSweep) + ")"
	case v.Draft:
		return "draft"
	}
	return ""
}
