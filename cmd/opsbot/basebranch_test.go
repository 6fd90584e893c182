package main

import (
	"testing"
	"time"

	"opsbot/internal/githubtest"
)

// A pull_request run executes the workflow files of the PR's base branch
// merged with the PR: runs of a PR not based on the default branch, or made
// when it was based on another branch, are refused at pin, at use and at
// staging.
func TestRunOfAPRNotBasedOnTheDefaultBranchIsRefused(t *testing.T) {
	t.Run("pin", func(t *testing.T) {
		w := newWorld(t, "")
		w.gh.Retarget(theRepo, thePR, "bench-tmp")
		w.comment(maintainer, "/reuse-sweep-run 31147925932")
		mustContain(t, "reply", w.lastReply(), "I did not pin run 31147925932", "PR #2512 merges into `bench-tmp`, not the default branch `main`")
	})
	t.Run("use after a retarget", func(t *testing.T) {
		w := newWorld(t, "")
		w.comment(maintainer, "/reuse-sweep-run 31147925932")
		w.gh.Retarget(theRepo, thePR, "bench-tmp")
		w.push("c2")
		mustContain(t, "invalid pin", w.lastReply(), "is invalid", "merges into `bench-tmp`")
		out, _ := w.gate("--pr", "2512", "--sha", sha("c2"), "--event", "pull_request", "--action", "synchronize")
		if out["skip-pr-sweep"] != "false" {
			t.Fatalf("gate: %v", out)
		}
	})
	t.Run("run made before the PR was retargeted to the default branch", func(t *testing.T) {
		w := stageWorld(t, "")
		w.gh.AddRun(theRepo, githubtest.Run{ID: 31147925999, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour),
			PRs: []int{thePR}, PRBase: "bench-tmp"})
		w.comment(maintainer, "/reuse-sweep-run 31147925999")
		mustContain(t, "pin", w.lastReply(), "I did not pin run 31147925999", "made for PR #2512 when it merged into `bench-tmp`")
		w.comment(maintainer, "/stage-results 31147925999")
		mustContain(t, "stage", w.lastReply(), "I did not stage run 31147925999", "when it merged into `bench-tmp`")
		if ds := w.gh.Dispatches(); len(ds) != 0 {
			t.Fatalf("dispatched: %+v", ds)
		}
	})
	t.Run("staging a listed run whose commit left the PR", func(t *testing.T) {
		w := stageWorld(t, "")
		w.gh.AddRun(theRepo, githubtest.Run{ID: 31147925998, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: sha("g1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour),
			PRs: []int{thePR}, PRBase: "bench-tmp"})
		w.comment(maintainer, "/stage-results 31147925998")
		mustContain(t, "stage", w.lastReply(), "I did not stage run 31147925998", "when it merged into `bench-tmp`")
	})
}
