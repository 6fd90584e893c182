package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// TestAppBuiltApartFromFlags builds the server with newApp from a
// configuration (no flags, no run), serves a comment and a push, and checks
// the reply and that the push's installation is remembered in the database
// with the delivery.
func TestAppBuiltApartFromFlags(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddRepo(theRepo, "run-sweep.yml", 77)
	gh.AddUser(maintLog, maintID, "User")
	gh.SetRole(theRepo, maintLog, "write")
	gh.AddPR(theRepo, thePR, "author", "kimi-tune", sha("b0"), []string{sha("c1")}, []string{"benchmarks/kimi.sh"})
	dir := t.TempDir()
	path := filepath.Join(dir, "opsbot.yaml")
	yaml := fmt.Sprintf(`state_path: %q
github:
  api_url: %q
  token_env: "TEST_GITHUB_TOKEN"
  webhook_secret_env: "TEST_WEBHOOK_SECRET"
repos:
  - name: %q
    sweep_workflow: ".github/workflows/run-sweep.yml"
`, filepath.Join(dir, "opsbot.db"), gh.URL, theRepo)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := cfg.ResolveSecrets(testEnv(map[string]string{"TEST_GITHUB_TOKEN": "ghs_test"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, cfg, app.Deps{Log: slog.New(slog.DiscardHandler), Secrets: secrets})
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	defer a.Close()
	if err := a.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Stop()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/webhook"
	send := func(event, id string, p map[string]any) {
		t.Helper()
		body, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if code, rep := post(t, fixtures.SignedRequest(t, url, event, id, body, testSecret)); code != 202 {
			t.Fatalf("webhook %s: %d %v", event, code, rep)
		}
	}

	c := gh.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/" + strconv.Itoa(thePR)})
	setPath(p, "comment.id", c.ID)
	setPath(p, "comment.body", c.Body)
	setPath(p, "comment.user", user{Login: maintLog, ID: maintID}.JSON())
	p["sender"] = user{Login: maintLog, ID: maintID}.JSON()
	send("issue_comment", "app-1", p)
	testkit.Eventually(t, "opsbot replies to /opsbot help", func() bool {
		for _, r := range gh.Comments(theRepo, thePR) {
			if r.ID != c.ID && strings.Contains(r.Body, "here is what opsbot does") {
				return true
			}
		}
		return false
	})

	pr := payload(t, "pull_request", "labeled")
	setPath(pr, "repository.full_name", theRepo)
	pr["number"] = thePR
	setPath(pr, "pull_request.number", thePR)
	pr["installation"] = map[string]any{"id": 4242}
	send("pull_request", "app-2", pr)
	testkit.Eventually(t, "the push's installation is recorded in the database", func() bool {
		id, err := a.Store().RepoInstallation(theRepo)
		return err == nil && id == 4242
	})
	if got, want := a.Clients().Installation(theRepo), int64(4242); got != want {
		t.Fatalf("Installation(%s) = %d, want %d", theRepo, got, want)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
