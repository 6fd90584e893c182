package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// The end-to-end tests of recovery against copies of the database, replays
// and ids recovery itself uses (docs/security.md).

// createdPayload is the `created` delivery of a comment on the PR.
func (w *world) createdPayload(author user, id int64, body string) []byte {
	w.T.Helper()
	b, err := json.Marshal(w.CommentPayload("created", author, author, id, body, ""))
	if err != nil {
		w.T.Fatal(err)
	}
	return b
}

// apiBackup saves GET /api/v1/backup to a file and returns its path.
func (w *world) apiBackup() string {
	w.T.Helper()
	req, err := http.NewRequest(http.MethodGet, w.Srv.URL+"/api/v1/backup", nil)
	if err != nil {
		w.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatalf("backup: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.T.Fatalf("backup: %s", resp.Status)
	}
	path := filepath.Join(w.T.TempDir(), "restored.db")
	f, err := os.Create(path)
	if err != nil {
		w.T.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		w.T.Fatalf("backup: %v", err)
	}
	if err := f.Close(); err != nil {
		w.T.Fatal(err)
	}
	return path
}

// restartOn stops the server and starts it again on the database at path.
func (w *world) restartOn(path string) {
	w.T.Helper()
	w.Srv.Stop(w.T)
	w.Srv = startServer(w.T, filepath.Join(w.Dir, "opsbot.yaml"), w.Env, "--state", path)
}

// pinAndUse pins run R1 with a comment and pushes c2, which uses the pin.
func (w *world) pinAndUse() int64 {
	w.T.Helper()
	c := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || !strings.HasPrefix(got[0].Description, "skip:") {
		w.T.Fatalf("push c2 did not use the pin: %+v", got)
	}
	return c.ID
}

// wantSweep checks that a push of name sweeps (no pin is left to use).
func (w *world) wantSweep(name string) {
	w.T.Helper()
	w.Push(name)
	if got := w.Statuses(name); len(got) != 1 || !strings.HasPrefix(got[0].Description, "sweep") {
		w.T.Fatalf("push %s = %+v, want a sweep: a command already run and used was run again", name, got)
	}
}

// A database restored from GET /api/v1/backup starts with a first
// reconcile (the copy forgets when it was reconciled): a command the lost
// database ran and used after the backup is recorded, not run again.
func TestDatabaseRestoredFromAPIBackupDoesNotRunUsedCommandsAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	copyPath := w.apiBackup()
	id := w.pinAndUse()
	w.restartOn(copyPath)
	rep := w.reconcile()
	if rep["first"] != true || !slices.Equal(ids(rep, "commands_recorded"), []int64{id}) {
		t.Fatalf("reconcile of the restored database = %v, want a first reconcile recording comment %d", rep, id)
	}
	w.wantSweep("c3")
}

// Whatever made the copy (a file copy, a volume snapshot) and whatever its
// reconcile stamps say, recovery does not run a command GitHub shows opsbot
// answered: its reaction is on the comment.
func TestDatabaseRestoredFromAFileCopyDoesNotRunAnsweredCommands(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	w.Srv.Stop(t)
	snapshot := filepath.Join(t.TempDir(), "snapshot.db")
	raw, err := os.ReadFile(w.Srv.DB)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snapshot, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	w.Srv = startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env)
	id := w.pinAndUse()
	w.restartOn(snapshot)
	rep := w.reconcile()
	if rep["first"] == true || !slices.Equal(ids(rep, "commands_not_run"), []int64{id}) || len(ids(rep, "commands_recovered")) != 0 {
		t.Fatalf("reconcile of the snapshot = %v, want comment %d not run", rep, id)
	}
	if tr := w.recoveryTrail(); !slices.Contains(tr, fmt.Sprintf("not_run %d", id)) {
		t.Fatalf("recovery audit = %v", tr)
	}
	w.wantSweep("c3")
}

