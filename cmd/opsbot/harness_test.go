package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

const testSecret = "test-webhook-secret"

// testServer is opsbot's run() serving in-process on a free port.
type testServer struct {
	URL    string
	Dir    string
	DB     string
	cancel context.CancelFunc
	done   chan error
	stderr *testkit.SyncBuffer
}

// writeConfig writes a configuration for tests into dir; extra YAML is
// appended at the top level.
func writeConfig(t *testing.T, dir string, extra string) string {
	t.Helper()
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
state_path: %q
github:
  api_url: "http://127.0.0.1:1/"
  token_env: "TEST_GITHUB_TOKEN"
  webhook_secret_env: "TEST_WEBHOOK_SECRET"
api:
  tokens_env: "TEST_API_TOKENS"
repos:
  - name: "Codertocat/Hello-World"
    sweep_workflow: ".github/workflows/run-sweep.yml"
  - name: "octo-org/octo-repo"
    sweep_workflow: ".github/workflows/run-sweep.yml"
%s`, filepath.Join(dir, "opsbot.db"), extra)
	path := filepath.Join(dir, "opsbot.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testEnv(extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		switch k {
		case "TEST_WEBHOOK_SECRET":
			return testSecret
		case "TEST_API_TOKENS":
			return apiToken
		}
		return ""
	}
}

// startServer runs `opsbot serve` in-process and waits until it is ready
// (/readyz: it knows its own GitHub account and its workers run).
func startServer(t *testing.T, configPath string, getenv func(string) string, args ...string) *testServer {
	t.Helper()
	return startServerWith(t, configPath, getenv, nil, args...)
}

// startServerWith is startServer with the server's dependencies adjusted
// by deps (a clock the test moves).
func startServerWith(t *testing.T, configPath string, getenv func(string) string, deps func(*app.Deps), args ...string) *testServer {
	t.Helper()
	ts := startServingWith(t, configPath, getenv, deps, args...)
	testkit.Eventually(t, "the server is ready", func() bool {
		resp, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return ts
}

// startServing runs `opsbot serve` in-process and waits for /healthz only:
// the server takes webhooks, and may not be ready to process them.
func startServing(t *testing.T, configPath string, getenv func(string) string, args ...string) *testServer {
	t.Helper()
	return startServingWith(t, configPath, getenv, nil, args...)
}

func startServingWith(t *testing.T, configPath string, getenv func(string) string, deps func(*app.Deps), args ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	ts := &testServer{Dir: filepath.Dir(configPath), DB: filepath.Join(filepath.Dir(configPath), "opsbot.db"),
		cancel: cancel, done: make(chan error, 1), stderr: &testkit.SyncBuffer{}}
	go func() {
		e := &env{ctx: ctx, getenv: getenv, stdin: strings.NewReader(""), stdout: pw, stderr: ts.stderr, deps: deps}
		err := runEnv(e, append([]string{"serve", "--config", configPath}, args...))
		pw.Close()
		ts.done <- err
	}()
	lines := bufio.NewScanner(pr)
	found := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if u, ok := strings.CutPrefix(lines.Text(), "opsbot serving on "); ok {
				found <- u
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			err := <-ts.done
			t.Fatalf("server did not start: %v\n%s", err, ts.stderr.String())
		}
		ts.URL = u
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("server did not start in 10s\n%s", ts.stderr.String())
	}
	t.Cleanup(func() { ts.Stop(t) })
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	return ts
}

// Stop shuts the server down as SIGTERM would and waits for run to return.
func (ts *testServer) Stop(t *testing.T) {
	t.Helper()
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	select {
	case err := <-ts.done:
		if err != nil {
			t.Errorf("run returned %v\n%s", err, ts.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("server did not stop in 20s")
	}
}
