package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// The end-to-end tests of docs/security.md's threat model that concern
// recovery, replays and opsbot's own identity.

// closedPayload is the `closed` (unmerged) delivery of the PR.
func (w *world) closedPayload() map[string]any { return w.ClosedPayload(false, "") }

// A captured `closed` delivery resent under a new delivery id (GitHub's
// signature does not cover the id) is a duplicate: it does not expire the
// pin taken after the PR was reopened.
func TestReplayedClosedDeliveryUnderANewIDDoesNotActAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.ClosePR(theRepo, thePR, false, "")
	captured, err := json.Marshal(w.closedPayload())
	if err != nil {
		t.Fatal(err)
	}
	if code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", "closed-1", captured, testSecret)); code != http.StatusAccepted {
		t.Fatalf("closed: %d %v", code, rep)
	}
	w.Settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("closing did not expire the pin: %v", tr)
	}
	w.GH.ReopenPR(theRepo, thePR)
	reopened := payload(t, "pull_request", "reopened")
	setPath(reopened, "repository.full_name", theRepo)
	reopened["number"] = thePR
	setPath(reopened, "pull_request.number", thePR)
	setPath(reopened, "pull_request.state", "open")
	w.Send("pull_request", reopened)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("the new pin is not active: %v", tr)
	}

	code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", "closed-replayed", captured, testSecret))
	if code != http.StatusOK || rep["status"] != "duplicate" {
		t.Fatalf("the replayed closed delivery: %d %v, want 200 duplicate", code, rep)
	}
	w.Settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("the replay acted: %v", tr)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || got[0].Description != "skip: reusing run 31147925932, authorized by @maintainer" {
		t.Fatalf("the push after the replay: %+v", got)
	}
}

// opsbot learns its own account from GitHub at start (no github.bot_login in
// the configuration): a command in a comment written by that account (a
// machine user's token) is never run.
func TestNeverRunsACommandItWrote(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	machine := user{Login: "ci-machine", ID: 7777, Kind: "User"}
	w.GH.AddUser(machine.Login, machine.ID, "User")
	w.GH.SetRole(theRepo, machine.Login, "write")
	w.GH.SetAuthenticatedUser(machine.Login)
	w.restart(func(cfg string) string { return cfg })
	w.Comment(machine, "/reuse-sweep-run 31147925932")
	if tr := w.trail(); len(tr) != 0 {
		t.Fatalf("opsbot ran a command it wrote: %v", tr)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || got[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("the push after opsbot's own comment: %+v", got)
	}
	if n := w.GH.Count("GET /user"); n < 1 {
		t.Fatalf("GET /user asked %d times", n)
	}
}

// github.bot_login and bot_user_id stay accepted; config check says they are learned now.
func TestConfigCheckSaysTheBotAccountIsLearned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "opsbot.yaml")
	cfg := "state_path: " + filepath.Join(dir, "o.db") + "\ngithub:\n  token_env: T\n  bot_login: \"opsbot[bot]\"\n  bot_user_id: 12\n" +
		"repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, map[string]string{"OPSBOT_WEBHOOK_SECRET": testSecret}, "config", "check", "--config", path)
	if err != nil {
		t.Fatalf("config check: %v %s", err, errOut)
	}
	mustContain(t, "config check", out, "ok", "bot_login and bot_user_id are no longer needed")
}

// An outsider who plants opsbot's hidden markers for the next notice numbers
// neither silences opsbot (a reply whose first post failed looks for an
// earlier post by its marker before posting again) nor becomes the comment
// that the staging reply's edit targets.
func TestPlantedMarkersNeitherSilenceNorRedirectOpsbot(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	outsider := user{Login: "outsider", ID: 6666, Kind: "User"}
	w.GH.AddUser(outsider.Login, outsider.ID, "User")
	var planted strings.Builder
	planted.WriteString("Nice PR!\n")
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&planted, "<!-- opsbot:notice=%d -->\n", i)
	}
	plant := w.Comment(outsider, planted.String())
	w.GH.Inject("POST /repos/{owner}/{repo}/issues/{n}/comments", githubtest.Fault{Status: 502, Times: 1})
	c := w.Comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "acknowledgement", w.ack(), "@maintainer staging run [31147925932]")
	w.callback("stage-results-completed", c.ID, runR1, true)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
	if got := w.CommentBody(plant.ID); got != planted.String() {
		t.Fatalf("opsbot edited the outsider's comment into:\n%s", got)
	}
	if n := len(w.Replies()); n != 1 {
		t.Fatalf("%d replies, want the one acknowledgement edited in place", n)
	}
}

