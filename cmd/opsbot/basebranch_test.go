package main

import (
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// A pull_request run executes the workflow files of the PR's base branch
// merged with the PR: runs of a PR not based on the default branch, or made
// when it was based on another branch, are refused at pin, at use and at
// staging.
func TestRunOfAPRNotBasedOnTheDefaultBranchIsRefused(t *testing.T) {
	t.Parallel()
	t.Run("pin", func(t *testing.T) {
		w := newWorld(t, "")
		w.GH.Retarget(theRepo, thePR, "bench-tmp")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		mustContain(t, "reply", w.LastReply(), "I did not pin run 31147925932", "PR #2512 merges into `bench-tmp`, not the default branch `main`")
	})
	t.Run("use after a retarget", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Retarget(theRepo, thePR, "bench-tmp")
		w.Push("c2")
		mustContain(t, "invalid pin", w.LastReply(), "is invalid", "merges into `bench-tmp`")
		out, _ := w.gate("--pr", "2512", "--sha", sha("c2"), "--event", "pull_request", "--action", "synchronize")
		if out["skip-pr-sweep"] != "false" {
			t.Fatalf("gate: %v", out)
		}
	})
	t.Run("run made before the PR was retargeted to the default branch", func(t *testing.T) {
		w := stageWorld(t, "")
		w.GH.AddRun(theRepo, githubtest.Run{ID: 31147925999, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour),
			PRs: []int{thePR}, PRBase: "bench-tmp"})
		w.Comment(maintainer, "/reuse-sweep-run 31147925999")
		mustContain(t, "pin", w.LastReply(), "I did not pin run 31147925999", "made for PR #2512 when it merged into `bench-tmp`")
		w.Comment(maintainer, "/stage-results 31147925999")
		mustContain(t, "stage", w.LastReply(), "I did not stage run 31147925999", "when it merged into `bench-tmp`")
		if ds := w.GH.Dispatches(); len(ds) != 0 {
			t.Fatalf("dispatched: %+v", ds)
		}
	})
	t.Run("staging a listed run whose commit left the PR", func(t *testing.T) {
		w := stageWorld(t, "")
		w.GH.AddRun(theRepo, githubtest.Run{ID: 31147925998, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: sha("g1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour),
			PRs: []int{thePR}, PRBase: "bench-tmp"})
		w.Comment(maintainer, "/stage-results 31147925998")
		mustContain(t, "stage", w.LastReply(), "I did not stage run 31147925998", "when it merged into `bench-tmp`")
	})
}

// The run must have been made for this PR's head with the default branch as
// its base: a fork's run lists no pull requests, and GitHub lists every open
// PR whose head matches a run, not the one that triggered it.
func TestRunMustBeMadeForThePRsHead(t *testing.T) {
	t.Parallel()
	forkPR := func(w *world) {
		w.GH.AddPR(theRepo, 2600, "author", "tune", sha("b0"), []string{sha("f1")}, []string{"benchmarks/kimi.sh"})
		w.GH.FromFork(theRepo, 2600, 999, "contributor/InferenceX")
	}
	forkRun := func(w *world, id, repoID int64, repoName string) {
		w.GH.AddRun(theRepo, githubtest.Run{ID: id, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: sha("f1"), HeadBranch: "tune", HeadRepoID: repoID, HeadRepo: repoName, Artifacts: resultArtifacts,
			CreatedAt: time.Now().Add(-time.Hour)})
	}
	commentOn := func(w *world, pr int, body string) {
		c := w.GH.AddComment(theRepo, pr, maintLog, body)
		p := w.CommentPayload("created", maintainer, maintainer, c.ID, body, "")
		setPath(p, "issue.number", pr)
		w.Send("issue_comment", p)
	}
	lastOn := func(w *world, pr int) string {
		cs := w.GH.Comments(theRepo, pr)
		for i := len(cs) - 1; i >= 0; i-- {
			if cs[i].Login == githubtest.BotLogin {
				return cs[i].Body
			}
		}
		w.T.Fatalf("no reply on PR #%d", pr)
		return ""
	}
	t.Run("another fork's run on a branch of the same name", func(t *testing.T) {
		w := newWorld(t, "")
		forkPR(w)
		forkRun(w, 31147926001, 998, "mallory/InferenceX")
		commentOn(w, 2600, "/reuse-sweep-run 31147926001")
		mustContain(t, "reply", lastOn(w, 2600), "I did not pin run 31147926001", "ran on a branch of `mallory/InferenceX`")
	})
	t.Run("a fork's run when the PR was retargeted after it", func(t *testing.T) {
		w := newWorld(t, "")
		forkPR(w)
		forkRun(w, 31147926002, 999, "contributor/InferenceX")
		w.GH.Retarget(theRepo, 2600, "wip-base")
		w.GH.Retarget(theRepo, 2600, "")
		commentOn(w, 2600, "/reuse-sweep-run 31147926002")
		mustContain(t, "reply", lastOn(w, 2600), "I did not pin run 31147926002", "base branch was changed")
	})
	t.Run("a fork's run when a sibling PR of the same head merges into another base", func(t *testing.T) {
		w := newWorld(t, "")
		forkPR(w)
		w.GH.AddPR(theRepo, 2602, "author", "tune", sha("b0"), []string{sha("f1")}).BaseRef = "wip-base"
		w.GH.FromFork(theRepo, 2602, 999, "contributor/InferenceX")
		forkRun(w, 31147926003, 999, "contributor/InferenceX")
		commentOn(w, 2600, "/reuse-sweep-run 31147926003")
		mustContain(t, "reply", lastOn(w, 2600), "I did not pin run 31147926003", "PR #2602 of the same head")
		commentOn(w, 2600, "/reuse-sweep-run")
		mustContain(t, "bare reply", lastOn(w, 2600), "I did not pin a run")
	})
	t.Run("a run whose sibling PR into another base was closed", func(t *testing.T) {
		w := newWorld(t, "")
		w.GH.AddPR(theRepo, 2601, "author", "kimi-tune", sha("b0"), []string{sha("c1")}).BaseRef = "wip-base"
		w.GH.ClosePR(theRepo, 2601, false, "") // a run lists no closed PR
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		mustContain(t, "reply", w.LastReply(), "I did not pin run 31147925932", "PR #2601 of the same head")
	})
	t.Run("a run that also lists a PR of the same head into another base", func(t *testing.T) {
		w := newWorld(t, "")
		w.GH.AddPR(theRepo, 2601, "author", "kimi-tune", sha("b0"), []string{sha("c1")}).BaseRef = "wip-base"
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		mustContain(t, "reply", w.LastReply(), "I did not pin run 31147925932", "also lists PR #2601, which merges into `wip-base`")
	})
}
