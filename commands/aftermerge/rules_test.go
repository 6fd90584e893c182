package aftermerge_test

import (
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
)

// The counterparts of the benchmark repository's tests of its recovery
// helper (utils/changelog_gate_tests/test_recover_failed_ingest.py), with
// their inputs and outcomes, for what opsbot validates: the run URL, the
// failed job's choice, and the recovery workflow's rules. The helper's
// confirmation input (recover-pr-<N>) and its changelog checks do not
// apply: opsbot's dispatch is the maintainer's confirmation, and it
// reconstructs no changelog.

func TestParseTargetURLAcceptsRunAndJobURLs(t *testing.T) {
	for u, want := range map[string][3]int64{
		"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/123":         {123, 0},
		"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/123/job/456": {123, 456},
		// opsbot's own: a check's link and a trailing slash.
		"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/123/job/456?pr=2807": {123, 456},
		"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/123/":                {123, 0},
	} {
		repo, run, job, err := aftermerge.ParseTargetURL(u)
		if err != nil || repo != "SemiAnalysisAI/InferenceX" || run != want[0] || job != want[1] {
			t.Errorf("ParseTargetURL(%q) = %q %d %d %v", u, repo, run, job, err)
		}
	}
}

func TestParseTargetURLRejectsNonActionsURL(t *testing.T) {
	if _, _, _, err := aftermerge.ParseTargetURL("https://github.com/SemiAnalysisAI/InferenceX/pull/1"); err == nil ||
		!strings.Contains(err.Error(), "Actions run URL") {
		t.Fatalf("a PR URL: %v", err)
	}
}

func jobs(conclusions ...string) []ghclient.Job {
	var out []ghclient.Job
	for i, c := range conclusions {
		out = append(out, ghclient.Job{ID: int64(i + 1), Name: "job" + string(rune('a'+i)), Status: "completed", Conclusion: c})
	}
	return out
}

func TestSelectFailedJobUsesExplicitJob(t *testing.T) {
	if j, err := aftermerge.SelectFailedJob(jobs("success", "failure"), 2); err != nil || j.ID != 2 {
		t.Fatalf("= %+v %v", j, err)
	}
	if _, err := aftermerge.SelectFailedJob(jobs("success", "failure"), 1); err == nil || !strings.Contains(err.Error(), "not a completed failed job") {
		t.Fatalf("a job that succeeded named: %v", err)
	}
	if _, err := aftermerge.SelectFailedJob(jobs("success", "failure"), 9); err == nil || !strings.Contains(err.Error(), "was not found") {
		t.Fatalf("a job of another run named: %v", err)
	}
}

func TestSelectFailedJobAllowsUnambiguousRunOnlyURL(t *testing.T) {
	if j, err := aftermerge.SelectFailedJob(jobs("success", "failure"), 0); err != nil || j.ID != 2 {
		t.Fatalf("= %+v %v", j, err)
	}
}

func TestSelectFailedJobRejectsAmbiguousRunOnlyURL(t *testing.T) {
	_, err := aftermerge.SelectFailedJob(jobs("failure", "failure"), 0)
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), "1 (joba), 2 (jobb)") {
		t.Fatalf("two failed jobs: %v", err)
	}
}

// workflow is the helper's test workflow, with the inputs opsbot
// dispatches declared, edited by edit.
func workflow(edit func(string) string) []byte {
	w := `name: Recover
on:
  workflow_dispatch:
    inputs:
      confirm:
        required: true
        type: string
      source-run-id:
        required: true
        type: string
      merge-run-id:
        required: true
        type: string
permissions:
  actions: read
  contents: read
jobs:
  recover:
    if: ${{ inputs.confirm == 'recover-pr-42' }}
    runs-on: ubuntu-latest
    steps:
      - run: echo recover
`
	if edit != nil {
		w = edit(w)
	}
	return []byte(w)
}

var dispatched = []string{"source-run-id", "merge-run-id"}

func TestValidateRecoveryWorkflowAcceptsSingleCPUJob(t *testing.T) {
	if err := aftermerge.ValidateRecoveryWorkflow(workflow(nil), dispatched...); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRecoveryWorkflowRejects(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(string) string
		want string
	}{
		"matrix": {func(w string) string {
			return strings.Replace(w, "    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n        runner: [h100]\n", 1)
		}, "matrix"},
		"write permissions": {func(w string) string {
			return strings.Replace(w, "permissions:\n  actions: read\n  contents: read\n", "permissions:\n  contents: write\n", 1)
		}, "read-only"},
		"job write permissions": {func(w string) string {
			w = strings.Replace(w, "permissions:\n  actions: read\n  contents: read\n", "permissions:\n  contents: read\n", 1)
			return strings.Replace(w, "    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    permissions:\n      contents: write\n", 1)
		}, "job permissions"},
		"no permissions": {func(w string) string {
			return strings.Replace(w, "permissions:\n  actions: read\n  contents: read\n", "", 1)
		}, "read-only"},
		"another trigger": {func(w string) string { return strings.Replace(w, "on:\n", "on:\n  push:\n", 1) }, "only use workflow_dispatch"},
		"two jobs": {func(w string) string {
			return w + "  other:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n"
		}, "exactly one job"},
		"a GPU runner": {func(w string) string {
			return strings.Replace(w, "runs-on: ubuntu-latest", "runs-on: [self-hosted, gpu-b200]", 1)
		},
			"ubuntu-latest"},
		"an input missing": {func(w string) string {
			return strings.Replace(w, "      merge-run-id:\n        required: true\n        type: string\n", "", 1)
		}, "merge-run-id"},
		"a key twice": {func(w string) string { return strings.Replace(w, "name: Recover\n", "name: Recover\nname: Again\n", 1) }, "already defined"},
	} {
		err := aftermerge.ValidateRecoveryWorkflow(workflow(c.edit), dispatched...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}
