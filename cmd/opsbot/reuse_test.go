package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// The everyday story: pin R1, the next push skips, the push after sweeps.
func TestEverydayStory(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	c := w.Comment(maintainer, "Verified the sweep at c1.\n\n/reuse-sweep-run 31147925932\n")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"+1"}) {
		t.Fatalf("reactions on the pin comment = %v, want [+1]", r)
	}
	mustContain(t, "pin reply", w.LastReply(), "@maintainer pinned run [31147925932]", "`success`", "commit `c1c1c1c`",
		"covers that one push only", "<!-- opsbot:notice=")

	w.Push("c2", "perf-changelog.yaml")
	st := w.Statuses("c2")
	if len(st) != 1 || st[0].Context != "opsbot/sweep-gate" || st[0].Description != "skip: reusing run 31147925932, authorized by @maintainer" {
		t.Fatalf("status on c2 = %+v", st)
	}
	mustContain(t, "skip comment", w.LastReply(), "Sweep skipped for", "reusing run [31147925932]", "authorized by @maintainer",
		"#issuecomment-")
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-enabled"] != "true" ||
		out["reuse-source-head-sha"] != sha("c1") || out["reuse-source-pr-number"] != "2512" || out["reuse-source-run-attempt"] != "1" {
		t.Fatalf("gate for c2 = %v", out)
	}

	w.Push("c3", "perf-changelog.yaml")
	if st := w.Statuses("c3"); len(st) != 1 || st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("status on c3 = %+v", st)
	}
	out, _ = w.gate("--pr", "2512", "--sha", sha("c3"))
	if out["skip-pr-sweep"] != "false" || out["reuse-source-run-id"] != "" {
		t.Fatalf("gate for c3 = %v", out)
	}
	want := []string{"command reuse-sweep-run accepted", "pin active", "decision skip", "pin consumed", "decision sweep"}
	if got := w.trail(); !slices.Equal(got, want) {
		t.Fatalf("audit trail = %v, want %v", got, want)
	}
	rec := w.audit()[2]
	if rec["head_sha"] != sha("c2") || rec["run_id"] != float64(runR1) || rec["actor_login"] != "maintainer" || rec["delivery_id"] == "" ||
		!strings.Contains(rec["comment_url"].(string), "#issuecomment-") {
		t.Fatalf("skip decision record = %v", rec)
	}
}

func TestBareCommandResolvesNewestRealSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run")
	mustContain(t, "bare pin reply", w.LastReply(), "pinned run [31147925932]", "the newest real sweep run of this PR")
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("status = %+v", st)
	}
	w.Push("c3")
	if st := w.Statuses("c3"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep") {
		t.Fatalf("a bare pin covered a second push: %+v", st)
	}
}

func TestBareCommandWithoutRunIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.ExpireArtifacts(theRepo, runR1)
	c := w.Comment(maintainer, "/reuse-sweep-run")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions = %v", r)
	}
	mustContain(t, "reply", w.LastReply(), "I did not pin a run", "no completed sweep run", "/reuse-sweep-run <run-id>")
}

func TestDeniedBelowRequiredRole(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.SetRole(theRepo, readerLog, "triage") // answered: below triage gets a reaction only (quiet_test.go)
	c := w.Comment(reader, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions = %v", r)
	}
	reply := w.LastReply()
	mustContain(t, "denial", reply, "@reader I did not run `/reuse-sweep-run 31147925932`", "needs the `write` role")
	if strings.Contains(reply, "`triage`") {
		t.Error("the denial reveals the user's role")
	}
	w.Push("c2")
	if st := w.Statuses("c2"); st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("a denied pin skipped: %+v", st)
	}
	if tr := w.trail(); tr[0] != "command reuse-sweep-run denied" {
		t.Fatalf("audit = %v", tr)
	}
	// Usage errors from an unauthorized commenter get no reply at all.
	before := len(w.Replies())
	w.Comment(reader, "/reuse-sweep-run twelve")
	if len(w.Replies()) != before {
		t.Fatal("opsbot answered a usage error of a commenter without the role")
	}
	if tr := w.trail(); tr[len(tr)-1] != "command reuse-sweep-run usage_error" {
		t.Fatalf("usage error not audited: %v", tr)
	}
	// A maintainer's usage error is answered with the usage.
	w.Comment(maintainer, "/use")
	mustContain(t, "usage reply", w.LastReply(), "usage: /use <run-id or run URL>")
}

// A bot's command is denied (even with admin) with a 👎 and no reply; an
// allow-listed bot may command (its reply names it without pinging the user
// account of the same name); opsbot's own comments are never read.
func TestBotsAndOpsbotItself(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    allow_bots: [\"release[bot]\"]\n")
	w.GH.AddUser("renovate[bot]", 6000, "Bot")
	w.GH.SetRole(theRepo, "renovate[bot]", "admin")
	c := w.Comment(user{Login: "renovate[bot]", ID: 6000, Kind: "Bot"}, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to a bot's command = %v", r)
	}
	if r := w.Replies(); len(r) != 0 {
		t.Fatalf("opsbot replied to a bot that is not allow-listed: %q", r)
	}
	before := len(w.Replies())
	w.Comment(user{Login: githubtest.BotLogin, ID: githubtest.BotID, Kind: "Bot"}, "/reuse-sweep-run 31147925932")
	if len(w.Replies()) != before {
		t.Fatal("opsbot answered its own comment")
	}
	w.GH.AddUser("release[bot]", 6001, "Bot")
	w.GH.SetRole(theRepo, "release[bot]", "write")
	w.Comment(user{Login: "release[bot]", ID: 6001, Kind: "Bot"}, "/reuse-sweep-run 31147925932")
	mustContain(t, "allow-listed bot", w.LastReply(), mdtext.Mention("release[bot]")+" pinned run [31147925932]")
	if tr := w.trail(); tr[0] != "command reuse-sweep-run denied" || tr[len(tr)-1] != "pin active" {
		t.Fatalf("audit = %v", tr)
	}
}

