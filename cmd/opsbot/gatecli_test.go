package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// `opsbot gate` never follows a redirect (the bearer would go with it, to
// another port or scheme of the same host or anywhere else) and uses an
// answer only when it is for the repository, PR and commit it asked about:
// either is a refusal that fails the step.
func TestGateCLIRefusesRedirectsAndAnswersForSomethingElse(t *testing.T) {
	t.Parallel()
	var bearerElsewhere atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearerElsewhere.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"repo": theRepo, "pr": thePR, "sha": sha("c2"), "event": "pull_request",
			"skip_pr_sweep": true, "decision": "skip"})
	}))
	t.Cleanup(elsewhere.Close)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/api/v1/gate", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"repo": theRepo, "pr": thePR, "sha": sha("c9"), "event": "pull_request",
			"skip_pr_sweep": true, "decision": "skip"})
	}))
	t.Cleanup(other.Close)
	for name, tc := range map[string]struct{ server, why string }{
		"redirect":                  {redirect.URL, "does not follow"},
		"answer for another commit": {other.URL, "answered for commit"},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), []string{"gate", "--server", tc.server, "--repo", theRepo, "--pr", "2512", "--sha", sha("c2"),
				"--github-output", out}, func(k string) string {
				if k == "OPSBOT_API_TOKEN" {
					return apiToken
				}
				return ""
			}, strings.NewReader(""), &stdout, &stderr)
			if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(stdout.String(), "::error::") {
				t.Fatalf("opsbot gate: %v, want a failed step (exit 1, ::error::)\n%s", err, stdout.String())
			}
			raw, _ := os.ReadFile(out)
			if !strings.Contains(string(raw), "skip-pr-sweep=false") || !strings.Contains(stdout.String(), tc.why) {
				t.Fatalf("outputs %q, stdout %q: want a sweep saying %q", raw, stdout.String(), tc.why)
			}
		})
	}
	if b, _ := bearerElsewhere.Load().(string); b != "" {
		t.Fatalf("the bearer followed the redirect: %q", b)
	}
}

// gateStep is one run of `opsbot gate` as a workflow step runs it.
type gateStep struct {
	err            error
	stdout, stderr string
	outputs        map[string]string
}

func (s gateStep) failed() bool {
	code, ok := s.err.(exitCode)
	return ok && code == 1
}

func runGateStep(t *testing.T, token string, args ...string) gateStep {
	t.Helper()
	out := filepath.Join(t.TempDir(), "github_output")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), append([]string{"gate", "--github-output", out}, args...), func(k string) string {
		if k == "OPSBOT_API_TOKEN" {
			return token
		}
		return ""
	}, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		if code, ok := err.(exitCode); !ok || code != 1 {
			t.Fatalf("opsbot gate %v: %v (want exit 0, or 1 for a failed step)", args, err)
		}
	}
	s := gateStep{err: err, stdout: stdout.String(), stderr: stderr.String(), outputs: map[string]string{}}
	if s.failed() != strings.Contains(s.stdout, "::error::") {
		t.Fatalf("the step failed %v, but its log says ::error:: %v\n%s", s.failed(), !s.failed(), s.stdout)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no step outputs: %v\n%s", err, s.stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		s.outputs[k] = v
	}
	if len(s.outputs) != 8 {
		t.Fatalf("outputs %v, want the eight", s.outputs)
	}
	return s
}

// `opsbot gate` is the same ask as the gate action: an ask the server
// refused, or a step set up wrong, fails the step with an ::error:: (the
// outputs still say sweep), and only a server that did not answer warns.
func TestGateCLIRefusalFailsTheStep(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, "  gate_tokens_env: TEST_GATE_TOKENS\n  admin_tokens_env: TEST_ADMIN_TOKENS\n", "",
		map[string]string{"TEST_GATE_TOKENS": "gate-token-1-0123", "TEST_ADMIN_TOKENS": "admin-token-01234"})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	ask := []string{"--server", w.Srv.URL, "--repo", theRepo, "--pr", "2512", "--sha", sha("c1")}
	for _, tc := range []struct {
		name, token string
		args        []string
		why         string
	}{
		{"wrong token (401)", "nope-not-a-token", ask, "HTTP 401|401 Unauthorized|not one of the server's gate tokens"},
		{"admin token (403)", "admin-token-01234", ask, "403 Forbidden|this is an admin token"},
		{"short SHA (400)", "gate-token-1-0123", []string{"--server", w.Srv.URL, "--repo", theRepo, "--pr", "2512", "--sha", "c1c1c1c"}, "400 Bad Request"},
		{"no --repo", "gate-token-1-0123", []string{"--server", w.Srv.URL, "--pr", "2512", "--sha", sha("c1")}, "--repo OWNER/REPO is required"},
		{"no --pr", "gate-token-1-0123", []string{"--server", w.Srv.URL, "--repo", theRepo, "--sha", sha("c1")}, "--pr N is required"},
		{"no --server", "gate-token-1-0123", []string{"--repo", theRepo, "--pr", "2512", "--sha", sha("c1")}, "--server URL is required"},
		{"a flag it does not know", "gate-token-1-0123", append([]string{"--bogus"}, ask...), "flags are wrong"},
		{"another event", "gate-token-1-0123", append([]string{"--event", "issue_comment"}, ask...), "answers pull_request, push and merge_group"},
		{"a merge group without its ref", "gate-token-1-0123", append([]string{"--event", "merge_group"}, ask...), "--ref is required for a merge_group event"},
		{"no token", "", ask, "OPSBOT_API_TOKEN is not set"},
		{"plain http elsewhere", "gate-token-1-0123", []string{"--server", "http://opsbot.example.com", "--repo", theRepo, "--pr", "2512",
			"--sha", sha("c1")}, "is not an https:// URL"},
		{"a user hiding another host", "gate-token-1-0123", []string{"--server", strings.Replace(w.Srv.URL, "http://", "http://127.0.0.1:443@", 1),
			"--repo", theRepo, "--pr", "2512", "--sha", sha("c1")}, "names a user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runGateStep(t, tc.token, tc.args...)
			if !s.failed() || s.outputs["skip-pr-sweep"] != "false" || s.outputs["reuse-enabled"] != "false" {
				t.Fatalf("failed %v, outputs %v\n%s", s.failed(), s.outputs, s.stdout)
			}
			found := false
			for _, why := range strings.Split(tc.why, "|") {
				found = found || strings.Contains(s.stdout, why)
			}
			if !strings.Contains(s.stdout, "::error::opsbot gate was refused, so the sweep runs") || !found {
				t.Fatalf("the error does not say %q:\n%s", tc.why, s.stdout)
			}
			if strings.Contains(s.stdout, "::warning::") {
				t.Fatalf("a refusal warned too:\n%s", s.stdout)
			}
		})
	}
	// The same ask with the gate token decides, and warns of nothing.
	s := runGateStep(t, "gate-token-1-0123", ask...)
	if s.failed() || s.outputs["skip-pr-sweep"] != "false" || strings.Contains(s.stdout, "::") {
		t.Fatalf("a decision: failed %v, outputs %v\n%s", s.failed(), s.outputs, s.stdout)
	}
}

