package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// The rules of issue 12 about which runs may stand in for a push: a run
// made by a workflow the PR changed, a run re-run after its pin, a merge
// after a lost push, and allow_users matched by account id.

const workflowFile = ".github/workflows/run-sweep.yml"

// runR2 is a "successful sweep" on c2, a commit that edits the sweep workflow.
const runR2 = int64(31200000002)

// workflowEdit pushes c2, which edits the sweep workflow, onto the PR (no
// webhook: what matters is the run it made) and adds run R2 on it, newer
// than R1, with every result artifact a real sweep has.
func (w *world) workflowEdit() {
	w.T.Helper()
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{workflowFile, "benchmarks/kimi.sh"})
	w.GH.AddRun(theRepo, githubtest.Run{ID: runR2, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour)})
}

// restart stops opsbot and starts it again on the same database, with the
// configuration edited by edit.
func (w *world) restart(edit func(cfg string) string) {
	w.T.Helper()
	w.Srv.Stop(w.T)
	path := filepath.Join(w.Dir, "opsbot.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		w.T.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(raw))), 0o600); err != nil {
		w.T.Fatal(err)
	}
	w.Srv = startServerWith(w.T, path, w.Env, w.Deps)
}

func TestRunOfAWorkflowThePRChangedIsNeverEligible(t *testing.T) {
	t.Parallel()
	t.Run("pin refused, naming the file", func(t *testing.T) {
		w := newWorld(t, "")
		w.workflowEdit()
		c := w.Comment(maintainer, "/reuse-sweep-run 31200000002")
		if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
			t.Fatalf("reactions = %v, want [-1]", r)
		}
		mustContain(t, "refusal", w.LastReply(), "@maintainer I did not pin run 31200000002", "ran workflow files this PR changes",
			"touch `"+workflowFile+"`", "protected paths `.github/**`")
		if tr := w.trail(); !slices.Equal(tr, []string{"command reuse-sweep-run rejected"}) {
			t.Fatalf("audit = %v", tr)
		}
		w.Push("c3")
		if st := w.Statuses("c3"); len(st) != 1 || st[0].Description != "sweep: no reuse authorization" {
			t.Fatalf("status on c3 = %+v", st)
		}
	})
	t.Run("bare command skips it", func(t *testing.T) {
		w := newWorld(t, "")
		w.workflowEdit()
		w.Comment(maintainer, "/reuse-sweep-run")
		mustContain(t, "bare pin", w.LastReply(), "pinned run [31147925932]", "the newest real sweep run of this PR")
		w.Push("c3")
		if st := w.Statuses("c3"); len(st) != 1 || st[0].Description != "skip: reusing run 31147925932, authorized by @maintainer" {
			t.Fatalf("status on c3 = %+v", st)
		}
	})
	t.Run("gate refuses a pin taken while the repository opted out", func(t *testing.T) {
		w := newWorld(t, "    protected_paths: []\n")
		w.workflowEdit()
		w.Comment(maintainer, "/reuse-sweep-run 31200000002")
		mustContain(t, "pin while opted out", w.LastReply(), "pinned run [31200000002]")
		w.restart(func(cfg string) string { return strings.Replace(cfg, "    protected_paths: []\n", "", 1) })
		w.Push("c3")
		st := w.Statuses("c3")
		if len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep: pinned run 31200000002 no longer qualifies") {
			t.Fatalf("status on c3 = %+v", st)
		}
		mustContain(t, "invalid pin", w.LastReply(), "is invalid", "touch `"+workflowFile+"`")
		out, _ := w.gate("--pr", "2512", "--sha", sha("c3"))
		if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "ran workflow files this PR changes") {
			t.Fatalf("gate for c3 = %v", out)
		}
		if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"decision sweep", "pin invalid"}) {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("staging refuses it, bare staging skips it", func(t *testing.T) {
		w := stageWorld(t, "")
		w.workflowEdit()
		w.Comment(maintainer, "/stage-results 31200000002")
		mustContain(t, "stage refusal", w.LastReply(), "I did not stage run 31200000002", "touch `"+workflowFile+"`")
		if n := len(w.GH.Dispatches()); n != 0 {
			t.Fatalf("%d dispatches for a run of a changed workflow", n)
		}
		w.Comment(maintainer, "/stage-results")
		mustContain(t, "bare stage", w.LastReply(), "@maintainer staging run [31147925932]")
		if ds := w.GH.Dispatches(); len(ds) != 1 || ds[0].ClientPayload["run-id"] != "31147925932" {
			t.Fatalf("dispatches = %+v", ds)
		}
	})
}

