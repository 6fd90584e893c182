package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state"
)

func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), args, func(k string) string { return env[k] }, strings.NewReader(""), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

var tokenEnv = map[string]string{"OPSBOT_API_TOKEN": apiToken}

func TestBackupHotAndOffline(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	hot := filepath.Join(t.TempDir(), "hot.db")
	out, errOut, err := runCLI(t, tokenEnv, "backup", "--server", w.Srv.URL, "--out", hot)
	if err != nil {
		t.Fatalf("hot backup: %v %s", err, errOut)
	}
	mustContain(t, "backup", out, "passes bbolt's check")
	if _, _, err := runCLI(t, tokenEnv, "backup", "--server", w.Srv.URL, "--out", hot); err == nil {
		t.Fatal("backup overwrote an existing file")
	}
	copyStore, err := state.Open(hot, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := copyStore.ActivePin(theRepo, thePR)
	copyStore.Close()
	if err != nil || p == nil || p.RunID != runR1 {
		t.Fatalf("the copy's active pin = %+v, %v", p, err)
	}
	// Offline: refused while the server holds the file, then works.
	if _, _, err := runCLI(t, nil, "backup", "--db", w.Srv.DB, "--out", filepath.Join(t.TempDir(), "x.db")); err == nil ||
		!strings.Contains(err.Error(), "held by a running opsbot") {
		t.Fatalf("offline backup of a held file: %v", err)
	}
	w.Srv.Stop(t)
	if _, errOut, err := runCLI(t, nil, "backup", "--db", w.Srv.DB, "--out", filepath.Join(t.TempDir(), "cold.db")); err != nil {
		t.Fatalf("offline backup: %v %s", err, errOut)
	}
}

func TestAuditCommandFormats(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	table, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--repo", theRepo, "--pr", "2512")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "table", table, "TIME", "KIND", "decision", "skip", "c2c2c2c", "31147925932", "maintainer")
	csvOut, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", sha("c2"), "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csvOut), "\n")
	if lines[0] != "seq,time,kind,outcome,command,repo,pr,head_sha,run_id,pin_id,actor_login,actor_id,role,comment_url,delivery_id,reason,jobs,jobs_succeeded,runner_seconds,gpu_seconds" ||
		len(lines) != 3 {
		t.Fatalf("csv by sha:\n%s", csvOut)
	}
	byRun, _, _ := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--run", "31147925932", "--kind", "decision", "--format", "json")
	var recs []map[string]any
	json.Unmarshal([]byte(byRun), &recs)
	if len(recs) != 1 || recs[0]["outcome"] != "skip" {
		t.Fatalf("audit by run and kind: %s", byRun)
	}
	if _, errOut, err := runCLI(t, nil, "audit", "--db", "x", "--server", "y"); err == nil || !strings.Contains(errOut, "exactly one") {
		t.Fatalf("both sources: %v %s", err, errOut)
	}
	resp, _ := http.Get(w.Srv.URL + "/api/v1/audit")
	if resp.StatusCode != 401 {
		t.Fatalf("audit API without a token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, w.Srv.URL+"/api/v1/audit?pr=abc&repo="+theRepo, nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, _ = http.DefaultClient.Do(req)
	if resp.StatusCode != 400 {
		t.Fatalf("bad filter: %d", resp.StatusCode)
	}
	w.Srv.Stop(t)
	offline, _, err := runCLI(t, nil, "audit", "--db", w.Srv.DB, "--repo", theRepo, "--pr", "2512", "--format", "json")
	if err != nil || !strings.Contains(offline, `"outcome": "skip"`) {
		t.Fatalf("offline audit: %v\n%s", err, offline)
	}
	dl, _, err := runCLI(t, nil, "audit", "--db", w.Srv.DB, "--dead-letters")
	if err != nil || !strings.Contains(dl, "DELIVERY") {
		t.Fatalf("dead letters: %v %s", err, dl)
	}
}

func TestReconcileRecoversLostWebhooks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	// The first reconcile of the repository sets where recovery starts.
	if _, errOut, err := runCLI(t, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo); err != nil {
		t.Fatalf("first reconcile: %v %s", err, errOut)
	}
	// A command comment whose webhook never came.
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	w.GH.SetCommentTime(c.ID, time.Now().Add(-10*time.Minute))
	w.GH.AddComment(theRepo, thePR, maintLog, "just a remark")
	out, errOut, err := runCLI(t, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo, "--json")
	if err != nil {
		t.Fatalf("reconcile: %v %s", err, errOut)
	}
	var rep map[string]any
	json.Unmarshal([]byte(out), &rep)
	if ids := rep["commands_recovered"].([]any); len(ids) != 1 || int64(ids[0].(float64)) != c.ID {
		t.Fatalf("report = %s", out)
	}
	w.Settle()
	mustContain(t, "recovered pin", w.LastReply(), "pinned run [31147925932]")
	// Again: nothing new, nothing twice.
	out, _, _ = runCLI(t, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo)
	mustContain(t, "second reconcile", out, "0 lost command comments queued")
	w.Settle()
	if n := strings.Count(strings.Join(w.trail(), ","), "pin active"); n != 1 {
		t.Fatalf("the recovered comment pinned %d times", n)
	}
	// The PR is closed while the webhook is lost: the pin expires.
	w.GH.ClosePR(theRepo, thePR, false, "")
	out, _, _ = runCLI(t, tokenEnv, "reconcile", "--server", w.Srv.URL, "--repo", theRepo)
	mustContain(t, "closed PR", out, "1 pins of closed PRs handled [2512]")
	w.Settle()
	if tr := w.trail(); tr[len(tr)-1] != "pin expired" {
		t.Fatalf("audit = %v", tr)
	}
}

