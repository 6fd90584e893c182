// Package gateaction tests the composite action's script (gate.sh) as a
// runner would run it: bash, curl and jq, a real event payload, a fake
// $GITHUB_OUTPUT, and a test server that speaks the gate's text/plain
// contract.
package gateaction

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The synchronize fixture: PR 2 of Codertocat/Hello-World at this head.
const (
	fixtureRepo = "Codertocat/Hello-World"
	fixturePR   = 2
	fixtureSHA  = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	gateToken   = "gate-token-1"
)

var outputNames = []string{"skip-pr-sweep", "reuse-enabled", "reuse-source-run-id", "reuse-source-run-attempt",
	"reuse-source-run-url", "reuse-source-pr-number", "reuse-source-head-sha", "reuse-reason"}

const skipAnswer = "skip-pr-sweep=true\nreuse-enabled=true\nreuse-source-run-id=31147925932\n" +
	"reuse-source-run-attempt=1\nreuse-source-run-url=https://github.com/Codertocat/Hello-World/actions/runs/31147925932\n" +
	"reuse-source-pr-number=2\nreuse-source-head-sha=aaaa\nreuse-reason=skip: reusing run 31147925932, authorized by @maintainer\n"

const sweepAnswer = "skip-pr-sweep=false\nreuse-enabled=false\nreuse-source-run-id=\nreuse-source-run-attempt=\n" +
	"reuse-source-run-url=\nreuse-source-pr-number=\nreuse-source-head-sha=\nreuse-reason=sweep: no reuse authorization\n"

// ask is what the fake gate server saw.
type ask struct {
	Auth, Accept, ContentType string
	Body                      map[string]any
}

// gateServer answers POST /api/v1/gate with the replies in turn (the last
// one repeats), and records every ask.
type gateServer struct {
	*httptest.Server
	mu      sync.Mutex
	asks    []ask
	replies []reply
}

type reply struct {
	status int
	body   string
}