// --replay-since makes even a first reconcile run what it finds, but never
// a command opsbot answered; and it reaches back at most 72 hours.
func TestReplayDoesNotRunAnsweredCommandsAndIsBounded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	copyPath := w.apiBackup()
	id := w.pinAndUse()
	w.restartOn(copyPath)
	if _, errOut, err := runCLI(t, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo, "--replay-since", "73h"); err == nil ||
		!strings.Contains(err.Error()+errOut, "more than 72h ago") {
		t.Fatalf("--replay-since 73h: err %v, stderr %q; want a refusal naming the 72h bound", err, errOut)
	}
	rep := w.reconcile("--replay-since", "2h")
	if !slices.Equal(ids(rep, "commands_not_run"), []int64{id}) || len(ids(rep, "commands_recovered")) != 0 {
		t.Fatalf("replay = %v, want comment %d not run", rep, id)
	}
	w.wantSweep("c3")
}

// A comment recovery recorded and did not run is never run by a `created`
// delivery that comes later (replayed, redelivered from GitHub's settings,
// or late): recovery's mark is final.
func TestCommentRecoveryDidNotRunIsNotRunByALaterCreatedDelivery(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	copyPath := w.apiBackup()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	captured := w.createdPayload(maintainer, c.ID, c.Body)
	if code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "issue_comment", "f0f2c5a0-3a4e-11f0-8a4b-1b5d0f6a7c01", captured, testSecret)); code != 202 {
		t.Fatalf("created: %d %v", code, rep)
	}
	w.Settle()
	w.Push("c2") // uses the pin
	w.restartOn(copyPath)
	rep := w.reconcile()
	if !slices.Equal(ids(rep, "commands_recorded"), []int64{c.ID}) {
		t.Fatalf("first reconcile of the restored database = %v", rep)
	}
	code, r := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "issue_comment", "f0f2c5a0-3a4e-11f0-8a4b-1b5d0f6a7c01", captured, testSecret))
	if code/100 != 2 {
		t.Fatalf("replayed created: %d %v", code, r)
	}
	w.Settle()
	if n := countPinActive(w.trail()); n != 0 {
		t.Fatalf("trail = %v: the replayed comment pinned again", w.trail())
	}
	w.wantSweep("c3")
}

func countPinActive(tr []string) int {
	n := 0
	for _, s := range tr {
		if s == "pin active" {
			n++
		}
	}
	return n
}

// Each close of a PR that opsbot missed is recovered: one closed, reopened
// and closed again while opsbot was not listening has its second pin expired.
func TestSecondLostCloseOfAPRIsRecovered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.ClosePR(theRepo, thePR, false, "") // webhook lost
	w.reconcile()
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("first lost close: %v", tr)
	}
	w.GH.ReopenPR(theRepo, thePR)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	later := time.Now().Add(time.Minute)
	w.GH.SetNow(func() time.Time { return later })
	w.GH.ClosePR(theRepo, thePR, false, "") // webhook lost again
	rep := w.reconcile()
	if got := rep["pins_of_closed_prs"].([]any); len(got) != 1 {
		t.Fatalf("second reconcile = %v, want the PR's pin expired", rep)
	}
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("second lost close: pin still active: %v", tr)
	}
}

// Webhook deliveries may not use the ids recovery makes its own deliveries
// under: a signed body sent under one is refused, so a lost close is still
// recovered and the pin from before it is not used after a reopen.
func TestWebhookDeliveryUnderARecoveryIDIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	p := payload(t, "pull_request", "labeled")
	setPath(p, "repository.full_name", theRepo)
	p["number"] = thePR
	setPath(p, "pull_request.number", thePR)
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"reconcile-closed-" + strings.ToLower(theRepo) + "-" + strconv.Itoa(thePR), "Reconcile-comment-1"} {
		code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", id, body, testSecret))
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(rep["error"]), "opsbot's own") {
			t.Fatalf("delivery id %q: %d %v, want 400", id, code, rep)
		}
	}
	w.GH.ClosePR(theRepo, thePR, false, "") // closed webhook lost
	w.reconcile()
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("the lost close was not recovered: %v", tr)
	}
	w.GH.ReopenPR(theRepo, thePR)
	w.wantSweep("c2")
}