// A server that does not answer (no connection, a 5xx, a 429) is asked
// again until the timeout; then the step warns and passes (fails with
// --strict), the outputs saying sweep. A push that names no commit (a
// deleted branch) warns the same.
func TestGateCLITransientFailureWarns(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var asks atomic.Int32
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asks.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"slow down"}`, http.StatusTooManyRequests)
	}))
	t.Cleanup(busy.Close)
	ask := func(server string, extra ...string) []string {
		return append([]string{"--server", server, "--repo", theRepo, "--pr", "2512", "--sha", sha("c1"), "--timeout", "1500ms"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		why  string
	}{
		{"server down", ask(down), "gave up after"},
		{"429 until the timeout", ask(busy.URL), "429 Too Many Requests"},
		{"deleted branch", []string{"--server", down, "--repo", theRepo, "--event", "push", "--sha", strings.Repeat("0", 40)}, "names no commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runGateStep(t, "gate-token", tc.args...)
			if s.failed() || s.outputs["skip-pr-sweep"] != "false" ||
				!strings.Contains(s.stdout, "::warning::opsbot gate could not get a decision, so the sweep runs") || !strings.Contains(s.stdout, tc.why) {
				t.Fatalf("failed %v, outputs %v\n%s", s.failed(), s.outputs, s.stdout)
			}
			s = runGateStep(t, "gate-token", append(tc.args, "--strict")...)
			if !s.failed() || s.outputs["skip-pr-sweep"] != "false" || !strings.Contains(s.stdout, tc.why) {
				t.Fatalf("--strict: failed %v, outputs %v\n%s", s.failed(), s.outputs, s.stdout)
			}
		})
	}
	if asks.Load() < 2 {
		t.Fatalf("the busy server was asked %d times: a 429 is asked again", asks.Load())
	}
}

// The bearer goes over plain http only to this machine.
func TestGateServerTransport(t *testing.T) {
	t.Parallel()
	for server, ok := range map[string]bool{
		"https://opsbot.example.com": true, "https://opsbot.example.com:8443/": true,
		"http://127.0.0.1:8080": true, "http://127.9.0.1": true, "http://localhost:8080": true, "http://[::1]:8080": true,
		"http://opsbot.example.com": false, "http://10.0.0.1:8080": false, "http://localhost.example.com": false,
		"http://[::ffff:10.0.0.1]": false, "ftp://127.0.0.1": false, "https://": false, "127.0.0.1:8080": false,
		"https://me@opsbot.example.com": false, "http://127.0.0.1:1@opsbot.example.com": false,
	} {
		if err := checkGateServer(server); (err == nil) != ok {
			t.Errorf("checkGateServer(%q) = %v, want ok %v", server, err, ok)
		}
	}
}

// `opsbot gate --event merge_group --ref REF` asks for the queue's group
// as the workflow does: the group of exactly the pinned head skips its
// sweep on the pinned run, through the CLI's own flags and outputs.
func TestGateCLIAsksForAMergeGroup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml")
	ref := w.GH.MergeGroup(theRepo, thePR, sha("f1"), true)
	out, _ := w.gate("--event", "merge_group", "--ref", ref, "--sha", sha("f1"))
	if out["skip-pr-sweep"] != "true" || out["reuse-source-run-id"] != "31147925932" || out["reuse-source-pr-number"] != "2512" {
		t.Fatalf("opsbot gate for the group of c2 = %v", out)
	}
}
