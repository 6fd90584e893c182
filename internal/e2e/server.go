// Package e2e is the end-to-end test world: one benchmark repository on
// the fake GitHub (internal/githubtest) and opsbot serving it in-process
// (app.Run), with what a test needs to act as GitHub and its people and to
// read what opsbot did: the replies on the PR, the statuses, the audit. A
// command's end-to-end tests use it from the command's own package; the
// server's, from cmd/opsbot. It is test machinery: the server binary never
// links it (TestBinaryLinksNoTestMachinery).
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// Secret is the webhook secret of every world.
const Secret = "test-webhook-secret"

// Server is opsbot serving in-process on a free port.
type Server struct {
	URL    string
	Dir    string
	DB     string
	Stderr *testkit.SyncBuffer
	cancel context.CancelFunc
	done   chan error
}

// Launch runs serve (opsbot's serve, by the CLI or by app.Run) in-process
// with a context that Stop cancels, and waits until it says where it
// serves ("opsbot serving on URL" on stdout) and /healthz answers: the
// server takes webhooks, and may not be ready to process them.
func Launch(t testing.TB, dir, db string, serve func(ctx context.Context, stdout, stderr io.Writer) error) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &Server{Dir: dir, DB: db, cancel: cancel, done: make(chan error, 1), Stderr: &testkit.SyncBuffer{}}
	go func() {
		err := serve(ctx, pw, s.Stderr)
		pw.Close()
		s.done <- err
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
			err := <-s.done
			t.Fatalf("server did not start: %v\n%s", err, s.Stderr.String())
		}
		s.URL = u
	case <-testkit.Expired(t):
		cancel()
		t.Fatalf("server did not start\n%s", s.Stderr.String())
	}
	t.Cleanup(func() { s.Stop(t) })
	resp, err := http.Get(s.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	return s
}

// WaitReady waits until the server is ready (/readyz: it knows its own
// GitHub account and its workers run), or, for a server without GitHub
// credentials (a dry run), until its workers run: it answers 503, saying
// it has no credentials, and processes what it is sent.
func (s *Server) WaitReady(t testing.TB) {
	t.Helper()
	testkit.Eventually(t, "the server is ready", func() bool {
		resp, err := http.Get(s.URL + "/readyz")
		if err != nil {
			t.Fatalf("/readyz: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK ||
			(resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "github: no credentials"))
	})
}

// Stop shuts the server down as SIGTERM would and waits for it to return.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("serve returned %v\n%s", err, s.Stderr.String())
		}
	case <-testkit.Expired(t):
		t.Errorf("server did not stop")
	}
}

// Start serves the configuration at path in-process through app.Run, as
// `opsbot serve --config path` does (the configuration read and checked,
// the secrets from getenv), with the server's dependencies adjusted by
// deps (a clock the test moves), and waits until it is ready.
func Start(t testing.TB, path string, getenv func(string) string, deps func(*app.Deps)) *Server {
	t.Helper()
	var probe app.Deps // the test's own commands' sections are registered before the load
	if deps != nil {
		deps(&probe)
	}
	app.RegisterSections(probe.Modules...)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the test's configuration: %v", err)
	}
	secrets, probs := app.Preflight(cfg, getenv)
	if len(probs) > 0 {
		t.Fatalf("the test's configuration: %v", probs)
	}
	s := Launch(t, filepath.Dir(path), cfg.StatePath, func(ctx context.Context, stdout, stderr io.Writer) error {
		d := app.Deps{Log: slog.New(slog.NewJSONHandler(stderr, nil)), Secrets: secrets, Version: "test"}
		if deps != nil {
			deps(&d)
		}
		return app.Run(ctx, cfg, d, app.RunOptions{File: path, Stdout: stdout})
	})
	s.WaitReady(t)
	return s
}

// TestEnv is the environment of a world's server: the webhook secret, the
// API tokens and extra.
func TestEnv(extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		switch k {
		case "TEST_WEBHOOK_SECRET":
			return Secret
		case "TEST_API_TOKENS":
			return APIToken
		}
		return ""
	}
}

// Post sends a request and reads its JSON answer.
func Post(t testing.TB, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body
}