func TestConfigCheckWarnsWhenProtectedPathsAreOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		extra string
		warn  bool
	}{{"", false}, {"    protected_paths: []\n", true}, {"    protected_paths: [\".github/**\", \"scripts/sweep/**\"]\n", false}} {
		path := writeConfig(t, dir, "")
		raw, _ := os.ReadFile(path)
		cfg := strings.Replace(string(raw), "  - name: \"octo-org/octo-repo\"\n    sweep_workflow: \".github/workflows/run-sweep.yml\"\n",
			"  - name: \"octo-org/octo-repo\"\n    sweep_workflow: \".github/workflows/run-sweep.yml\"\n"+tc.extra, 1)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"config", "check", "--config", path}, testEnv(nil), strings.NewReader(""), &stdout, &stderr); err != nil {
			t.Fatalf("config check %q: %v\n%s%s", tc.extra, err, stdout.String(), stderr.String())
		}
		got := strings.Contains(stdout.String(), "warning: repos[1].protected_paths: empty")
		if got != tc.warn {
			t.Errorf("protected_paths %q: warning %v, want %v\n%s", tc.extra, got, tc.warn, stdout.String())
		}
	}
}

func TestPinHoldsTheAttemptThatWasPinned(t *testing.T) {
	t.Parallel()
	url := "https://github.com/" + theRepo + "/actions/runs/31147925932"
	t.Run("a re-run after the pin invalidates it", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run "+url+"/attempts/1")
		mustContain(t, "pin", w.LastReply(), "pinned run [31147925932]", "(attempt 1; a re-run makes this pin invalid)")
		w.GH.Rerun(theRepo, runR1, "success") // attempt 2 replaces what the maintainer saw
		w.Push("c2")
		st := w.Statuses("c2")
		if len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep: pinned run 31147925932 no longer qualifies") {
			t.Fatalf("status on c2 = %+v", st)
		}
		mustContain(t, "invalid pin", w.LastReply(), "is invalid", "has been re-run: its latest attempt is 2, not attempt 1")
		out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
		if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "re-run") {
			t.Fatalf("gate for c2 = %v", out)
		}
		if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"decision sweep", "pin invalid"}) {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("no attempt named pins the latest", func(t *testing.T) {
		w := newWorld(t, "")
		w.GH.Rerun(theRepo, runR1, "success")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		mustContain(t, "pin", w.LastReply(), "pinned run [31147925932]", "(attempt 2;")
		w.Push("c2")
		out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
		if out["skip-pr-sweep"] != "true" || out["reuse-source-run-attempt"] != "2" {
			t.Fatalf("gate for c2 = %v", out)
		}
	})
	t.Run("an attempt that is not the latest is refused", func(t *testing.T) {
		w := newWorld(t, "")
		w.GH.Rerun(theRepo, runR1, "success")
		c := w.Comment(maintainer, "/reuse-sweep-run "+url+"/attempts/1")
		if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
			t.Fatalf("reactions = %v, want [-1]", r)
		}
		mustContain(t, "refusal", w.LastReply(), "I did not pin run 31147925932", "its latest attempt is 2, not attempt 1")
		w.Push("c2")
		if st := w.Statuses("c2"); len(st) != 1 || st[0].Description != "sweep: no reuse authorization" {
			t.Fatalf("status on c2 = %+v", st)
		}
	})
}

