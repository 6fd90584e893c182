package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// GitHub's default webhook content type is a form whose payload field holds
// the JSON. opsbot checks the signature over the raw form body, then reads
// the payload: a pin sent that way is answered like one sent as JSON.
func TestFormEncodedWebhookIsAccepted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/2512"})
	setPath(p, "comment.id", c.ID)
	setPath(p, "comment.body", c.Body)
	setPath(p, "comment.user", maintainer.JSON())
	p["sender"] = maintainer.JSON()
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	form := []byte(url.Values{"payload": {string(js)}}.Encode())

	send := func(id string, signed []byte) int {
		req, err := http.NewRequest(http.MethodPost, w.Srv.URL+"/webhook", strings.NewReader(string(form)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", auth.Sign(signed, testSecret))
		code, _ := post(t, req)
		return code
	}
	// A signature over the JSON inside, not the bytes sent, is refused.
	if code := send("form-bad-signature", js); code != http.StatusUnauthorized {
		t.Fatalf("signature over the inner JSON: status %d, want 401", code)
	}
	if code := send("form-1", form); code != http.StatusAccepted {
		t.Fatalf("form-encoded delivery: status %d, want 202", code)
	}
	w.Settle()
	mustContain(t, "pin reply", w.LastReply(), "@maintainer pinned run [31147925932]")
}

// The conventions a Go operator expects of a CLI.
func TestCLIConventions(t *testing.T) {
	t.Parallel()
	wantVersion := "opsbot " + fullVersion() + " (commit " + fullCommit() + ", " + runtime.Version() + ")\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, err := runCLI(t, nil, args...)
		if err != nil || out != wantVersion || errOut != "" {
			t.Errorf("opsbot %v = %q, %q, %v; want %q on stdout", args, out, errOut, err, wantVersion)
		}
	}
	for _, args := range [][]string{{"bogus"}, {"help", "bogus"}} {
		out, errOut, err := runCLI(t, nil, args...)
		if code, ok := err.(exitCode); !ok || code != 2 || out != "" || !strings.Contains(errOut, `unknown command "bogus"`) {
			t.Errorf("opsbot %v: %v, stdout %q, stderr %q; want exit 2 and the usage on stderr", args, err, out, errOut)
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "serve"}, {"serve", "--help"}, {"serve", "-h"},
		{"config", "--help"}, {"config", "check", "--help"}} {
		out, errOut, err := runCLI(t, nil, args...)
		if err != nil || out == "" || errOut != "" {
			t.Errorf("opsbot %v: %v, stdout %q, stderr %q; want the help on stdout and exit 0", args, err, out, errOut)
		}
	}
	out, _, _ := runCLI(t, nil, "serve", "--help")
	if !strings.Contains(out, "\n  --config string\n") || strings.Contains(out, "\n  -config") {
		t.Errorf("serve --help does not spell --config:\n%s", out)
	}
	out, errOut, err := runCLI(t, nil, "serve", "--bogus")
	if code, ok := err.(exitCode); !ok || code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -bogus") ||
		!strings.Contains(errOut, "Usage: opsbot serve") {
		t.Errorf("serve --bogus: %v, stdout %q, stderr %q; want exit 2, the error and the usage on stderr", err, out, errOut)
	}
}

// `config check` names each environment variable the file refers to and
// says which are unset here and what opsbot does without them.
func TestConfigCheckReportsUnsetVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "slack:\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#ops\"\n")
	slackFile := filepath.Join(dir, "slack-token")
	if err := os.WriteFile(slackFile, []byte("xoxb-s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, map[string]string{"TEST_WEBHOOK_SECRET": testSecret, "TEST_SLACK_TOKEN_FILE": slackFile},
		"config", "check", "--config", path)
	if err != nil {
		t.Fatalf("config check: %v %s", err, errOut)
	}
	mustContain(t, "config check", out,
		"$TEST_WEBHOOK_SECRET (github.webhook_secret_env): set",
		"$TEST_GITHUB_TOKEN (github.token_env): UNSET here: GitHub dry-run",
		"$TEST_API_TOKENS (api.tokens_env): UNSET here",
		"$TEST_SLACK_TOKEN (slack.token_env): set, from the file $TEST_SLACK_TOKEN_FILE names",
		"2 named variable(s) unset")
	if strings.Contains(out, "xoxb-s") {
		t.Errorf("config check printed a secret's value:\n%s", out)
	}
}

