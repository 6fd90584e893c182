package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/server"
)

// The demo's world: one benchmark repository on the in-repository fake
// GitHub, served on a loopback port.
const (
	demoRepo       = "SemiAnalysisAI/InferenceX"
	demoPR         = 2512
	demoRun        = int64(31147925932)
	demoSecret     = "demo-webhook-secret"
	demoGateToken  = "demo-gate-token-0"
	demoAdminToken = "demo-admin-token"
	demoMaintID    = int64(5001)
	demoReadID     = int64(5002)
	demoTriageID   = int64(5003)
)

func demoSHA(name string) string { return strings.Repeat(name, 40/len(name)+1)[:40] }

// runDemo starts opsbot against the fake GitHub on this machine and plays
// the everyday story, printing each step and then the audit. Nothing
// leaves the machine: both listen on 127.0.0.1 only.
func runDemo(e *env, args []string) error {
	fs := newFlags(e, "demo", "[--keep DIR]",
		"opsbot demo",
		"opsbot demo --keep /tmp/opsbot-demo   # keep the database, then: opsbot audit --db /tmp/opsbot-demo/opsbot.db")
	keep := fs.String("keep", "", "write the demo's configuration and database here and keep them (default: a temporary directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "opsbot-demo-")
		if err != nil {
			return fmt.Errorf("making a directory for the demo's database: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else {
		// The demo plays its story from a new database: one a run before
		// kept already holds it, and the story would not replay.
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("--keep %s: the directory is not empty (a demo kept there before?); name a new or empty directory, or remove it first", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--keep %s: %w", dir, err)
		}
	}

	gh, err := githubtest.Listen()
	if err != nil {
		return err
	}
	defer gh.Close()
	gh.AddRepo(demoRepo, "run-sweep.yml", 77)
	gh.AddUser("author", 5000, "User")
	gh.AddUser("maintainer", demoMaintID, "User")
	gh.AddUser("reader", demoReadID, "User")
	gh.SetRole(demoRepo, "maintainer", "write")
	gh.SetRole(demoRepo, "reader", "read")
	gh.AddUser("triager", demoTriageID, "User")
	gh.SetRole(demoRepo, "triager", "triage")
	gh.AddPR(demoRepo, demoPR, "author", "kimi-tune", demoSHA("b0"), []string{demoSHA("c1")}, []string{"benchmarks/kimi.sh"})
	gh.AddRun(demoRepo, githubtest.Run{ID: demoRun, WorkflowID: 77, Event: "pull_request", Status: "completed",
		Conclusion: "success", HeadSHA: demoSHA("c1"), HeadBranch: "kimi-tune", CreatedAt: time.Now().Add(-2 * time.Hour),
		Artifacts: []githubtest.Artifact{{Name: "results_bmk"}, {Name: "eval_results_all"}, {Name: "changelog-metadata"}}})

	cfgPath := filepath.Join(dir, "opsbot.yaml")
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
state_path: %q
github:
  api_url: %q
  token_env: "DEMO_GITHUB_TOKEN"
  webhook_secret_env: "DEMO_WEBHOOK_SECRET"
  bot_login: %q
  bot_user_id: %d
api:
  gate_tokens_env: "DEMO_GATE_TOKENS"
  admin_tokens_env: "DEMO_ADMIN_TOKENS"
  github_oidc:
    enabled: false
slack:
  token_env: "DEMO_SLACK_TOKEN"
repos:
  - name: %q
    sweep_workflow: ".github/workflows/run-sweep.yml"
`, filepath.Join(dir, "opsbot.db"), gh.URL, githubtest.BotLogin, githubtest.BotID, demoRepo)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("writing the demo's configuration: %w", err)
	}
	vars := map[string]string{"DEMO_GITHUB_TOKEN": "ghs_demo", "DEMO_WEBHOOK_SECRET": demoSecret,
		"DEMO_GATE_TOKENS": demoGateToken, "DEMO_ADMIN_TOKENS": demoAdminToken, "GOGC": e.getenv("GOGC")}
	getenv := func(k string) string { return vars[k] }

	// opsbot serves in this process; its JSON log is kept, and shown only
	// if the demo fails.
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	logs := &lockedBuffer{}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runServe(&env{ctx: ctx, getenv: getenv, stdin: strings.NewReader(""), stdout: pw, stderr: logs},
			[]string{"--config", cfgPath, "--log-level", "warn"})
		pw.Close()
		done <- err
	}()
	serverURL, err := waitServing(pr, done, 10*time.Second)
	if err == nil {
		err = server.WaitReady(ctx, serverURL, 10*time.Second)
	}
	if err != nil {
		return fmt.Errorf("starting opsbot for the demo: %w\n%s", err, logs.String())
	}
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return fmt.Errorf("opsbot did not stop within 20 s")
		}
	}

	d := &demo{e: e, gh: gh, url: serverURL, nextID: 1}
	err = d.play()
	if stopErr := stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return fmt.Errorf("the demo failed: %w\nopsbot's log:\n%s", err, logs.String())
	}
	if *keep != "" {
		fmt.Fprintf(e.stdout, "\nThe configuration and the database are in %s: opsbot audit --db %s\n", dir, filepath.Join(dir, "opsbot.db"))
	}
	return nil
}

// waitServing reads opsbot's stdout until it says where it serves.
func waitServing(r io.Reader, done <-chan error, within time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "opsbot serving on "); ok {
				found <- u
			}
		}
		io.Copy(io.Discard, r)
	}()
	select {
	case u := <-found:
		return u, nil
	case err := <-done:
		return "", fmt.Errorf("opsbot stopped before serving: %v", err)
	case <-time.After(within):
		return "", fmt.Errorf("opsbot was not serving within %s", within)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type demo struct {
	e      *env
	gh     *githubtest.Fake
	url    string
	nextID int
}

func (d *demo) say(format string, a ...any) { fmt.Fprintf(d.e.stdout, format+"\n", a...) }

func (d *demo) play() error {
	d.say("opsbot demo: opsbot serving %s on %s, against a fake GitHub on %s (nothing leaves this machine).",
		demoRepo, d.url, strings.TrimSuffix(d.gh.URL, "/"))
	d.say("PR #%d has one commit, c1c1c1c, and a finished sweep run %d on it.\n", demoPR, demoRun)

	d.say("1. @maintainer (write access) comments on the PR:  /reuse-sweep-run %d", demoRun)
	c := d.gh.AddComment(demoRepo, demoPR, "maintainer", fmt.Sprintf("Verified the sweep at c1.\n\n/reuse-sweep-run %d\n", demoRun))
	if err := d.sendComment(c, "maintainer", demoMaintID); err != nil {
		return err
	}
	reply, err := d.waitReply(1)
	if err != nil {
		return err
	}
	// A reaction is sent in a lane of its own, beside the reply.
	if err := until("opsbot's reaction to @maintainer", func() bool { return len(d.gh.Reactions(c.ID)) > 0 }); err != nil {
		return err
	}
	d.say("   opsbot reacts %v and replies:", d.gh.Reactions(c.ID))
	d.quote(reply)

	d.say("2. The author pushes c2c2c2c (it touches only perf-changelog.yaml).")
	if err := d.push("c2"); err != nil {
		return err
	}
	st, err := d.waitStatus("c2")
	if err != nil {
		return err
	}
	d.say("   commit status %s on c2c2c2c: %s, %q", st.Context, st.State, st.Description)
	if err := d.ask("c2"); err != nil {
		return err
	}
	reply, err = d.waitReply(2)
	if err != nil {
		return err
	}
	d.say("   and on the PR:")
	d.quote(reply)

	d.say("3. The author pushes c3c3c3c. The pin covered one push only.")
	if err := d.push("c3"); err != nil {
		return err
	}
	if st, err = d.waitStatus("c3"); err != nil {
		return err
	}
	d.say("   commit status %s on c3c3c3c: %s, %q", st.Context, st.State, st.Description)
	if err := d.ask("c3"); err != nil {
		return err
	}
	d.say("")

	d.say("4. @triager (triage access) tries the same:  /reuse-sweep-run %d", demoRun)
	c = d.gh.AddComment(demoRepo, demoPR, "triager", fmt.Sprintf("/reuse-sweep-run %d", demoRun))
	if err := d.sendComment(c, "triager", demoTriageID); err != nil {
		return err
	}
	if reply, err = d.waitReply(3); err != nil {
		return err
	}
	d.say("   opsbot refuses:")
	d.quote(reply)
	d.say("   @reader (read access: anyone, on a public repository) tries too; opsbot does not talk to outsiders:")
	c = d.gh.AddComment(demoRepo, demoPR, "reader", fmt.Sprintf("/reuse-sweep-run %d", demoRun))
	if err := d.sendComment(c, "reader", demoReadID); err != nil {
		return err
	}
	if err := until("opsbot's reaction to @reader", func() bool { return len(d.gh.Reactions(c.ID)) > 0 }); err != nil {
		return err
	}
	d.say("   it reacts %v only: no reply, no Slack message (the audit has the denial)\n", d.gh.Reactions(c.ID))

	d.say("5. The audit (opsbot audit --server %s --repo %s --pr %d):\n", d.url, demoRepo, demoPR)
	var table bytes.Buffer
	sub := &env{ctx: d.e.ctx, getenv: func(k string) string {
		if k == "OPSBOT_API_TOKEN" {
			return demoAdminToken
		}
		return ""
	}, stdin: strings.NewReader(""), stdout: &table, stderr: d.e.stderr}
	if err := runAudit(sub, []string{"--server", d.url, "--repo", demoRepo, "--pr", fmt.Sprint(demoPR)}); err != nil {
		return fmt.Errorf("reading the audit: %w", err)
	}
	d.e.stdout.Write(table.Bytes())
	return nil
}

// quote prints a reply as it reads on GitHub, without its hidden marker.
func (d *demo) quote(body string) {
	var shown []string
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "<!--") {
			shown = append(shown, line)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(strings.Join(shown, "\n")), "\n") {
		d.say("   > %s", line)
	}
	d.say("")
}

// webhook signs a payload as GitHub does and posts it.
func (d *demo) webhook(event string, payload map[string]any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	d.nextID++
	req, err := http.NewRequestWithContext(d.e.ctx, http.MethodPost, d.url+"/webhook", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("demo-%d", d.nextID))
	req.Header.Set("X-Hub-Signature-256", auth.Sign(body, demoSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("sending the %s webhook: %w", event, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the %s webhook was answered %s", event, resp.Status)
	}
	return nil
}

func (d *demo) sendComment(c githubtest.Comment, login string, id int64) error {
	user := map[string]any{"login": login, "id": id, "type": "User"}
	return d.webhook("issue_comment", map[string]any{
		"action": "created",
		"issue": map[string]any{"number": demoPR, "state": "open", "title": "Tune Kimi K2 on MI355X",
			"user":         map[string]any{"login": "author", "id": 5000, "type": "User"},
			"pull_request": map[string]any{"url": fmt.Sprintf("https://api.github.com/repos/%s/pulls/%d", demoRepo, demoPR)}},
		"comment": map[string]any{"id": c.ID, "body": c.Body, "user": user,
			"html_url": fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", demoRepo, demoPR, c.ID)},
		"repository": map[string]any{"full_name": demoRepo},
		"sender":     user,
	})
}

func (d *demo) push(name string) error {
	d.gh.Push(demoRepo, demoPR, []string{demoSHA(name)}, []string{"perf-changelog.yaml"})
	return d.webhook("pull_request", map[string]any{
		"action": "synchronize",
		"number": demoPR,
		"pull_request": map[string]any{"number": demoPR, "state": "open", "title": "Tune Kimi K2 on MI355X",
			"user":   map[string]any{"login": "author", "id": 5000, "type": "User"},
			"head":   map[string]any{"sha": demoSHA(name), "ref": "kimi-tune"},
			"labels": []any{map[string]any{"name": "full-sweep-enabled"}}, "draft": false},
		"repository": map[string]any{"full_name": demoRepo},
		"sender":     map[string]any{"login": "author", "id": 5000, "type": "User"},
	})
}

// ask is the workflow's gate step for head name.
func (d *demo) ask(name string) error {
	ans, err := askGate(d.e.ctx, d.url, demoGateToken, gate.Request{Repo: demoRepo, PR: demoPR, SHA: demoSHA(name),
		Event: "pull_request", Action: "synchronize"}, 10*time.Second, func(string) {})
	if err != nil {
		return fmt.Errorf("asking the gate for %s: %w", name, err)
	}
	line := fmt.Sprintf("skip-pr-sweep=%t", ans.SkipPRSweep)
	if ans.RunID != 0 {
		line += fmt.Sprintf(" reuse-source-run-id=%d", ans.RunID)
	}
	d.say("   the workflow's gate step (POST /api/v1/gate) gets: %s", line)
	return nil
}

// until polls cond for up to 10 s: it waits for opsbot, never for a fixed time.
func until(what string, cond func() bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after 10 s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// waitReply waits until opsbot has posted n comments, and returns the last.
func (d *demo) waitReply(n int) (string, error) {
	var mine []string
	err := until(fmt.Sprintf("opsbot's reply #%d on the PR", n), func() bool {
		mine = mine[:0]
		for _, c := range d.gh.Comments(demoRepo, demoPR) {
			if c.Login == githubtest.BotLogin {
				mine = append(mine, c.Body)
			}
		}
		return len(mine) >= n
	})
	if err != nil {
		return "", err
	}
	return mine[n-1], nil
}

func (d *demo) waitStatus(name string) (githubtest.Status, error) {
	var st []githubtest.Status
	err := until("the commit status on "+name, func() bool {
		st = d.gh.Statuses(demoRepo, demoSHA(name))
		return len(st) > 0
	})
	if err != nil {
		return githubtest.Status{}, err
	}
	return st[len(st)-1], nil
}