func newGateServer(t *testing.T, replies ...reply) *gateServer {
	t.Helper()
	g := &gateServer{replies: replies}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/gate" {
			http.Error(w, "not the gate", http.StatusNotFound)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		a := ask{Auth: r.Header.Get("Authorization"), Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type")}
		if err := json.Unmarshal(raw, &a.Body); err != nil {
			http.Error(w, "body is not JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		g.asks = append(g.asks, a)
		rep := g.replies[min(len(g.asks), len(g.replies))-1]
		g.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gateServer) Asks() []ask {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ask(nil), g.asks...)
}

// step is one run of gate.sh.
type step struct {
	failed  bool // the step failed (exit 1): a refused ask, or strict
	stdout  string
	outputs map[string]string
	lines   []string // $GITHUB_OUTPUT's lines, in order
	took    time.Duration
}

// runStep runs gate.sh with the event fixture and these variables (added to
// a runner's minimal environment), and reads $GITHUB_OUTPUT.
func runStep(t *testing.T, event, payload string, vars map[string]string) step {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the action's script (.ci/run installs it): %v", tool, err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "github_output")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GITHUB_EVENT_NAME=" + event,
		"GITHUB_EVENT_PATH=" + filepath.Join("..", "..", "testdata", "fixtures", "github-webhooks", payload),
		"GITHUB_REPOSITORY=" + fixtureRepo, "GITHUB_OUTPUT=" + out}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command("bash", "gate.sh")
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("gate.sh: %v (it must end with 0, or 1 for a refused ask)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	s := step{failed: err != nil, stdout: stdout.String(), outputs: map[string]string{}, took: time.Since(began)}
	if s.failed != strings.Contains(s.stdout, "::error::") {
		t.Fatalf("the step failed %v, but its log says ::error:: %v\n%s", s.failed, !s.failed, s.stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("$GITHUB_OUTPUT line %q is not key=value\n%s", line, raw)
		}
		s.lines = append(s.lines, k)
		s.outputs[k] = v
	}
	if strings.Join(s.lines, ",") != strings.Join(outputNames, ",") {
		t.Fatalf("$GITHUB_OUTPUT keys = %v, want the eight outputs in order %v", s.lines, outputNames)
	}
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return s
}

func prVars(server string) map[string]string {
	return map[string]string{"OPSBOT_SERVER": server, "OPSBOT_TOKEN": gateToken, "OPSBOT_TIMEOUT": "10"}
}

func wantAsk(t *testing.T, got ask, bearer string, body map[string]any) {
	t.Helper()
	if got.Auth != "Bearer "+bearer {
		t.Errorf("Authorization = %q, want Bearer %s", got.Auth, bearer)
	}
	if got.Accept != "text/plain" || got.ContentType != "application/json" {
		t.Errorf("Accept, Content-Type = %q, %q; want text/plain, application/json", got.Accept, got.ContentType)
	}
	if fmt.Sprint(got.Body) != fmt.Sprint(body) {
		t.Errorf("ask = %v, want %v", got.Body, body)
	}
}

var prAsk = map[string]any{"repo": fixtureRepo, "pr": float64(fixturePR), "sha": fixtureSHA, "event": "pull_request", "action": "synchronize"}

func TestSkip(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, skipAnswer})
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", prVars(g.URL))
	asks := g.Asks()
	if len(asks) != 1 {
		t.Fatalf("asks = %d, want 1", len(asks))
	}
	wantAsk(t, asks[0], gateToken, prAsk)
	for k, want := range map[string]string{"skip-pr-sweep": "true", "reuse-enabled": "true", "reuse-source-run-id": "31147925932",
		"reuse-source-run-attempt": "1", "reuse-source-pr-number": "2", "reuse-source-head-sha": "aaaa",
		"reuse-reason": "skip: reusing run 31147925932, authorized by @maintainer"} {
		if got := s.outputs[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if strings.Contains(s.stdout, "::warning::") {
		t.Errorf("a decision gave a warning:\n%s", s.stdout)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, sweepAnswer})
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", prVars(g.URL))
	if got := s.outputs["skip-pr-sweep"]; got != "false" {
		t.Errorf("skip-pr-sweep = %q, want false", got)
	}
	if got := s.outputs["reuse-reason"]; got != "sweep: no reuse authorization" {
		t.Errorf("reuse-reason = %q", got)
	}
	if strings.Contains(s.stdout, "::warning::") {
		t.Errorf("a decision gave a warning:\n%s", s.stdout)
	}
}

// On a push to the default branch the ask names the pushed commit and no PR.
func TestPush(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, sweepAnswer})
	runStep(t, "push", "push/with-new-branch.payload.json", prVars(g.URL))
	asks := g.Asks()
	if len(asks) != 1 {
		t.Fatalf("asks = %d, want 1", len(asks))
	}
	wantAsk(t, asks[0], gateToken, map[string]any{"repo": fixtureRepo, "pr": float64(0),
		"sha": "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "event": "push", "action": ""})
}

// On a merge group the ask names the group's commit and its branch, which
// names its PR (the server reads the rest from GitHub).
func TestMergeGroup(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, skipAnswer})
	s := runStep(t, "merge_group", "merge_group/checks_requested.payload.json", prVars(g.URL))
	asks := g.Asks()
	if len(asks) != 1 {
		t.Fatalf("asks = %d, want 1", len(asks))
	}
	wantAsk(t, asks[0], gateToken, map[string]any{"repo": "octo-org/octo-repo", "pr": float64(0),
		"sha": "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", "event": "merge_group", "action": "",
		"ref": "refs/heads/gh-readonly-queue/main/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64"})
	if s.outputs["skip-pr-sweep"] != "true" || s.failed {
		t.Fatalf("outputs %v, failed %v:\n%s", s.outputs, s.failed, s.stdout)
	}
}

