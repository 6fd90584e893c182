package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
)

// config check warns where a repository's defaults let more people skip
// sweeps than they might think: reuse and stage open to every write
// collaborator, a pin that covers a push whatever it changes, staging
// reports taken from any sender that has the request's token.
func TestConfigCheckWarnsAboutOpenDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, repo string
		want, not  []string
	}{
		{"defaults", "", []string{"repos[0].reuse.min_role is write", "repos[0].reuse.allowed_paths is empty"},
			[]string{"stage.min_role", "callback_senders"}},
		{"a role below write, and write spelled as GitHub's push", "    reuse: {min_role: read}\n" +
			`    stage: {min_role: Push, dispatch: {repo: "o/staging", event_type: "stage"}}` + "\n",
			[]string{"repos[0].reuse.min_role is read", "repos[0].stage.min_role is Push"}, nil},
		{"staging at its defaults", `    stage: {dispatch: {repo: "o/staging", event_type: "stage"}}` + "\n",
			[]string{"repos[0].stage.min_role is write", "repos[0].stage.callback_senders is empty"}, nil},
		{"tightened", "    reuse: {min_role: maintain, allowed_paths: [\"docs/**\"]}\n" +
			`    stage: {min_role: maintain, dispatch: {repo: "o/staging", event_type: "stage"}, callback_senders: ["41898282"]}` + "\n",
			nil, []string{"repos[0].reuse.min_role", "repos[0].reuse.allowed_paths", "repos[0].stage"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "c.yaml")
			cfg := "github: {token_env: TEST_GITHUB_TOKEN, webhook_secret_env: TEST_WEBHOOK_SECRET}\nrepos:\n" +
				"  - name: \"o/r\"\n    sweep_workflow: \".github/workflows/run-sweep.yml\"\n" + tc.repo
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), []string{"config", "check", "--config", path}, testEnv(nil), strings.NewReader(""), &stdout, &stderr); err != nil {
				t.Fatalf("config check: %v\n%s%s", err, stdout.String(), stderr.String())
			}
			for _, w := range tc.want {
				mustContain(t, "config check", stdout.String(), "warning: "+w)
			}
			for _, w := range tc.not {
				if strings.Contains(stdout.String(), "warning: "+w) {
					t.Errorf("config check warns about %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// The audit page's password is held to the other secrets' minimum length,
// and failed sign-ins from one address are throttled: past ten, even the
// right password is answered 429 for a while; other addresses sign in.
func TestAuditPageSignInIsGuarded(t *testing.T) {
	t.Parallel()
	page := "audit_web:\n  enabled: true\n  user_env: TEST_AUDIT_USER\n  password_env: TEST_AUDIT_PASSWORD\n"
	dir := t.TempDir()
	path := writeConfig(t, dir, page)
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--config", path}, testEnv(map[string]string{"TEST_AUDIT_USER": "maint",
		"TEST_AUDIT_PASSWORD": "short"}), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "audit_web.password_env: TEST_AUDIT_PASSWORD is 5 characters long") {
		t.Fatalf("serve with a 5-character audit password: %v", err)
	}

	const password = "audit-page-password-0123"
	w := newWorldWith(t, page, "", map[string]string{"TEST_AUDIT_USER": "maint", "TEST_AUDIT_PASSWORD": password})
	signIn := func(from, cred string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, w.Srv.URL+"/audit", nil)
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
		tr := &http.Transport{DisableKeepAlives: true, DialContext: dialerFrom(from)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 10 {
		if code := signIn("127.0.0.2", "maint:guess"); code != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: %d, want 401", i+1, code)
		}
	}
	if code := signIn("127.0.0.2", "maint:"+password); code != http.StatusTooManyRequests {
		t.Fatalf("the right password after ten failures: %d, want 429", code)
	}
	if code := signIn("127.0.0.3", "maint:"+password); code != http.StatusOK {
		t.Fatalf("another address with the right password: %d, want 200", code)
	}
}

