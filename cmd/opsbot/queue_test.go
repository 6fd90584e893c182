package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// groupAsk is a merge_group ask's JSON body.
func groupAsk(ref, commit string) string {
	raw, _ := json.Marshal(map[string]any{"repo": theRepo, "event": "merge_group", "ref": ref, "sha": commit})
	return string(raw)
}

// The gate answers a merge group's commit by the PR's decision: a group
// with exactly the files of a head whose sweep reused a run skips its
// sweep on that run; a group whose files differ (the base moved under the
// PR), or of a head that swept, sweeps; a ref that is not a group's is
// refused, and a ref naming another PR gains nothing.
func TestGateAnswersAMergeGroupByThePRsDecision(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml")
	ref := w.GH.MergeGroup(theRepo, thePR, sha("f1"), true)
	out, _ := w.gate("--event", "merge_group", "--ref", ref, "--sha", sha("f1"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-source-pr-number"] != "2512" ||
		!strings.Contains(out["reuse-reason"], "has exactly the files of its head c2c2c2c") {
		t.Fatalf("gate for the group of c2 = %v", out)
	}
	// The base moved under the PR: the group's files are not the head's.
	ref = w.GH.MergeGroup(theRepo, thePR, sha("f2"), false)
	out, _ = w.gate("--event", "merge_group", "--ref", ref, "--sha", sha("f2"))
	if out["skip-pr-sweep"] != "false" || out["reuse-source-run-id"] != "" || !strings.Contains(out["reuse-reason"], "its files are not those of the PR's head c2c2c2c") {
		t.Fatalf("gate for a group of other files = %v", out)
	}
	// A group ref is the asker's word: another PR's number in it reads that PR.
	other := strings.Replace(ref, "/pr-2512-", "/pr-7-", 1)
	rep := w.call("POST", "/api/v1/gate", apiToken, "application/json", groupAsk(other, sha("f1")))
	if rep.code == 200 && strings.Contains(rep.body, "skip-pr-sweep=true") {
		t.Fatalf("a group ref naming another PR answered %d %s", rep.code, rep.body)
	}
	rep = w.call("POST", "/api/v1/gate", apiToken, "application/json", groupAsk("refs/heads/kimi-tune", sha("f1")))
	if rep.code != 400 || !strings.Contains(rep.body, "is not a merge group's branch") {
		t.Fatalf("a ref that is no group's = %d %s", rep.code, rep.body)
	}
	// A head that swept: its group sweeps too.
	w.Push("c3", "perf-changelog.yaml")
	ref = w.GH.MergeGroup(theRepo, thePR, sha("f3"), true)
	out, _ = w.gate("--event", "merge_group", "--ref", ref, "--sha", sha("f3"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "the PR's head c3c3c3c was not skipped") {
		t.Fatalf("gate for the group of a swept head = %v", out)
	}
}
