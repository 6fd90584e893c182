package main

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// The repository forces a fresh sweep by removing and re-adding its sweep
// label: an ask for a label event answers sweep even for a head already
// decided skip, and leaves the decision and the pin as they were.
func TestLabelAskSweepsADecidedHead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "true" {
		t.Fatalf("synchronize ask = %v", out)
	}
	before := w.trail()
	out, _ = w.gate("--pr", "2512", "--sha", sha("c2"), "--action", "labeled")
	if out["skip-pr-sweep"] != "false" || out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], `"labeled" does not decide`) {
		t.Fatalf("labeled ask for a head decided skip = %v", out)
	}
	if after := w.trail(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("the labeled ask changed the audit:\nbefore %v\nafter  %v", before, after)
	}
	out, _ = w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" {
		t.Fatalf("the stored decision changed after a labeled ask: %v", out)
	}
}

// A run of a PR whose labels make its sweep partial is not pinned, and the
// reply names the labels.
func TestPinRefusedOnAPartialSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "evals-only")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "reply", w.LastReply(), "I did not pin run 31147925932", "labelled `evals-only`", "partial")
	w.GH.SetLabels(theRepo, thePR, "sweep-enabled")
	w.Comment(maintainer, "/reuse-sweep-run")
	mustContain(t, "bare pin reply", w.LastReply(), "I did not pin a run", "none of the full-sweep labels", "`full-sweep-enabled`")
	if tr := w.trail(); len(tr) != 2 || tr[0] != "command reuse-sweep-run rejected" || tr[1] != "command reuse-sweep-run rejected" {
		t.Fatalf("audit = %v", tr)
	}
}

// A pinned PR that becomes agentx-fast before its push is not gated: the
// push decides nothing, posts no status, uses up no pin, and says so once;
// an ask answers sweep saying why; once the label goes, the next push
// reuses the run.
func TestUngatedPushKeepsThePin(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "agentx-fast")
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 0 {
		t.Fatalf("a push that is not gated got a status: %+v", st)
	}
	mustContain(t, "not gated notice", w.LastReply(), "Not gated: labelled `agentx-fast`", "stays for the next push that is gated")
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "not gated: labelled `agentx-fast`") {
		t.Fatalf("ask for a push that is not gated = %v", out)
	}
	replies := len(w.Replies())
	w.Push("c3")
	if got := len(w.Replies()); got != replies {
		t.Fatalf("the second push that is not gated for the same reason said it again: %v", w.Replies()[replies:])
	}
	tr := w.trail()
	if tr[len(tr)-1] != "decision not_gated" || tr[len(tr)-2] != "decision not_gated" {
		t.Fatalf("audit = %v", tr)
	}
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled")
	w.Push("c4")
	if st := w.Statuses("c4"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("the first gated push after the label went = %+v", st)
	}
}

// A draft's push uses up no pin and posts no skip status.
func TestDraftPushUsesUpNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetDraft(theRepo, thePR, true)
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 0 {
		t.Fatalf("a draft's push got a status: %+v", st)
	}
	mustContain(t, "not gated notice", w.LastReply(), "Not gated: draft")
	w.GH.SetDraft(theRepo, thePR, false)
	w.Push("c3")
	if st := w.Statuses("c3"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("the first push after ready for review = %+v", st)
	}
}

// The push to main after merging a PR whose sweep was partial reuses
// nothing, naming the labels; a PR merged with its pin reuses the run, and
// the reason names the head that was decided.
func TestPushGateJudgesTheMergedPRsLabels(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetLabels(theRepo, thePR, "sweep-enabled")
	w.ClosePR(true, "a1")
	out, _ := w.gate("--event", "push", "--sha", sha("a1"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "none of the full-sweep labels") ||
		!strings.Contains(out["reuse-reason"], "full-sweep-fail-fast") {
		t.Fatalf("push gate after a trimmed sweep = %v", out)
	}
	w2 := newWorld(t, "")
	w2.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w2.ClosePR(true, "a2")
	out, _ = w2.gate("--event", "push", "--sha", sha("a2"))
	if out["reuse-enabled"] != "true" || !strings.Contains(out["reuse-reason"], "the merge of PR #2512 (head c1c1c1c) reused run 31147925932") {
		t.Fatalf("push gate after a merge that consumed the pin = %v", out)
	}
}

// An empty list turns a label rule off.
func TestLabelRulesTurnedOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      full_sweep_labels: []\n      incompatible_labels: []\n")
	w.GH.SetLabels(theRepo, thePR, "evals-only")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("with the label rules off = %+v (%s)", st, w.LastReply())
	}
}

// A merge of the default branch into the PR brings the default branch's
// files: under allowed_paths they do not count, since the PR does not change
// them; a file the PR itself changes after the run still does.
func TestPathGuardCountsOnlyThePRsOwnChanges(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\", \"docs/**\"]\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.MergeDefault(theRepo, thePR, sha("c2"), "benchmarks/other-model.sh", "utils/ingest.py")
	w.SendSync(sha("c2"), "")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("a merge of main under allowed_paths = %+v (%s)", st, w.LastReply())
	}
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.MergeDefault(theRepo, thePR, sha("c3"), "benchmarks/other-model.sh")
	w.Push("c4", "benchmarks/kimi.sh")
	if st := w.Statuses("c4"); len(st) != 1 || strings.HasPrefix(st[0].Description, "skip") {
		t.Fatalf("the PR's own change outside allowed_paths after a merge of main = %+v", st)
	}
	mustContain(t, "invalid comment", w.LastReply(), "touch `benchmarks/kimi.sh`", "outside the allowed paths")
	if strings.Contains(w.LastReply(), "other-model") {
		t.Fatalf("the refusal counts the default branch's file: %s", w.LastReply())
	}
}