// A value nobody has seen is absent from /metrics, not 0: GitHub's rate
// limit before its first answer, Slack's health before auth.test. The
// build is always there.
func TestMetricsReportUnknownAsAbsent(t *testing.T) {
	t.Parallel()
	// A server without GitHub credentials (a dry run) asks GitHub nothing.
	dry := startServer(t, writeConfig(t, t.TempDir(), ""), testEnv(nil))
	m := (&e2e.World{T: t, Srv: dry}).Metrics()
	for _, name := range []string{"opsbot_github_rate_limit_remaining", "opsbot_slack_healthy"} {
		if v, ok := m[name]; ok {
			t.Errorf("%s = %s before anything was known, want it absent", name, v)
		}
	}
	for _, zero := range []string{`opsbot_decisions_total{decision="skip"}`, `opsbot_decisions_total{decision="sweep"}`,
		`opsbot_webhook_deliveries_total{event="pull_request",outcome="stored"}`} {
		if m[zero] != "0" {
			t.Errorf("%s = %q at start, want 0", zero, m[zero])
		}
	}
	// The metrics reference (docs/operations.md) lists every series exported.
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for series := range m {
		name, _, _ := strings.Cut(series, "{")
		name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "opsbot_") && !strings.Contains(string(readme), "`"+name) {
			t.Errorf("docs/operations.md's metrics table does not list %s", name)
		}
	}
	build := `opsbot_build_info{commit="` + fullCommit() + `",goversion="` + runtime.Version() + `",version="` + fullVersion() + `"}`
	if m[build] != "1" {
		t.Errorf("%s = %q, want 1 (metrics: %v)", build, m[build], m)
	}
	// With a token, GitHub's first answer comes at start: opsbot asks who it is.
	w := newWorld(t, "")
	if v := w.Metrics()["opsbot_github_rate_limit_remaining"]; v != "4999" {
		t.Errorf("opsbot_github_rate_limit_remaining = %q after GitHub answered, want 4999", v)
	}
	if v, ok := w.Metrics()["opsbot_slack_healthy"]; ok {
		t.Errorf("opsbot_slack_healthy = %s without a Slack token, want it absent", v)
	}
}

// Slack's health is known once auth.test answers.
func TestSlackHealthKnownAfterAuthTest(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := slackWorld(t, sl)
	if v := w.Metrics()["opsbot_slack_healthy"]; v != "1" {
		t.Errorf("opsbot_slack_healthy = %q after auth.test passed, want 1", v)
	}
}

// A first run on the example configuration, with the README's command,
// cannot hurt: it serves, in dry-run, with reconcile off.
func TestExampleConfigFirstRunIsDry(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(filepath.Join("..", "..", "opsbot.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DryRun || cfg.Reconcile.Period != 0 {
		t.Fatalf("example: dry_run %v, reconcile.period %v; want true and off", cfg.DryRun, cfg.Reconcile.Period)
	}
	dir := t.TempDir()
	ts := startServer(t, filepath.Join("..", "..", "opsbot.example.yaml"),
		func(k string) string {
			return map[string]string{"OPSBOT_WEBHOOK_SECRET": "change-me-to-a-long-secret"}[k]
		},
		"--listen", "127.0.0.1:0", "--state", filepath.Join(dir, "opsbot.db"))
	testkit.Eventually(t, "the log says GitHub is in dry-run", func() bool {
		return strings.Contains(ts.Stderr.String(), "GitHub dry-run") && strings.Contains(ts.Stderr.String(), "dry_run is set")
	})
}

// `opsbot demo` plays the everyday story against the in-repository fake
// GitHub on loopback ports and prints each step and the audit.
func TestDemo(t *testing.T) {
	t.Parallel()
	began := time.Now()
	out, errOut, err := runCLI(t, nil, "demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("the demo took %v", time.Since(began))
	mustContain(t, "demo", out,
		"against a fake GitHub on http://127.0.0.1:",
		"1. @maintainer", "opsbot reacts [+1]", "> 📌 @maintainer pinned run [31147925932]",
		"2. The author pushes c2c2c2c", `success, "skip: reusing run 31147925932, authorized by @maintainer"`,
		"gets: skip-pr-sweep=true reuse-source-run-id=31147925932", "Sweep skipped for",
		"3. The author pushes c3c3c3c", `"sweep: no reuse authorization"`, "gets: skip-pr-sweep=false",
		"4. @triager", "needs the `write` role", "@reader (read access", "it reacts [-1] only: no reply",
		"5. The audit", "decision                 skip", "pin                      consumed", "denied")
	if strings.Contains(out, "<!--") {
		t.Errorf("the demo shows the hidden marker:\n%s", out)
	}
}

// `opsbot demo --keep DIR` refuses a directory that holds something (a
// demo kept there before): the story plays from a new database only.
func TestDemoKeepsOnlyIntoAnEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "opsbot.db"), []byte("a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, nil, "demo", "--keep", dir)
	if err == nil || !strings.Contains(err.Error(), "the directory is not empty") || !strings.Contains(err.Error(), "name a new or empty directory") {
		t.Fatalf("demo --keep into a used directory: %v, want it refused saying why", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "opsbot.db")); string(b) != "a database" {
		t.Fatalf("the refused demo changed what the directory held: %q", b)
	}
}

// runGateAction runs the composite action's script (actions/gate/gate.sh)
// as a runner would for a pull_request synchronize of PR 2512 at head, and
// returns its outputs and stdout.
func runGateAction(t *testing.T, w *world, head string, vars map[string]string) (map[string]string, string) {
	t.Helper()
	dir := t.TempDir()
	event, err := json.Marshal(w.SyncPayload(head))
	if err != nil {
		t.Fatal(err)
	}
	eventPath, outPath := filepath.Join(dir, "event.json"), filepath.Join(dir, "github_output")
	if err := os.WriteFile(eventPath, event, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GITHUB_EVENT_NAME=pull_request", "GITHUB_EVENT_PATH=" + eventPath,
		"GITHUB_REPOSITORY=" + theRepo, "GITHUB_OUTPUT=" + outPath, "OPSBOT_SERVER=" + w.Srv.URL, "OPSBOT_TIMEOUT=20"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "actions", "gate", "gate.sh"))
	cmd.Env = env
	stdout, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && strings.Contains(string(stdout), "::error::")) {
		t.Fatalf("gate.sh: %v\n%s", err, stdout)
	}
	raw, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out, string(stdout)
}