// A command posted while the PR was closed (its webhook would have answered
// "this PR is closed") is not run by recovery after the PR was reopened.
func TestRecoveryDoesNotRunCommandsPostedWhileThePRWasClosed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	t0 := time.Now()
	at := func(d time.Duration) { w.GH.SetNow(func() time.Time { return t0.Add(d) }) }
	at(-10 * time.Minute)
	w.GH.ClosePR(theRepo, thePR, false, "")
	at(-5 * time.Minute)
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932") // created webhook lost
	at(-2 * time.Minute)
	w.GH.ReopenPR(theRepo, thePR)
	rep := w.reconcile()
	if !slices.Equal(ids(rep, "commands_not_run"), []int64{c.ID}) || len(ids(rep, "commands_recovered")) != 0 {
		t.Fatalf("reconcile = %v, want comment %d not run", rep, c.ID)
	}
	if n := countPinActive(w.trail()); n != 0 {
		t.Fatalf("recovery pinned from a command posted on a closed PR: %v", w.trail())
	}
	// A command posted after the reopen is recovered.
	at(-time.Minute)
	c2 := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	if rep := w.reconcile(); !slices.Equal(ids(rep, "commands_recovered"), []int64{c2.ID}) {
		t.Fatalf("reconcile after the reopen = %v, want comment %d recovered", rep, c2.ID)
	}
}

// A captured `closed` delivery replayed once retention forgot its delivery
// id and digest is stamped (pull_request.updated_at) before the reopen
// opsbot recorded: it changes nothing, and the pin taken after the reopen
// stays.
func TestClosedDeliveryReplayedAfterRetentionChangesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	t0 := time.Now().Add(-time.Hour)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	closed := w.closedPayload()
	setPath(closed, "pull_request.updated_at", t0.UTC().Format(time.RFC3339))
	captured, err := json.Marshal(closed)
	if err != nil {
		t.Fatal(err)
	}
	const id = "6a1f7c30-3b5d-11f0-9c0e-5f2d8f3a9b11"
	if code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", id, captured, testSecret)); code != 202 {
		t.Fatalf("closed: %d %v", code, rep)
	}
	w.Settle()
	w.sendPRAt("reopened", sha("c1"), t0.Add(time.Minute))
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")

	// Retention forgets every processed delivery (as retention.processed does after its time).
	w.Srv.Stop(t)
	st, err := state.Open(w.Srv.DB, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.PruneDeliveries(time.Now().Add(time.Hour), 1000); err != nil || n == 0 {
		t.Fatalf("pruning: %d, %v", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	w.Srv = startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env)

	if code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", id, captured, testSecret)); code != 202 {
		t.Fatalf("replayed closed: %d %v, want it stored (retention forgot it)", code, rep)
	}
	w.Settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin active" {
		t.Fatalf("the replayed close expired the pin: %v", tr)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || !strings.HasPrefix(got[0].Description, "skip:") {
		t.Fatalf("push c2 = %+v, want the pin used", got)
	}
}

// One comment GitHub will not tell about (its reactions cannot be read)
// stops no other comment's recovery: it is not run (fail closed) and the
// audit says why, and the next lost command is recovered in the same pass.
func TestOneUnreadableCommentDoesNotStopRecovery(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.reconcile()
	c1 := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932") // created webhooks lost
	c2 := w.GH.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	w.GH.Inject("GET /repos/{owner}/{repo}/issues/comments/{id}/reactions", githubtest.Fault{Status: 404, Times: 1})
	rep := w.reconcile()
	if !slices.Equal(ids(rep, "commands_not_run"), []int64{c1.ID}) || !slices.Equal(ids(rep, "commands_recovered"), []int64{c2.ID}) {
		t.Fatalf("reconcile = %v, want comment %d not run and %d recovered", rep, c1.ID, c2.ID)
	}
	if n := countPinActive(w.trail()); n != 0 {
		t.Fatalf("a comment whose answer could not be checked was run: %v", w.trail())
	}
}