// A server that cannot be reached is retried until the budget is spent,
// then the sweep runs.
func TestServerDownFailsClosedAfterItsBudget(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every connection is refused
	vars := prVars("http://" + addr)
	vars["OPSBOT_TIMEOUT"] = "6"
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
	if got := s.outputs["skip-pr-sweep"]; got != "false" {
		t.Errorf("skip-pr-sweep = %q, want false", got)
	}
	if !strings.Contains(s.stdout, "::warning::opsbot gate could not get a decision, so the sweep runs:") ||
		!strings.Contains(s.stdout, "gave up after") || !strings.Contains(s.stdout, "no answer from the server") {
		t.Errorf("stdout names no cause:\n%s", s.stdout)
	}
	// Retried until the budget was spent, and no longer: the first retry
	// waits 1 s and the next 2 s, so a 6 s budget holds at least two
	// attempts even on a loaded machine that starts curl slowly.
	if strings.Count(s.stdout, "retrying in") < 1 || strings.Contains(s.stdout, "gave up after 1 attempts") {
		t.Errorf("not retried within a 6 s budget:\n%s", s.stdout)
	}
	// The lower bound is the budget being spent; the upper one only catches a
	// script that ignores its budget (a loaded machine starts bash slowly).
	if s.took < 5500*time.Millisecond || s.took > 60*time.Second {
		t.Errorf("took %v, want about the 6 s budget", s.took)
	}
	if !strings.HasPrefix(s.outputs["reuse-reason"], "opsbot gate failed: ") {
		t.Errorf("reuse-reason = %q", s.outputs["reuse-reason"])
	}
	if s.failed {
		t.Error("a server that did not answer failed the step; without strict it only warns")
	}
	// With strict, the same fails the step (the outputs still say sweep).
	vars["OPSBOT_TIMEOUT"] = "2"
	vars["OPSBOT_STRICT"] = "true"
	s = runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
	if !s.failed || s.outputs["skip-pr-sweep"] != "false" {
		t.Errorf("strict: failed %v, outputs %v\n%s", s.failed, s.outputs, s.stdout)
	}
}

// A 503 (a deploy blip) is retried; the next answer decides.
func TestUnavailableThenAnswerIsRetried(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{503, "restarting"}, reply{200, skipAnswer})
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", prVars(g.URL))
	if n := len(g.Asks()); n != 2 {
		t.Fatalf("asks = %d, want 2 (a 503, then the answer)", n)
	}
	if got := s.outputs["skip-pr-sweep"]; got != "true" {
		t.Errorf("skip-pr-sweep = %q, want true after the retry\n%s", got, s.stdout)
	}
	if !strings.Contains(s.stdout, "HTTP 503") || strings.Contains(s.stdout, "::warning::") {
		t.Errorf("stdout should log the retried 503 and warn of nothing:\n%s", s.stdout)
	}
}

// Anything but a connection error, a 5xx or a 429 is not retried: it fails
// closed at once, naming the answer, and fails the step: a refused ask is a
// setup mistake that would otherwise make every push sweep unseen.
func TestRefusalFailsClosedAtOnce(t *testing.T) {
	t.Parallel()
	for _, rep := range []reply{{401, "bad token"}, {200, "<html>a proxy page</html>"}, {404, "no such route"},
		{403, "skip-pr-sweep=false\nreuse-enabled=false\nreuse-reason=opsbot could not decide (HTTP 403): the ID token's ref is not refs/pull/2/merge\n"}} {
		t.Run(fmt.Sprint(rep.status), func(t *testing.T) {
			g := newGateServer(t, rep)
			s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", prVars(g.URL))
			if n := len(g.Asks()); n != 1 {
				t.Errorf("asks = %d, want 1", n)
			}
			if s.outputs["skip-pr-sweep"] != "false" || !s.failed {
				t.Errorf("failed %v, outputs %v, stdout:\n%s", s.failed, s.outputs, s.stdout)
			}
			if rep.status == 401 && !strings.Contains(s.stdout, "the action's token input") {
				t.Errorf("the 401 names no token input:\n%s", s.stdout)
			}
			if rep.status == 403 && !strings.Contains(s.stdout, "HTTP 403: opsbot could not decide (HTTP 403): the ID token's ref") {
				t.Errorf("the warning does not give the server's reason:\n%s", s.stdout)
			}
		})
	}
}