// reconcile runs `opsbot reconcile --json` with extra flags and returns its report.
func (w *world) reconcile(args ...string) map[string]any {
	w.T.Helper()
	out, errOut, err := runCLI(w.T, tokenEnv, append([]string{"reconcile", "--server", w.Srv.URL, "--repo", theRepo, "--json"}, args...)...)
	if err != nil {
		w.T.Fatalf("reconcile: %v %s", err, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.T.Fatalf("reconcile report: %v\n%s", err, out)
	}
	w.Settle()
	return rep
}

// ids reads a list of comment ids from a reconcile report.
func ids(rep map[string]any, key string) []int64 {
	var out []int64
	for _, v := range rep[key].([]any) {
		out = append(out, int64(v.(float64)))
	}
	return out
}

// recoveryTrail is the audit's recovery records as "outcome comment-id".
func (w *world) recoveryTrail() []string {
	var out []string
	for _, r := range w.audit() {
		if r["kind"] == "recovery" {
			out = append(out, fmt.Sprintf("%v %d", r["outcome"], int64(r["comment_id"].(float64))))
		}
	}
	return out
}

// Recovery runs a comment only if its `created` webhook would have run it. A
// comment that held no command when posted (seen by its webhook) and one
// whose webhook was lost, both later edited to add a command, are not run by
// recovery: the `edited` webhook refuses them, and so does reconcile.
func TestRecoveryDoesNotRunEditedComments(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	if rep := w.reconcile(); rep["first"] != true {
		t.Fatalf("first reconcile report: %v", rep)
	}
	seen := w.Comment(maintainer, "Looks good to me.")
	lost := w.GH.AddComment(theRepo, thePR, maintLog, "Looking at the numbers now.")
	w.GH.SetCommentTime(lost.ID, time.Now().Add(-20*time.Minute))
	for _, c := range []githubtest.Comment{seen, lost} {
		w.GH.EditComment(c.ID, c.Body+"\n/reuse-sweep-run 31147925932")
	}
	rep := w.reconcile()
	if got := ids(rep, "commands_recovered"); len(got) != 0 {
		t.Fatalf("recovery ran edited comments %v: %v", got, rep)
	}
	if got := ids(rep, "commands_not_run"); len(got) != 1 || got[0] != lost.ID {
		t.Fatalf("commands_not_run = %v, want the lost, edited comment %d", got, lost.ID)
	}
	if tr := w.trail(); strings.Contains(strings.Join(tr, ","), "pin active") {
		t.Fatalf("an edited comment pinned a run: %v", tr)
	}
	if got, want := w.recoveryTrail(), []string{fmt.Sprintf("not_run %d", lost.ID)}; !slices.Equal(got, want) {
		t.Fatalf("recovery audit = %v, want %v", got, want)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || got[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("the push after recovery: %+v", got)
	}
	// Again: the same comments are known now and stay unrun.
	if rep := w.reconcile(); len(ids(rep, "commands_recovered"))+len(ids(rep, "commands_not_run")) != 0 {
		t.Fatalf("second reconcile: %v", rep)
	}
}

// A fresh database never replays old commands: the first reconcile of a
// repository records the command comments it finds as seen (the audit says
// so) and runs none, now or later; --replay-since asks for a replay
// explicitly, and then runs only what was posted since then.
func TestFirstReconcileRecordsAndDoesNotReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	old := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	w.GH.SetCommentTime(old.ID, time.Now().Add(-48*time.Hour))
	recent := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	w.GH.SetCommentTime(recent.ID, time.Now().Add(-10*time.Minute))
	rep := w.reconcile()
	if rep["first"] != true || len(ids(rep, "commands_recovered")) != 0 ||
		!slices.Equal(ids(rep, "commands_recorded"), []int64{old.ID, recent.ID}) {
		t.Fatalf("first reconcile report: %v", rep)
	}
	if got, want := w.recoveryTrail(), []string{fmt.Sprintf("recorded %d", old.ID), fmt.Sprintf("recorded %d", recent.ID)}; !slices.Equal(got, want) {
		t.Fatalf("recovery audit = %v, want %v", got, want)
	}
	if rep := w.reconcile(); rep["first"] != false || len(ids(rep, "commands_recovered")) != 0 {
		t.Fatalf("second reconcile: %v", rep)
	}
	out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--repo", theRepo, "--kind", "recovery", "--format", "json")
	if err != nil || strings.Count(out, `"outcome": "recorded"`) != 3 || !strings.Contains(out, "the first reconcile of this repository on this database recorded the 2 comments") {
		t.Fatalf("the repository's recovery audit: %v\n%s", err, out)
	}
	if tr := w.trail(); strings.Contains(strings.Join(tr, ","), "pin active") || len(w.Replies()) != 0 {
		t.Fatalf("old commands were replayed: %v %v", tr, w.Replies())
	}

	// Another fresh database, asked to replay the last half hour.
	w2 := newWorld(t, "")
	old2 := w2.GH.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	w2.GH.SetCommentTime(old2.ID, time.Now().Add(-48*time.Hour))
	recent2 := w2.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	w2.GH.SetCommentTime(recent2.ID, time.Now().Add(-10*time.Minute))
	rep = w2.reconcile("--replay-since", "30m")
	if !slices.Equal(ids(rep, "commands_recovered"), []int64{recent2.ID}) || len(ids(rep, "commands_recorded")) != 0 {
		t.Fatalf("replay report: %v", rep)
	}
	mustContain(t, "replayed pin", w2.LastReply(), "pinned run [31147925932]")
	if n := len(w2.Replies()); n != 1 {
		t.Fatalf("%d replies: the old /opsbot help was replayed too", n)
	}
	if _, errOut, err := runCLI(t, tokenEnv, "reconcile", "--server", w2.Srv.URL, "--repo", theRepo, "--replay-since",
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); err == nil || !strings.Contains(err.Error()+errOut, "in the future") {
		t.Fatalf("a replay from the future: %v %s", err, errOut)
	}
}

// A database restored from a backup does not replay what the lost one may
// have run: the copy forgets when it was reconciled, so its first reconcile
// records instead of replaying.
func TestRestoredDatabaseDoesNotReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	copyPath := filepath.Join(t.TempDir(), "restored.db")
	if _, errOut, err := runCLI(t, tokenEnv, "backup", "--server", w.Srv.URL, "--out", copyPath); err != nil {
		t.Fatalf("backup: %v %s", err, errOut)
	}
	// After the backup the lost database ran a command; its webhook is not
	// redelivered to the restored one.
	ran := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Srv.Stop(t)
	w.Srv = startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, "--state", copyPath)
	rep := w.reconcile()
	if rep["first"] != true || len(ids(rep, "commands_recovered")) != 0 || !slices.Equal(ids(rep, "commands_recorded"), []int64{ran.ID}) {
		t.Fatalf("reconcile of the restored database: %v", rep)
	}
}

