package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update
)

const testSecret = e2e.Secret

// testServer is opsbot serving in-process on a free port.
type testServer = e2e.Server

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

func testEnv(extra map[string]string) func(string) string { return e2e.TestEnv(extra) }

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
	ts.WaitReady(t)
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
	dir := filepath.Dir(configPath)
	return e2e.Launch(t, dir, filepath.Join(dir, "opsbot.db"), func(ctx context.Context, stdout, stderr io.Writer) error {
		e := &env{ctx: ctx, getenv: getenv, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, deps: deps}
		return runEnv(e, append([]string{"serve", "--config", configPath}, args...))
	})
}