// Without a token input and with id-token: write, the action asks GitHub
// for an ID token for the audience and sends it as the bearer.
func TestOIDC(t *testing.T) {
	t.Parallel()
	for _, audience := range []string{"", "opsbot-staging"} {
		t.Run("audience="+audience, func(t *testing.T) {
			var mu sync.Mutex
			want := audience // "": the server input, set below
			var tokenAsks []string
			issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				tokenAsks = append(tokenAsks, r.URL.RawQuery)
				mu.Unlock()
				switch {
				case r.Header.Get("Authorization") != "bearer request-token":
					http.Error(w, "bad request token", http.StatusUnauthorized)
				case r.URL.Query().Get("api-version") != "2.0":
					http.Error(w, "api-version lost", http.StatusBadRequest)
				case r.URL.Query().Get("audience") != want:
					http.Error(w, "wrong audience "+r.URL.Query().Get("audience"), http.StatusBadRequest)
				default:
					json.NewEncoder(w).Encode(map[string]any{"count": 1, "value": "id-token-for-" + strings.ReplaceAll(want, "/", "_")})
				}
			}))
			t.Cleanup(issuer.Close)
			g := newGateServer(t, reply{200, skipAnswer})
			if want == "" {
				want = g.URL
			}
			vars := prVars(g.URL + "/")
			delete(vars, "OPSBOT_TOKEN")
			vars["OPSBOT_AUDIENCE"] = audience
			vars["ACTIONS_ID_TOKEN_REQUEST_URL"] = issuer.URL + "/token?api-version=2.0"
			vars["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "request-token"
			s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
			asks := g.Asks()
			if len(asks) != 1 {
				t.Fatalf("asks = %d, want 1; token asks %v\n%s", len(asks), tokenAsks, s.stdout)
			}
			wantAsk(t, asks[0], "id-token-for-"+strings.ReplaceAll(want, "/", "_"), prAsk)
			if s.outputs["skip-pr-sweep"] != "true" {
				t.Errorf("skip-pr-sweep = %q\n%s", s.outputs["skip-pr-sweep"], s.stdout)
			}
			if !strings.Contains(s.stdout, "::add-mask::id-token-for-"+strings.ReplaceAll(want, "/", "_")) {
				t.Errorf("the ID token is not masked in the log:\n%s", s.stdout)
			}
		})
	}
}

// With neither a token nor id-token: write there is nothing to ask with.
func TestNoCredentialFailsClosed(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, skipAnswer})
	vars := prVars(g.URL)
	delete(vars, "OPSBOT_TOKEN")
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
	if len(g.Asks()) != 0 || s.outputs["skip-pr-sweep"] != "false" || !strings.Contains(s.stdout, "id-token: write") || !s.failed {
		t.Errorf("asks %d, outputs %v, stdout:\n%s", len(g.Asks()), s.outputs, s.stdout)
	}
}

// A push that deleted the branch names no commit to ask about.
func TestDeletedBranchFailsClosed(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, skipAnswer})
	s := runStep(t, "push", "push/payload.json", prVars(g.URL))
	if len(g.Asks()) != 0 || s.outputs["skip-pr-sweep"] != "false" || !strings.Contains(s.stdout, "names no commit") || s.failed {
		t.Errorf("asks %d, outputs %v, stdout:\n%s", len(g.Asks()), s.outputs, s.stdout)
	}
}

// An event the gate does not answer sweeps, and says so.
func TestOtherEventFailsClosed(t *testing.T) {
	t.Parallel()
	g := newGateServer(t, reply{200, skipAnswer})
	s := runStep(t, "issue_comment", "issue_comment/created.payload.json", prVars(g.URL))
	if len(g.Asks()) != 0 || s.outputs["skip-pr-sweep"] != "false" || !strings.Contains(s.stdout, `"issue_comment"`) || !s.failed {
		t.Errorf("asks %d, outputs %v, stdout:\n%s", len(g.Asks()), s.outputs, s.stdout)
	}
}