// Recovery runs a command only against the PR as it was when the command
// was posted: a maintainer who saw no 👍 believes nothing was pinned, so a
// pin recovered after the author pushed again (or after the PR was closed
// and reopened) would skip whatever the author pushes next.
func TestRecoveryBindsNoCommandToALaterHead(t *testing.T) {
	t.Parallel()
	lost := func(w *world) githubtest.Comment {
		c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932") // its webhook is lost
		w.GH.SetCommentTime(c.ID, time.Now().Add(-10*time.Minute))
		return c
	}
	notRun := func(t *testing.T, w *world, c githubtest.Comment, why string) {
		t.Helper()
		rep := w.reconcile()
		if !slices.Equal(ids(rep, "commands_not_run"), []int64{c.ID}) {
			t.Fatalf("reconcile = %v, want comment %d not run", rep, c.ID)
		}
		found := false
		for _, r := range w.audit() {
			found = found || (r["kind"] == "recovery" && strings.Contains(r["reason"].(string), why))
		}
		if !found || countPinActive(w.trail()) != 0 {
			t.Fatalf("audit: %v", w.trail())
		}
		w.Push("c9")
		if out, _ := w.gate("--pr", "2512", "--sha", sha("c9")); out["skip-pr-sweep"] != "false" {
			t.Fatalf("the author's next push after recovery: %v, want the sweep", out)
		}
	}
	t.Run("a push opsbot saw after the comment", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c := lost(w)
		w.GH.Push(theRepo, thePR, []string{sha("c2")})
		p := w.SyncPayload(sha("c2"))
		setPath(p, "pull_request.updated_at", time.Now().UTC().Format(time.RFC3339))
		w.Send("pull_request", p)
		notRun(t, w, c, "after the comment was posted")
	})
	t.Run("a push whose webhook was lost too", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c := lost(w)
		w.GH.Push(theRepo, thePR, []string{sha("c2")})
		w.GH.AddRun(theRepo, githubtest.Run{ID: 31147926100, WorkflowID: 78, Event: "pull_request", Status: "completed",
			Conclusion: "success", HeadSHA: sha("c2"), HeadBranch: "kimi-tune"}) // the gate workflow's run of the push
		notRun(t, w, c, "was made at")
	})
	t.Run("a push that left no trace", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c := lost(w)
		w.GH.Push(theRepo, thePR, []string{sha("c2")})
		notRun(t, w, c, "nothing shows that")
	})
	t.Run("closed and reopened after the comment", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c := lost(w)
		w.GH.ClosePR(theRepo, thePR, false, "")
		w.GH.ReopenPR(theRepo, thePR)
		notRun(t, w, c, "was closed at")
	})
	t.Run("nothing changed since the comment", func(t *testing.T) {
		w := newWorld(t, "")
		w.reconcile()
		c := lost(w)
		rep := w.reconcile()
		if !slices.Equal(ids(rep, "commands_recovered"), []int64{c.ID}) {
			t.Fatalf("reconcile = %v, want comment %d recovered", rep, c.ID)
		}
		mustContain(t, "recovered pin", w.LastReply(), "pinned run [31147925932]")
	})
}

// A pin whose comment was deleted, or whose command was edited away, while
// the webhook was lost is revoked by recovery: the next push sweeps.
func TestRecoveryTakesBackALostDeletionOrEdit(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"deleted", "edited"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, "")
			w.reconcile()
			c := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
			if how == "deleted" {
				w.GH.DeleteComment(c.ID) // its webhook is lost
			} else {
				w.GH.EditComment(c.ID, "never mind")
			}
			rep := w.reconcile()
			if got := ids(rep, "pins_taken_back"); len(got) != 1 {
				t.Fatalf("reconcile = %v, want the pin of PR %d taken back", rep, thePR)
			}
			mustContain(t, "reply", w.LastReply(), "found by recovery")
			if tr := w.trail(); tr[len(tr)-1] != "pin revoked" {
				t.Fatalf("audit = %v", tr)
			}
			w.Push("c2")
			if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "false" {
				t.Fatalf("the push after the recovered %s: %v, want the sweep", how, out)
			}
			if rep := w.reconcile(); len(ids(rep, "pins_taken_back")) != 0 {
				t.Fatalf("a second reconcile took back again: %v", rep)
			}
		})
	}
}

// Wake-ups are opsbot's own deliveries: a signed body sent as one, under a
// wake-up id or the wake-up event, is refused and steps no sequence.
func TestWebhookDeliveryAsAWakeupIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	id, body := seq.Delivery(state.SeqRef{Repo: theRepo, PR: thePR, Kind: "merge", Version: 1}, 0)
	for _, tc := range []struct{ event, id string }{{seq.Event, "a-github-id"}, {"pull_request", id}, {seq.Event, id}} {
		code, rep := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", tc.event, tc.id, body, testSecret))
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(rep["error"]), "opsbot's own") {
			t.Fatalf("%s %q: %d %v, want 400", tc.event, tc.id, code, rep)
		}
	}
}