// /metrics can be put behind a bearer token, or on an address of its own.
func TestMetricsBehindATokenOrElsewhere(t *testing.T) {
	t.Parallel()
	const token = "metrics-token-0123456789"
	t.Run("token", func(t *testing.T) {
		path := writeConfig(t, t.TempDir(), "metrics:\n  token_env: TEST_METRICS_TOKEN\n")
		srv := startServer(t, path, testEnv(map[string]string{"TEST_METRICS_TOKEN": token}))
		for _, tc := range []struct {
			bearer string
			want   int
		}{{"", http.StatusUnauthorized}, {"wrong-token-0123456789", http.StatusUnauthorized}, {token, http.StatusOK}} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || (tc.want == http.StatusOK && !strings.Contains(string(body), "opsbot_build_info")) {
				t.Errorf("GET /metrics with bearer %q: %d, want %d", tc.bearer, resp.StatusCode, tc.want)
			}
		}
	})
	t.Run("listen", func(t *testing.T) {
		path := writeConfig(t, t.TempDir(), "metrics:\n  listen: \"127.0.0.1:0\"\n")
		ctx, cancel := context.WithCancel(t.Context())
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := run(ctx, []string{"serve", "--config", path}, testEnv(nil), strings.NewReader(""), pw, io.Discard)
			pw.Close()
			done <- err
		}()
		t.Cleanup(func() { cancel(); <-done })
		var metricsURL, serverURL string
		sc := bufio.NewScanner(pr)
		for serverURL == "" && sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "opsbot metrics on "); ok {
				metricsURL = u
			}
			if u, ok := strings.CutPrefix(sc.Text(), "opsbot serving on "); ok {
				serverURL = u
			}
		}
		go io.Copy(io.Discard, pr)
		if metricsURL == "" || serverURL == "" {
			t.Fatalf("metrics %q, server %q", metricsURL, serverURL)
		}
		for url, want := range map[string]int{metricsURL: http.StatusOK, serverURL + "/metrics": http.StatusNotFound} {
			resp, err := http.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
			}
		}
	})
}

// Staging reports are taken only from the accounts stage.callback_senders
// lists (by id), when it lists any.
func TestStageCallbackSenders(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, `      callback_senders: ["41898282"]`+"\n")
	c := w.Comment(maintainer, "/stage-results 31147925932")
	p := payload(w.T, "repository_dispatch", "")
	p["action"] = "stage-results-completed"
	setPath(p, "repository.full_name", theRepo)
	p["client_payload"] = map[string]any{"comment-id": itoa64(c.ID), "run-id": itoa64(runR1), "pr-number": "2512",
		"stage-succeeded": true, "request-token": w.requestToken(c.ID)}
	p["sender"] = map[string]any{"login": "mallory", "id": 6666, "type": "User"}
	w.Send("repository_dispatch", p)
	if strings.Contains(w.ack(), "staged run") {
		t.Fatalf("a report from an unlisted sender was taken:\n%s", w.ack())
	}
	p["sender"] = map[string]any{"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
	w.Send("repository_dispatch", p)
	mustContain(t, "acknowledgement", w.ack(), "staged run")
}

// dialerFrom dials from a loopback address of 127.0.0.0/8.
func dialerFrom(from string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// A first run without a GitHub token says what it means, at start and in
// config check (which prints whether notices are posted); config check
// exits 1 when an unset variable would stop opsbot serve from starting.
func TestNoTokenIsSaidAndConfigCheckFailsWhenServeWouldNot(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, t.TempDir(), "")
	out, _, err := runCLI(t, map[string]string{"TEST_WEBHOOK_SECRET": testSecret}, "config", "check", "--config", path)
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	mustContain(t, "config check", out, "dry run:     on: no GitHub token: webhooks are received and stored; every command will be "+
		"answered 'permission could not be checked'", "until TEST_GITHUB_TOKEN is set")
	out, _, err = runCLI(t, map[string]string{"TEST_WEBHOOK_SECRET": testSecret, "TEST_GITHUB_TOKEN": "ghs_x"}, "config", "check", "--config", path)
	if err != nil || !strings.Contains(out, "dry run:     off") {
		t.Fatalf("config check with a token: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, nil, "config", "check", "--config", path)
	if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(out, "opsbot serve would not start in this environment") {
		t.Fatalf("config check without the webhook secret: %v\n%s", err, out)
	}
	srv := startServer(t, path, testEnv(nil))
	srv.Stop(t)
	mustContain(t, "start log", srv.Stderr.String(), "no GitHub token: webhooks are received and stored")
}

// A token of a person's account is said loudly at start: opsbot treats that
// account as itself and never runs its commands.
func TestPersonalTokenIsSaidLoudly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.AddUser("alice", 7777, "User")
	w.GH.SetAuthenticatedUser("alice")
	w.Srv.Stop(t)
	w.Srv = startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env)
	w.Srv.Stop(t)
	mustContain(t, "start log", w.Srv.Stderr.String(), `"level":"ERROR"`, "the GitHub token belongs to a person's account: opsbot treats alice as itself")
}

