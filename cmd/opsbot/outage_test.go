package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// steppedWait is a wait the test releases by hand: each call is announced
// on asked (with the duration asked), then waits for release.
type steppedWait struct {
	asked   chan time.Duration
	release chan struct{}
}

func newSteppedWait() *steppedWait {
	return &steppedWait{asked: make(chan time.Duration), release: make(chan struct{})}
}

func (s *steppedWait) wait(ctx context.Context, d time.Duration) error {
	select {
	case s.asked <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits until opsbot has failed a try and waits to try again.
func (s *steppedWait) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-s.asked:
		return d
	case <-testkit.Expired(t):
		t.Fatal("opsbot did not wait to try GitHub again")
		return 0
	}
}

// get answers a GET (or, with a body, a POST) with the API token.
func apiCall(t *testing.T, method, url, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

// With a token and GitHub down, opsbot starts anyway: it takes and stores a
// delivery (202), answers /healthz, says on /readyz why it is not ready,
// answers the gate and reconcile 503 (nothing decided), processes nothing,
// and asks GitHub again with growing waits; once GitHub answers, the
// command stored meanwhile is processed and answered.
func TestStartsAndStoresWhileGitHubIsDown(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddRepo(theRepo, "run-sweep.yml", 77)
	gh.AddUser(maintLog, maintID, "User")
	gh.SetRole(theRepo, maintLog, "write")
	gh.AddPR(theRepo, thePR, "author", "kimi-tune", sha("b0"), []string{sha("c1")}, []string{"benchmarks/kimi.sh"})
	gh.Inject("GET /user", githubtest.Fault{Status: http.StatusServiceUnavailable}) // every try, until healed
	dir := t.TempDir()
	path := filepath.Join(dir, "opsbot.yaml")
	yaml := fmt.Sprintf(`state_path: %q
github:
  api_url: %q
  token_env: "TEST_GITHUB_TOKEN"
  webhook_secret_env: "TEST_WEBHOOK_SECRET"
api:
  tokens_env: "TEST_API_TOKENS"
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
	waits := newSteppedWait()
	var logs testkit.SyncBuffer
	a, err := app.New(ctx, cfg, app.Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil)), Secrets: secrets, Wait: waits.wait,
		GitHub: func(o *ghclient.Options) { o.MaxTries = 1 }}) // one request a try: the test steps the tries
	if err != nil {
		t.Fatalf("newApp with GitHub down: %v", err)
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
	base := "http://" + ln.Addr().String()

	first := waits.next(t) // the first try failed
	if first <= 0 || first > 2*time.Second {
		t.Fatalf("first wait %s, want about a second", first)
	}

	// A maintainer's command, sent while GitHub is down: taken and stored.
	c := gh.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/" + strconv.Itoa(thePR)})
	setPath(p, "comment.id", c.ID)
	setPath(p, "comment.body", c.Body)
	setPath(p, "comment.user", user{Login: maintLog, ID: maintID}.JSON())
	p["sender"] = user{Login: maintLog, ID: maintID}.JSON()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if code, rep := post(t, fixtures.SignedRequest(t, base+"/webhook", "issue_comment", "outage-1", body, testSecret)); code != http.StatusAccepted {
		t.Fatalf("a delivery while GitHub is down: %d %v, want 202", code, rep)
	}
	if st, err := a.Store().InboxStats(); err != nil || st.Depth != 1 {
		t.Fatalf("inbox while GitHub is down: %+v, %v; want the delivery stored", st, err)
	}

	if code, _, _ := apiCall(t, http.MethodGet, base+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz while GitHub is down: %d", code)
	}
	code, ready, _ := apiCall(t, http.MethodGet, base+"/readyz", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while GitHub is down: %d %s", code, ready)
	}
	mustContain(t, "/readyz", ready, "cannot learn opsbot's own GitHub account", "try 1 failed", "GET /user", "503",
		"$TEST_GITHUB_TOKEN", "webhooks are stored")
	ask := fmt.Sprintf(`{"repo":%q,"pr":%d,"sha":%q}`, theRepo, thePR, sha("c1"))
	code, answer, h := apiCall(t, http.MethodPost, base+"/api/v1/gate", ask)
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("a gate ask while opsbot does not know itself: %d %s, want 503 with Retry-After", code, answer)
	}
	mustContain(t, "the gate's answer", answer, "not ready", "nothing was decided")
	if code, answer, _ := apiCall(t, http.MethodPost, base+"/api/v1/reconcile", fmt.Sprintf(`{"repo":%q}`, theRepo)); code != http.StatusServiceUnavailable {
		t.Fatalf("a reconcile while opsbot does not know itself: %d %s, want 503", code, answer)
	}

	// It tries again, waiting longer; still down.
	waits.release <- struct{}{}
	second := waits.next(t)
	if n := gh.Count("GET /user"); n != 2 {
		t.Fatalf("GET /user asked %d times after two tries", n)
	}
	if second <= 0 {
		t.Fatalf("second wait %s", second)
	}
	if _, ready, _ := apiCall(t, http.MethodGet, base+"/readyz", ""); !strings.Contains(ready, "try 2 failed") {
		t.Fatalf("/readyz after the second try: %s", ready)
	}
	for _, r := range gh.Comments(theRepo, thePR) {
		if r.ID != c.ID {
			t.Fatalf("opsbot answered before it knew its own account: %q", r.Body)
		}
	}
	if n := gh.Count("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"); n != 0 {
		t.Fatalf("opsbot reacted %d times before it knew its own account", n)
	}
	if st, _ := a.Store().InboxStats(); st.Depth != 1 {
		t.Fatalf("inbox depth %d before GitHub answers, want the delivery still waiting", st.Depth)
	}

	// GitHub answers: the stored command is processed and answered.
	gh.Heal("GET /user")
	waits.release <- struct{}{}
	testkit.Eventually(t, "opsbot answers the command stored while GitHub was down", func() bool {
		for _, r := range gh.Comments(theRepo, thePR) {
			if r.ID != c.ID && strings.Contains(r.Body, "here is what opsbot does") {
				return true
			}
		}
		return false
	})
	if code, ready, _ := apiCall(t, http.MethodGet, base+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz once GitHub answered: %d %s", code, ready)
	}
	mustContain(t, "the log", logs.String(), "cannot learn opsbot's own GitHub account", "opsbot knows its own GitHub account")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// `opsbot serve` with a token GitHub refuses starts anyway (a crash loop
// would refuse every webhook): it takes deliveries, and /readyz says what
// to check; in a dry run without credentials it is ready at once.
func TestServeStartsWithoutKnowingItself(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Srv.Stop(t)
	w.GH.Inject("GET /user", githubtest.Fault{Status: 401, Body: `{"message":"Bad credentials"}`})
	ts := startServing(t, filepath.Join(w.Dir, "opsbot.yaml"), w.Env)
	var ready string
	testkit.Eventually(t, "/readyz says why opsbot is not ready", func() bool {
		code, body, _ := apiCall(t, http.MethodGet, ts.URL+"/readyz", "")
		ready = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, "try 1 failed")
	})
	mustContain(t, "/readyz", ready, "cannot learn opsbot's own GitHub account", "Bad credentials", "check the token in $TEST_GITHUB_TOKEN (GET /user)")
	body := fixtures.Webhook(t, "pull_request", "synchronize")
	if code, _ := post(t, fixtures.SignedRequest(t, ts.URL+"/webhook", "pull_request", "unready-1", body, testSecret)); code != http.StatusAccepted {
		t.Fatalf("a delivery while opsbot does not know itself: %d, want 202", code)
	}
	ts.Stop(t) // stops cleanly, the delivery left in the inbox

	noToken := func(k string) string {
		if k == "TEST_GITHUB_TOKEN" {
			return ""
		}
		return w.Env(k)
	}
	startServer(t, filepath.Join(w.Dir, "opsbot.yaml"), noToken, "--dry-run")
}