// With reuse.allowed_paths set, a merge carries a pin over to the default
// branch only if the commits after the pinned run stay inside them, checked
// at merge up to the PR's final head, even when that head's synchronize
// never reached opsbot.
func TestMergeAppliesThePathGuardToTheFinalHead(t *testing.T) {
	t.Parallel()
	guard := "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\", \"docs/**\"]\n"
	t.Run("lost synchronize of a push outside the allowed paths", func(t *testing.T) {
		w := newWorld(t, guard)
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{"benchmarks/kimi.sh"}) // its synchronize is lost
		w.ClosePR(true, "a1")
		out, _ := w.gate("--event", "push", "--sha", sha("a1"))
		if out["reuse-enabled"] != "false" || out["reuse-source-run-id"] != "" {
			t.Fatalf("push gate after a merge whose final head left the allowed paths = %v", out)
		}
		mustContain(t, "push gate reason", out["reuse-reason"], "final head c2c2c2c", "touch `benchmarks/kimi.sh`", "outside the allowed paths")
		if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"decision sweep", "pin invalid"}) {
			t.Fatalf("audit = %v", tr)
		}
		// The synchronize arriving after the merge finds the head decided.
		w.SendSync(sha("c2"), "")
		if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep: pinned run 31147925932 no longer qualifies") {
			t.Fatalf("statuses on c2 = %+v", st)
		}
	})
	t.Run("lost synchronize of a push inside the allowed paths", func(t *testing.T) {
		w := newWorld(t, guard)
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{"docs/kimi.md"})
		w.ClosePR(true, "a1")
		out, _ := w.gate("--event", "push", "--sha", sha("a1"))
		if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" || !strings.Contains(out["reuse-reason"], "final head c2c2c2c") {
			t.Fatalf("push gate = %v", out)
		}
		if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"decision skip", "pin consumed"}) {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("pin taken at the final head, merged", func(t *testing.T) {
		w := newWorld(t, guard)
		w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{"docs/kimi.md"})
		w.SendSync(sha("c2"), "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.ClosePR(true, "a1")
		out, _ := w.gate("--event", "push", "--sha", sha("a1"))
		if out["reuse-enabled"] != "true" || out["reuse-source-run-id"] != "31147925932" {
			t.Fatalf("push gate = %v", out)
		}
	})
}

// allow_users names logins; opsbot resolves each to its account id at
// start and lets only that account in. Whoever holds the login later (a
// renamed or deleted account's login, taken) is unlisted, and a login that
// did not resolve allows nobody.
func TestAllowUsersMatchesAccountIDs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allow_users: [\"trusted\", \"ghost\"]\n")
	w.GH.AddUser("trusted", 7001, "User")
	w.GH.SetRole(theRepo, "trusted", "read")
	w.restart(func(cfg string) string { return cfg }) // logins are resolved at start
	mustContain(t, "log", w.Srv.Stderr.String(), `"msg":"allow_users login resolved","login":"trusted","account_id":7001`,
		`"login":"ghost"`, "could not be resolved to an account: it allows nobody")

	w.Comment(user{Login: "trusted", ID: 7001, Kind: "User"}, "/reuse-sweep-run 31147925932")
	mustContain(t, "the listed account", w.LastReply(), "@trusted pinned run [31147925932]")

	// The account is renamed and someone else takes its login.
	w.GH.AddUser("trusted-elsewhere", 7001, "User")
	w.GH.AddUser("trusted", 7666, "User")
	w.GH.SetRole(theRepo, "trusted", "triage") // below triage a denial gets a 👎 only (quiet_test.go); triage is answered
	c := w.Comment(user{Login: "trusted", ID: 7666, Kind: "User"}, "/reuse-sweep-run cancel")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to the login's new holder = %v, want [-1]", r)
	}
	mustContain(t, "the login's new holder", w.LastReply(), "@trusted I did not run `/reuse-sweep-run cancel`", "needs the `write` role")

	// A login that did not resolve at start allows nobody, even once an account takes it.
	w.GH.AddUser("ghost", 7777, "User")
	w.GH.SetRole(theRepo, "ghost", "triage")
	w.Comment(user{Login: "ghost", ID: 7777, Kind: "User"}, "/reuse-sweep-run cancel")
	mustContain(t, "unresolved login", w.LastReply(), "@ghost I did not run", "needs the `write` role")

	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932, authorized by @trusted") {
		t.Fatalf("the listed account's pin was not kept: %+v", st)
	}
}