func TestSendSignsAFixture(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	out, errOut, err := runCLI(t, map[string]string{"OPSBOT_WEBHOOK_SECRET": testSecret}, "send", "--url", w.Srv.URL+"/webhook",
		"--event", "ping", "--file", filepath.Join("..", "..", "testdata", "fixtures", "github-webhooks", "ping", "payload.json"))
	if err != nil {
		t.Fatalf("send: %v %s %s", err, out, errOut)
	}
	mustContain(t, "send", out, "202 Accepted", `"status":"ignored"`)
	_, _, err = runCLI(t, map[string]string{"OPSBOT_WEBHOOK_SECRET": "wrong"}, "send", "--url", w.Srv.URL+"/webhook",
		"--event", "ping", "--file", filepath.Join("..", "..", "testdata", "fixtures", "github-webhooks", "ping", "payload.json"))
	if code, ok := err.(exitCode); !ok || code != 1 {
		t.Fatalf("send with a wrong secret: %v", err)
	}
}

func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	t.Parallel()
	for name := range subcommands() {
		if name == "version" || name == "config" {
			continue
		}
		out, errOut, err := runCLI(t, nil, name, "--help")
		if err != nil || !strings.Contains(out, "Usage: opsbot "+name) || !strings.Contains(out, "Examples:") || errOut != "" {
			t.Errorf("%s --help: %v\nstdout:\n%s\nstderr:\n%s", name, err, out, errOut)
		}
		if viaHelp, _, err := runCLI(t, nil, "help", name); err != nil || viaHelp != out {
			t.Errorf("opsbot help %s: %v, and it differs from %s --help:\n%s", name, err, name, viaHelp)
		}
	}
	_, errOut, err := runCLI(t, nil, "audit", "--bogus")
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errOut, "flag provided but not defined: -bogus") {
		t.Errorf("bad flag: %v %s", err, errOut)
	}
	// The gate is a workflow step: a bad flag fails it as a refusal does
	// (exit 1, ::error::, the outputs saying sweep).
	out, errOut, err := runCLI(t, nil, "gate", "--bogus")
	if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(errOut, "flag provided but not defined: -bogus") ||
		!strings.Contains(out, "::error::") || !strings.Contains(out, "skip-pr-sweep=false") {
		t.Errorf("gate, bad flag: %v %s %s", err, out, errOut)
	}
	_ = io.Discard
}

// The help people read is a golden file: go test ./cmd/opsbot -update rewrites it.
func TestHelpTextsGolden(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	out, _, err := runCLI(t, nil, "help")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("$ opsbot help\n" + out)
	names := make([]string, 0)
	for name := range subcommands() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out, _, _ := runCLI(t, nil, name, "--help")
		b.WriteString("\n$ opsbot " + name + " --help\n" + out)
	}
	for _, sub := range [][]string{{"github", "app-create"}} {
		out, _, _ := runCLI(t, nil, append(sub, "--help")...)
		b.WriteString("\n$ opsbot " + strings.Join(sub, " ") + " --help\n" + out)
	}
	golden.Assert(t, "help.txt", b.String())
}

// A notice GitHub refuses for good is kept and listed, never dropped silently.
func TestRefusedNoticeIsListed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.Inject("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", githubtest.Fault{Status: 422})
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	announceComment(t, w, c.ID)
	testkit.Eventually(t, "the reaction is given up after its attempts", func() bool {
		out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--failed-notices", "--format", "json")
		return err == nil && strings.Contains(out, `"kind": "reaction"`) && strings.Contains(out, "422")
	})
	testkit.Eventually(t, "the reply goes out beside the refused reaction", func() bool { return len(w.Replies()) == 1 })
}