// With main_sweeps: false the push to the default branch takes the merged
// PR's final head's own real sweep, validated as a reuse is; a final head
// without one answers reuse-enabled=false saying so.
func TestMainWithoutSweepsTakesTheFinalHeadsOwnSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    main_sweeps: false\n")
	w.Push("c2")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 31200000001, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w.ClosePR(true, "a1")
	out, _ := w.gate("--event", "push", "--sha", sha("a1"))
	if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31200000001" || out["reuse-source-head-sha"] != sha("c2") ||
		!strings.Contains(out["reuse-reason"], "ran its own sweep, run 31200000001") {
		t.Fatalf("push gate after a final head that swept, main_sweeps false = %v", out)
	}

	w2 := newWorld(t, "    main_sweeps: false\n")
	w2.Push("c2")
	w2.ClosePR(true, "a2")
	out, _ = w2.gate("--event", "push", "--sha", sha("a2"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "the final head has no real sweep of its own") {
		t.Fatalf("push gate after a final head without its own sweep = %v", out)
	}

	w3 := newWorld(t, "")
	w3.Push("c2")
	w3.GH.AddRun(theRepo, githubtest.Run{ID: 31200000001, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
	w3.ClosePR(true, "a3")
	out, _ = w3.gate("--event", "push", "--sha", sha("a3"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "ran its own sweep") {
		t.Fatalf("push gate where pushes to main sweep = %v", out)
	}
}

// A run made while the PR was labelled for a partial sweep stays a partial
// sweep's run after the labels change: neither a named nor a bare pin takes
// it, though the PR's labels now ask for a full sweep.
func TestPartialSweepRunStaysPartial(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	now := time.Now()
	w.GH.SetLabelsAt(theRepo, thePR, now.Add(-3*time.Hour), "evals-only")       // before run R1 was made (2 h ago)
	w.GH.SetLabelsAt(theRepo, thePR, now.Add(-time.Hour), "full-sweep-enabled") // after
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "named pin", w.LastReply(), "I did not pin run 31147925932", "was made while PR #2512 was labelled `evals-only`")
	w.Comment(maintainer, "/reuse-sweep-run")
	mustContain(t, "bare pin", w.LastReply(), "I did not pin a run", "labelled `evals-only`")
}

// The workflow's ask for a push whose webhook has not come yet judges the
// PR as GitHub reads it then, not the draft flag an older webhook carried,
// and the webhook that follows reads the same decision.
func TestAskBeforeThePushWebhookReadsTheLabelsOfThatPush(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetDraft(theRepo, thePR, true)
	w.SendSync(sha("c1"), "") // a webhook carrying draft=true
	w.GH.SetDraft(theRepo, thePR, false)
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, nil)
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "true" {
		t.Fatalf("ask for a ready PR's push before its webhook = %v", out)
	}
	w.SendSync(sha("c2"), "")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("statuses of c2 = %+v", st)
	}
}

// A head answered not gated stays so: the webhook of that push, carrying
// labels that would gate it, uses up no pin and records no skip.
func TestAHeadAnsweredNotGatedStaysSo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetDraft(theRepo, thePR, true)
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, nil)
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "not gated: draft") {
		t.Fatalf("ask for a draft's push = %v", out)
	}
	w.GH.SetDraft(theRepo, thePR, false)
	w.SendSync(sha("c2"), "") // its webhook now says ready for review
	if st := w.Statuses("c2"); len(st) != 0 {
		t.Fatalf("the head answered not gated was decided: %+v", st)
	}
	out, _ = w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "not gated: draft") {
		t.Fatalf("second ask for the head answered not gated = %v", out)
	}
	w.Push("c3")
	if st := w.Statuses("c3"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("the next gated push = %+v", st)
	}
}

// A new pin is told that a push was not gated, though the pin before it was
// told the same.
func TestNotGatedIsToldToEachPin(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetDraft(theRepo, thePR, true)
	w.Push("c2")
	mustContain(t, "first", w.LastReply(), "Not gated: draft")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c3")
	mustContain(t, "second pin", w.LastReply(), "Not gated: draft", "c3c3c3c")
}

// A merge whose labels make the PR's sweep partial reuses nothing, though
// a pin was active: the pin is invalid, and the push to the default branch
// says why.
func TestMergeWithPartialLabelsReusesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "evals-only")
	w.ClosePR(true, "a1")
	if tr := w.trail(); tr[len(tr)-1] != "pin invalid" || tr[len(tr)-2] != "decision sweep" {
		t.Fatalf("audit = %v", tr)
	}
	out, _ := w.gate("--event", "push", "--sha", sha("a1"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "labelled `evals-only`") {
		t.Fatalf("push gate after a partial merge = %v", out)
	}
}

// GitHub does not promise the order of deliveries: a label event stamped
// before the one opsbot recorded (late) does not move the labels back, so
// the workflow's ask for the recorded head judges the labels the newest
// event carried (GitHub, read here, would say otherwise).
func TestLateLabelEventDoesNotMoveTheLabelsBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	t0 := time.Now().Add(-time.Hour)
	w.sendPRAt("opened", sha("c1"), t0) // the head recorded, not decided (opened is no gate action here)
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "evals-only")
	w.sendPRAt("labeled", sha("c1"), t0.Add(2*time.Minute)) // evals-only added: the newest event
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled")
	w.sendPRAt("unlabeled", sha("c1"), t0.Add(time.Minute)) // an older event, without evals-only, delivered late
	out, _ := w.gate("--pr", "2512", "--sha", sha("c1"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "not gated: labelled `evals-only`") {
		t.Fatalf("ask after a late label event = %v, want not gated by the newest labels", out)
	}
}