// The bearer goes only over https (plain http only to this machine), no
// ~/.curlrc changes the ask, and a Retry-After too large to count is held
// to the step's budget instead of turning into a busy loop.
func TestTransportGuards(t *testing.T) {
	t.Parallel()
	t.Run("userinfo hiding another host", func(t *testing.T) {
		for _, server := range []string{"http://127.0.0.1:443@attacker.example", "http://localhost:@attacker.example/x",
			"http://[::1]:@attacker.example", "https://opsbot.example.com@attacker.example"} {
			s := runStep(t, "pull_request", "pull_request/synchronize.payload.json",
				map[string]string{"OPSBOT_SERVER": server, "OPSBOT_TOKEN": gateToken, "OPSBOT_TIMEOUT": "10"})
			if s.outputs["skip-pr-sweep"] != "false" || !s.failed || !strings.Contains(s.stdout, "names a user") {
				t.Errorf("%s: outputs %v\n%s", server, s.outputs, s.stdout)
			}
		}
	})
	t.Run("http elsewhere", func(t *testing.T) {
		s := runStep(t, "pull_request", "pull_request/synchronize.payload.json",
			map[string]string{"OPSBOT_SERVER": "http://opsbot.example.com", "OPSBOT_TOKEN": gateToken, "OPSBOT_TIMEOUT": "10"})
		if s.outputs["skip-pr-sweep"] != "false" || !strings.Contains(s.stdout, "is not an https:// URL") || !s.failed {
			t.Fatalf("outputs %v\n%s", s.outputs, s.stdout)
		}
	})
	t.Run("curlrc", func(t *testing.T) {
		g := newGateServer(t, reply{200, skipAnswer})
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, ".curlrc"), []byte("header = \"Authorization: Bearer from-curlrc\"\nuser-agent = \"curlrc\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		vars := prVars(g.URL)
		vars["HOME"] = home
		s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
		if a := g.Asks(); len(a) != 1 || a[0].Auth != "Bearer "+gateToken {
			t.Fatalf("asks %+v\n%s", a, s.stdout)
		}
	})
	t.Run("huge Retry-After", func(t *testing.T) {
		g := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "99999999999999999999999")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down")
		}))
		t.Cleanup(g.Close)
		vars := prVars(g.URL)
		vars["OPSBOT_TIMEOUT"] = "3"
		s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
		if s.outputs["skip-pr-sweep"] != "false" || s.took > 10*time.Second || strings.Count(s.stdout, "retrying") > 3 {
			t.Fatalf("took %s, outputs %v\n%s", s.took, s.outputs, s.stdout)
		}
	})
}

// The documented OIDC setup gone wrong: the server refuses the job's ID token
// (its audience is not the server's api.github_oidc.audience). The step
// fails, its error names the audience it asked for, and the outputs say
// sweep.
func TestMisconfiguredAudienceFailsTheStep(t *testing.T) {
	t.Parallel()
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"count": 1, "value": "id-token"})
	}))
	t.Cleanup(issuer.Close)
	g := newGateServer(t, reply{401, "skip-pr-sweep=false\nreuse-enabled=false\nreuse-reason=opsbot could not decide (HTTP 401): the GitHub Actions ID token was refused: oidc: expected audience \"https://opsbot.example.com\"\n"})
	vars := prVars(g.URL)
	delete(vars, "OPSBOT_TOKEN")
	vars["ACTIONS_ID_TOKEN_REQUEST_URL"] = issuer.URL + "/token?api-version=2.0"
	vars["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = "request-token"
	s := runStep(t, "pull_request", "pull_request/synchronize.payload.json", vars)
	if !s.failed || s.outputs["skip-pr-sweep"] != "false" || s.outputs["reuse-enabled"] != "false" {
		t.Fatalf("failed %v, outputs %v\n%s", s.failed, s.outputs, s.stdout)
	}
	if !strings.Contains(s.stdout, "::error::") || !strings.Contains(s.stdout, "its audience was \\\"") && !strings.Contains(s.stdout, "its audience was") {
		t.Errorf("the error does not name the audience asked for:\n%s", s.stdout)
	}
}