func TestSupersedeAndCancel(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 42, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Comment(maintainer, "/use 42")
	mustContain(t, "supersede reply", w.LastReply(), "pinned run [42]", "replaces the pin of run [31147925932]", "superseded")
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	mustContain(t, "cancel reply", w.LastReply(), "revoked the pin of run [42]")
	w.Push("c2")
	if st := w.Statuses("c2"); st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("after cancel: %+v", st)
	}
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	mustContain(t, "second cancel", w.LastReply(), "no active pin on this PR to cancel")
	want := []string{"command reuse-sweep-run accepted", "pin active", "command reuse-sweep-run accepted", "pin superseded", "pin active",
		"command reuse-sweep-run accepted", "pin revoked", "decision sweep", "command reuse-sweep-run accepted"}
	if got := w.trail(); !slices.Equal(got, want) {
		t.Fatalf("audit = %v\nwant %v", got, want)
	}
}

func TestLastReuseInACommentWins(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 42, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932\n/reuse-sweep-run 42")
	mustContain(t, "reply", w.LastReply(), "(line 1) was not run: the last `/reuse-sweep-run` in a comment wins", "pinned run [42]")
	w.Push("c2")
	if st := w.Statuses("c2"); !strings.HasPrefix(st[0].Description, "skip: reusing run 42") {
		t.Fatalf("status = %+v", st)
	}
}

func TestDeleteAndEditRevoke(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	c := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.CommentEvent("deleted", maintainer, maintainer, c.ID, c.Body, "")
	mustContain(t, "delete reply", w.LastReply(), "is **revoked**", "was deleted")

	c2 := w.Comment(maintainer, "LGTM\n/reuse-sweep-run 31147925932")
	// An edit that keeps the line keeps the pin; one that removes it revokes.
	w.CommentEvent("edited", maintainer, maintainer, c2.ID, "LGTM!\n/reuse-sweep-run 31147925932", c2.Body)
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("an edit keeping the command changed the pin: %v", tr)
	}
	w.CommentEvent("edited", maintainer, maintainer, c2.ID, "LGTM", "LGTM!\n/reuse-sweep-run 31147925932")
	mustContain(t, "edit reply", w.LastReply(), "is **revoked**", "edited away")
	w.Push("c2")
	if st := w.Statuses("c2"); st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("after the edit: %+v", st)
	}
}

func TestCommandsAddedByEditAreNotRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	c := w.Comment(maintainer, "LGTM")
	w.CommentEvent("edited", maintainer, maintainer, c.ID, "LGTM\n/reuse-sweep-run 31147925932", "LGTM")
	mustContain(t, "edit reply", w.LastReply(), "commands in edited comments are not run; post a new comment")
	w.Push("c2")
	if st := w.Statuses("c2"); st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("an edited-in command pinned: %+v", st)
	}
	// A reader editing in a command makes opsbot say nothing.
	rc := w.Comment(reader, "nice")
	before := len(w.Replies())
	w.CommentEvent("edited", reader, reader, rc.ID, "nice\n/use 31147925932", "nice")
	if len(w.Replies()) != before {
		t.Fatal("opsbot answered an unauthorized edit")
	}
}

func TestCloseExpiresAndMergeConsumes(t *testing.T) {
	t.Parallel()
	t.Run("closed", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.ClosePR(false, "")
		mustContain(t, "reply", w.LastReply(), "is **expired**", "closed without merging")
		if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("merged", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.ClosePR(true, "a1")
		if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"decision skip", "pin consumed"}) {
			t.Fatalf("audit = %v", tr)
		}
		out, _ := w.gate("--event", "push", "--sha", sha("a1"))
		if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["skip-pr-sweep"] != "false" ||
			out["reuse-source-pr-number"] != "2512" {
			t.Fatalf("push gate = %v", out)
		}
	})
}

func TestPushGateFollowsTheFinalHead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	w.ClosePR(true, "a2")
	out, _ := w.gate("--event", "push", "--sha", sha("a2"))
	if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-source-head-sha"] != sha("c1") {
		t.Fatalf("push gate after a skipped final head = %v", out)
	}
	w2 := newWorld(t, "")
	w2.Push("c2")
	w2.ClosePR(true, "a3")
	out, _ = w2.gate("--event", "push", "--sha", sha("a3"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "ran its own sweep") {
		t.Fatalf("push gate after a swept final head = %v", out)
	}
	out, _ = w2.gate("--event", "push", "--sha", sha("deadbeef"))
	if out["reuse-enabled"] != "false" || !strings.Contains(out["reuse-reason"], "merged no pull request") {
		t.Fatalf("push gate for a commit of no PR = %v", out)
	}
}