// As a GitHub App, opsbot learns its bot user at start (GET /app for the
// slug, then GET /users/<slug>[bot]) and never runs a command that user
// wrote, even where the repository lets bots give commands.
func TestAppLearnsItsBotUserAndNeverRunsItsCommands(t *testing.T) {
	t.Parallel()
	w := newWorld(t, `    allow_bots: ["`+githubtest.BotLogin+`"]`)
	w.GH.SetRole(theRepo, githubtest.BotLogin, "write")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(w.Dir, "app.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	w.GH.ResetRequests()
	w.restart(func(cfg string) string {
		return strings.Replace(cfg, `  token_env: "TEST_GITHUB_TOKEN"`, fmt.Sprintf("  app:\n    id: %d\n    installation_id: 1\n    private_key_file: %q",
			githubtest.AppID, keyFile), 1)
	})
	if w.GH.Count("GET /app") != 1 || w.GH.Count("GET /users/{user}") != 1 {
		t.Fatalf("at start: GET /app %d times, GET /users/{user} %d times; want once each", w.GH.Count("GET /app"), w.GH.Count("GET /users/{user}"))
	}
	bot := user{Login: githubtest.BotLogin, ID: githubtest.BotID, Kind: "Bot"}
	w.Comment(bot, "/reuse-sweep-run 31147925932")
	if tr := w.trail(); len(tr) != 0 {
		t.Fatalf("opsbot ran a command its App's bot user wrote: %v", tr)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || got[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("the push after the bot user's comment: %+v", got)
	}
}