// `opsbot github app-manifest` prints a GitHub App manifest (the manifest
// flow's JSON) with exactly the permissions and events opsbot uses, and
// `opsbot slack app-manifest` a Slack app manifest with its one scope.
// opsbot github events prints the events the App manifest subscribes to,
// in its order, each with its name in GitHub's webhook settings and why:
// what a webhook set up by hand takes.
func TestGitHubEventsPrintsTheManifestsEvents(t *testing.T) {
	t.Parallel()
	out, errOut, err := runCLI(t, nil, "github", "events")
	if err != nil {
		t.Fatalf("github events: %v %s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	used := app.UsedEvents()
	if len(lines) != len(used)+1 || !strings.HasPrefix(lines[0], "EVENT") {
		t.Fatalf("github events printed %d lines for %d events:\n%s", len(lines), len(used), out)
	}
	for i, e := range used {
		if f := strings.Fields(lines[i+1]); len(f) < 3 || f[0] != e {
			t.Errorf("line %d is %q; want the event %s, its webhook setting and why", i+1, lines[i+1], e)
		}
	}
	mustContain(t, "github events", out, "merge_group          Merge groups", "a queued /merge-with-reuse says what the queue did")
	if _, errOut, err := runCLI(t, nil, "github", "events", "--json"); err == nil || !strings.Contains(errOut, "takes no arguments") {
		t.Fatalf("github events --json: %v %s", err, errOut)
	}
}

func TestAppManifests(t *testing.T) {
	t.Parallel()
	var gh struct {
		Name   string            `json:"name"`
		URL    string            `json:"url"`
		Public bool              `json:"public"`
		Hook   map[string]any    `json:"hook_attributes"`
		Perms  map[string]string `json:"default_permissions"`
		Events []string          `json:"default_events"`
	}
	out, errOut, err := runCLI(t, nil, "github", "app-manifest", "--url", "https://opsbot.example.com/", "--teams")
	if err != nil {
		t.Fatalf("github app-manifest: %v %s", err, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&gh); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want := map[string]string{"metadata": "read", "actions": "read", "contents": "read", "pull_requests": "read", "issues": "write",
		"statuses": "write", "members": "read", "checks": "write", "merge_queues": "read"}
	if fmt.Sprint(gh.Perms) != fmt.Sprint(want) || gh.Hook["url"] != "https://opsbot.example.com/webhook" || gh.Public ||
		strings.Join(gh.Events, ",") != strings.Join(app.UsedEvents(), ",") {
		t.Fatalf("manifest = %+v", gh)
	}
	out, _, _ = runCLI(t, nil, "github", "app-manifest", "--url", "https://opsbot.example.com", "--staging")
	if !strings.Contains(out, `"contents": "write"`) || strings.Contains(out, "members") {
		t.Fatalf("--staging manifest:\n%s", out)
	}
	out, _, _ = runCLI(t, nil, "github", "app-manifest", "--url", "https://opsbot.example.com", "--merge")
	if !strings.Contains(out, `"contents": "write"`) || !strings.Contains(out, `"pull_requests": "write"`) || !strings.Contains(out, `"workflows": "write"`) {
		t.Fatalf("--merge manifest:\n%s", out)
	}
	out, _, _ = runCLI(t, nil, "github", "app-manifest", "--url", "https://opsbot.example.com", "--external")
	if !strings.Contains(out, `"actions": "write"`) || strings.Contains(out, `"contents": "write"`) {
		t.Fatalf("--external manifest:\n%s", out)
	}
	if _, errOut, err := runCLI(t, nil, "github", "app-manifest", "--url", "http://opsbot.example.com"); err == nil || !strings.Contains(errOut, "https://") {
		t.Fatalf("an http URL: %v %s", err, errOut)
	}
	var sl struct {
		OAuth struct {
			Scopes struct {
				Bot []string `json:"bot"`
			} `json:"scopes"`
		} `json:"oauth_config"`
		Display map[string]any `json:"display_information"`
	}
	out, _, err = runCLI(t, nil, "slack", "app-manifest")
	if err != nil || json.Unmarshal([]byte(out), &sl) != nil || strings.Join(sl.OAuth.Scopes.Bot, ",") != "chat:write" || sl.Display["name"] != "opsbot" {
		t.Fatalf("slack app-manifest: %v\n%s", err, out)
	}
}

// docs/credentials.md names every permission the manifest asks for (its
// events `opsbot github events` prints: docs/events_test.go).
func TestCredentialsDocNamesEveryPermission(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "credentials.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ToLower(string(raw))
	for _, p := range append(githubPermissions(appFeatures{staging: true, teams: true}), append(githubPermissions(appFeatures{merge: true}), append(githubPermissions(appFeatures{external: true}), githubPermissions(appFeatures{rerun: true})...)...)...) {
		name := strings.ReplaceAll(p.Name, "_", " ")
		if name == "statuses" {
			name = "commit statuses"
		}
		if !strings.Contains(doc, "| "+name+" | "+p.Level) {
			t.Errorf("docs/credentials.md has no row for %s %s", p.Name, p.Level)
		}
	}
}