// The gate action against the real server: with the job's ID token (no
// secret) the pinned push skips; with a gate token the next push sweeps;
// another PR's ID token is refused and the step fails closed.
func TestGateActionAgainstTheServer(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	w := newWorldWith(t, oidcConfig(is.URL), "", nil)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{"perf-changelog.yaml"})

	idTokens := func(claims map[string]any) map[string]string {
		endpoint := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "bearer request-token" || r.URL.Query().Get("audience") != w.Srv.URL {
				http.Error(rw, "wrong request token or audience", http.StatusBadRequest)
				return
			}
			json.NewEncoder(rw).Encode(map[string]string{"value": is.token(t, claims)})
		}))
		t.Cleanup(endpoint.Close)
		return map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": endpoint.URL + "/?api-version=2.0",
			"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-token"}
	}

	out, stdout := runGateAction(t, w, sha("c2"), idTokens(nil))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-source-head-sha"] != sha("c1") {
		t.Fatalf("ID token ask for the pinned push: %v\n%s", out, stdout)
	}

	w.GH.Push(theRepo, thePR, []string{sha("c3")}, []string{"perf-changelog.yaml"})
	out, stdout = runGateAction(t, w, sha("c3"), map[string]string{"OPSBOT_TOKEN": apiToken})
	if out["skip-pr-sweep"] != "false" || strings.Contains(stdout, "::warning::") {
		t.Fatalf("gate token ask for the next push: %v\n%s", out, stdout)
	}

	out, stdout = runGateAction(t, w, sha("c3"), idTokens(map[string]any{"ref": "refs/pull/9/merge"}))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(stdout, "::error::") || !strings.Contains(stdout, "HTTP 403") {
		t.Fatalf("another PR's ID token: %v\n%s", out, stdout)
	}
}

// A name someone else chose (a file the PR adds) quoted in the gate's
// reason never becomes a workflow command in the step's log: neither the
// legacy `##[…]` the runner finds anywhere in a line, nor `::…::`.
func TestReasonTextIsNoWorkflowCommand(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\"]\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	hostileFiles := []string{"##[set-env name=X;]x", "a::add-mask::b", ":::error::c"}
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, hostileFiles)
	w.SendSync(sha("c2"), "")
	check := func(what, out string) {
		t.Helper()
		for _, line := range strings.Split(out, "\n") {
			own := strings.HasPrefix(line, "::add-mask::") || strings.HasPrefix(line, "::warning::opsbot gate ")
			if strings.Contains(line, "##[") || (strings.Contains(line, "::") && !own) || (own && strings.Count(line, "::") > 2) {
				t.Errorf("%s prints a workflow command: %q", what, line)
			}
		}
	}
	out, stdout := runGateAction(t, w, sha("c2"), map[string]string{"OPSBOT_TOKEN": apiToken})
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "set-env") {
		t.Fatalf("the action: %v\n%s", out, stdout)
	}
	check("the gate action", stdout)
	outs, cli := w.gate("--pr", "2512", "--sha", sha("c2"))
	if !strings.Contains(outs["reuse-reason"], "add-mask") {
		t.Fatalf("opsbot gate: %v", outs)
	}
	check("opsbot gate", cli)
}

// A release build says its tag and commit: --version and opsbot_build_info.
func TestReleaseBuildStampsVersionAndCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "opsbot")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version=v9.8.7 -X main.commit=0123456789abcdef0123456789abcdef01234567",
		"-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "--version", string(out), "opsbot v9.8.7 (commit 0123456789abcdef0123456789abcdef01234567, go")
}