// An allow_users login stays bound to the account it first resolved to,
// across restarts: after a rename, the login's new holder is not let in by
// a restart, the log says loudly that GitHub names another account, and the
// original account (under its new login) stays allowed. Removing the login
// from allow_users and restarting forgets the binding, so adding it back
// binds the login's holder then.
func TestAllowUsersBindingSurvivesRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allow_users: [\"trusted\"]\n")
	w.GH.AddUser("trusted", 7001, "User")
	w.GH.SetRole(theRepo, "trusted", "read")
	w.restart(func(cfg string) string { return cfg }) // bound: trusted -> 7001

	// The account is renamed and an attacker (no role) takes the login; opsbot restarts.
	w.GH.AddUser("trusted-elsewhere", 7001, "User")
	w.GH.AddUser("trusted", 7666, "User")
	w.GH.SetRole(theRepo, "trusted", "none")
	w.restart(func(cfg string) string { return cfg })
	mustContain(t, "log", w.Srv.Stderr.String(), "SECURITY: GitHub no longer names the stored account for an allow_users login",
		`"login":"trusted","stored_account_id":7001,"github_account_id":7666`)
	c := w.Comment(user{Login: "trusted", ID: 7666, Kind: "User"}, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to the login's new holder after a restart = %v, want [-1] (reply %s)", r, w.LastReply())
	}
	w.Comment(user{Login: "trusted-elsewhere", ID: 7001, Kind: "User"}, "/reuse-sweep-run 31147925932")
	mustContain(t, "the bound account", w.LastReply(), "@trusted-elsewhere pinned run [31147925932]")

	// Re-binding: remove the login, restart (forgotten), add it back, restart (bound to its holder now).
	w.restart(func(cfg string) string { return strings.Replace(cfg, `allow_users: ["trusted"]`, `allow_users: []`, 1) })
	mustContain(t, "log", w.Srv.Stderr.String(), "an allow_users login no longer configured: its account is forgotten")
	w.restart(func(cfg string) string { return strings.Replace(cfg, `allow_users: []`, `allow_users: ["trusted"]`, 1) })
	mustContain(t, "log", w.Srv.Stderr.String(), `"msg":"allow_users login resolved","login":"trusted","account_id":7666`)
	w.Comment(user{Login: "trusted", ID: 7666, Kind: "User"}, "/reuse-sweep-run cancel")
	mustContain(t, "the re-bound login", w.LastReply(), "@trusted")
	if r := w.LastReply(); strings.Contains(r, "I did not run") {
		t.Fatalf("the re-bound login's holder was refused: %s", r)
	}
}

// allow_teams: GitHub answers team membership by login, so a team member's
// login held now by another account lets that account in nowhere, even
// when the permission answer names no account to compare with.
func TestAllowTeamsMatchesAccountIDs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allow_teams: [\"SemiAnalysisAI/reviewers\"]\n")
	w.GH.AddUser("teammate", 7002, "User")
	w.GH.SetRole(theRepo, "teammate", "read")
	w.GH.AddTeamMember("SemiAnalysisAI/reviewers", "teammate")
	w.GH.Inject("GET /repos/{owner}/{repo}/collaborators/{user}/permission",
		githubtest.Fault{Status: 200, Body: `{"permission":"read","role_name":"read"}`})
	c := w.Comment(user{Login: "teammate", ID: 7667, Kind: "User"}, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("account 7667 holding a team member's login: reactions %v, reply %s", r, w.LastReply())
	}
	w.Comment(user{Login: "teammate", ID: 7002, Kind: "User"}, "/reuse-sweep-run 31147925932")
	mustContain(t, "the member's own account", w.LastReply(), "@teammate pinned run [31147925932]")
}
