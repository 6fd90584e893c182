package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// appFlow is one `opsbot github app-create` running through run(), and a
// browser: it opens the page the command prints, posts the form to the fake
// GitHub and follows GitHub's redirect back.
type appFlow struct {
	t      *testing.T
	gh     *githubtest.Fake
	page   string // the loopback URL the command printed, with its token
	base   string // the loopback server's root
	done   chan error
	cancel context.CancelFunc

	mu             sync.Mutex
	stdout, stderr strings.Builder
	browser        *http.Client
}

func startAppCreate(t *testing.T, gh *githubtest.Fake, args ...string) *appFlow {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	f := &appFlow{t: t, gh: gh, done: make(chan error, 1), cancel: cancel,
		browser: &http.Client{Jar: newJar(t), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	pr, pw := io.Pipe()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			f.mu.Lock()
			f.stdout.WriteString(line + "\n")
			f.mu.Unlock()
			if m := regexp.MustCompile(`^Open (http://127\.0\.0\.1:\d+/\?t=[0-9a-f]{64}) `).FindStringSubmatch(line); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		if !sent {
			close(urls)
		}
	}()
	go func() {
		err := run(ctx, append([]string{"github", "app-create"}, args...), func(string) string { return "" },
			strings.NewReader(""), pw, lockedWriter{f})
		pw.Close()
		f.done <- err
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			err := <-f.done
			t.Fatalf("app-create printed no page to open: %v\nstdout:\n%s\nstderr:\n%s", err, f.out(), f.errOut())
		}
		f.page = u
		f.base = u[:strings.Index(u, "?")]
	case err := <-f.done:
		t.Fatalf("app-create ended before printing a page: %v\nstderr:\n%s", err, f.errOut())
	}
	t.Cleanup(cancel)
	return f
}

type lockedWriter struct{ f *appFlow }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.stderr.Write(p)
}

func (f *appFlow) out() string    { f.mu.Lock(); defer f.mu.Unlock(); return f.stdout.String() }
func (f *appFlow) errOut() string { f.mu.Lock(); defer f.mu.Unlock(); return f.stderr.String() }

// wait is the command's result, once it has returned.
func (f *appFlow) wait() error {
	f.t.Helper()
	return <-f.done
}

// get fetches a URL as the browser does and returns the status and body.
func (f *appFlow) get(u string) (int, string) {
	f.t.Helper()
	resp, err := f.browser.Get(u)
	if err != nil {
		f.t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit opens the page and posts its form to GitHub as the browser does,
// and returns where GitHub sends the browser back to.
func (f *appFlow) submit() *url.URL {
	f.t.Helper()
	code, body := f.get(f.page)
	if code != http.StatusOK {
		f.t.Fatalf("the page answered %d:\n%s", code, body)
	}
	action := regexp.MustCompile(`<form method="post" action="([^"]+)">`).FindStringSubmatch(body)
	manifest := regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]+)">`).FindStringSubmatch(body)
	if action == nil || manifest == nil {
		f.t.Fatalf("the page has no form posting a manifest:\n%s", body)
	}
	resp, err := f.browser.PostForm(html.UnescapeString(action[1]), url.Values{"manifest": {html.UnescapeString(manifest[1])}})
	if err != nil {
		f.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("GitHub's form answered %d: %s", resp.StatusCode, b)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		f.t.Fatal(err)
	}
	return back
}

const conversions = "POST /app-manifests/{code}/conversions"

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	j, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// `opsbot github app-create` runs GitHub's manifest flow end to end: the
// page posts opsbot's manifest to the organization's "new App" form with a
// state, GitHub's redirect comes back to the loopback server, a redirect
// without this run's state is refused and its code never used, the code is
// exchanged once at the API, and the key, the webhook secret (both 0600) and
// a configuration snippet with the App's id are written; the snippet is a
// configuration opsbot loads, with the key and secret read from those files.
func TestAppCreateRunsTheManifestFlow(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	out := filepath.Join(t.TempDir(), "github")
	f := startAppCreate(t, gh, "--url", "https://opsbot.example.com", "--org", "acme", "--out", out, "--staging",
		"--github-url", gh.URL, "--api-url", gh.URL)
	back := f.submit()

	apps := gh.ManifestApps()
	if len(apps) != 1 {
		t.Fatalf("GitHub registered %d Apps, want 1", len(apps))
	}
	app := apps[0]
	m := app.Manifest
	perms, _ := json.Marshal(m["default_permissions"])
	if got, want := app.Name, "opsbot-acme"; got != want {
		t.Errorf("the App's default name = %q, want %q (the owner in it)", got, want)
	}
	if app.Owner != "acme" || app.OwnerType != "Organization" {
		t.Errorf("owner = %s %s, want the organization acme", app.OwnerType, app.Owner)
	}
	if m["redirect_url"] != strings.TrimSuffix(f.base, "/")+"/callback" || m["url"] != "https://opsbot.example.com" ||
		m["hook_attributes"].(map[string]any)["url"] != "https://opsbot.example.com/webhook" || m["public"] != false ||
		!strings.Contains(string(perms), `"contents":"write"`) || !strings.Contains(string(perms), `"statuses":"write"`) {
		t.Errorf("the manifest GitHub received = %v", m)
	}
	if len(app.State) < 32 || back.Query().Get("state") != app.State {
		t.Fatalf("state %q in the form, %q in the redirect", app.State, back.Query().Get("state"))
	}

	// A redirect with a wrong or no state is refused, its code unused.
	for _, st := range []string{"", "wrong", app.State + "x"} {
		bad := *back
		q := bad.Query()
		if st == "" {
			q.Del("state")
		} else {
			q.Set("state", st)
		}
		bad.RawQuery = q.Encode()
		if code, body := f.get(bad.String()); code != http.StatusBadRequest || !strings.Contains(body, "state") {
			t.Errorf("a redirect with state %q answered %d:\n%s", st, code, body)
		}
	}
	if n := gh.Count(conversions); n != 0 {
		t.Fatalf("%d conversions after redirects without this run's state, want 0", n)
	}
	mustContain(t, "stderr", f.errOut(), "refused a redirect whose state is not this run's")

	// Another client on this machine, which did not open the printed URL,
	// gets neither the page (and the state in it) nor the redirect taken.
	stranger := &http.Client{Jar: newJar(t), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, u := range []string{f.base, f.base + "?t=" + strings.Repeat("0", 64), back.String()} {
		resp, err := stranger.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(b), app.State) {
			t.Fatalf("a client that did not open the printed URL got %s: %d\n%s", u, resp.StatusCode, b)
		}
	}
	if n := gh.Count(conversions); n != 0 {
		t.Fatalf("%d conversions after a stranger's redirect, want 0", n)
	}

	code, body := f.get(back.String())
	if code != http.StatusOK || !strings.Contains(body, "Created") {
		t.Fatalf("the redirect answered %d:\n%s", code, body)
	}
	if err := f.wait(); err != nil {
		t.Fatalf("app-create: %v\n%s", err, f.errOut())
	}
	if n := gh.Count(conversions); n != 1 {
		t.Fatalf("%d conversions, want 1", n)
	}
	app = gh.ManifestApps()[0]

	for _, c := range []struct {
		file, want string
		mode       os.FileMode
	}{
		{appKeyFile, app.PEM, 0o600},
		{appSecretFile, app.WebhookSecret + "\n", 0o600},
	} {
		p := filepath.Join(out, c.file)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s has mode %v, want %v", c.file, got, c.mode)
		}
		if b, _ := os.ReadFile(p); string(b) != c.want {
			t.Errorf("%s = %q, want what GitHub handed over", c.file, b)
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("--out made with %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	for _, e := range []string{filepath.Join(out, appKeyFile), filepath.Join(out, appSecretFile), filepath.Join(out, appSnippetFile),
		"Created the GitHub App opsbot-acme", app.Slug + "/installations/new", "OPSBOT_WEBHOOK_SECRET_FILE=" + filepath.Join(out, appSecretFile),
		"opsbot config check", "client secret"} {
		mustContain(t, "stdout", f.out(), e)
	}
	snippet, err := os.ReadFile(filepath.Join(out, appSnippetFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(snippet), app.ClientSecret) {
		t.Errorf("the snippet holds the client secret")
	}

	// The snippet, with a repository, is a configuration opsbot loads:
	// the App's id, and the key and the webhook secret read from the files.
	cfgFile := filepath.Join(t.TempDir(), "opsbot.yaml")
	cfgText := string(snippet) + "repos:\n  - name: acme/bench\n    sweep_workflow: .github/workflows/run-sweep.yml\n"
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatalf("the snippet does not load: %v\n%s", err, cfgText)
	}
	if cfg.GitHub.App == nil || cfg.GitHub.App.ID != app.ID || cfg.GitHub.APIURL != gh.URL {
		t.Fatalf("github = %+v (app %+v), want App %d at %s", cfg.GitHub, cfg.GitHub.App, app.ID, gh.URL)
	}
	env := map[string]string{"OPSBOT_WEBHOOK_SECRET_FILE": filepath.Join(out, appSecretFile)}
	sec, err := cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("secrets: %v", err)
	}
	if string(sec.AppPrivateKey) != app.PEM || len(sec.WebhookSecrets) != 1 || sec.WebhookSecrets[0].Reveal() != app.WebhookSecret {
		t.Fatalf("the configuration reads another key or webhook secret than GitHub handed over")
	}
}

// A name GitHub refuses as taken (the conversion answering 422 "Name is
// already in use") is a clear error naming the flag to change, and
// nothing is written.
func TestAppCreateNameTaken(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	out := t.TempDir()
	f := startAppCreate(t, gh, "--url", "https://opsbot.example.com", "--name", "opsbot-alice", "--out", out,
		"--github-url", gh.URL, "--api-url", gh.URL)
	back := f.submit()
	if app := gh.ManifestApps()[0]; app.OwnerType != "User" || app.Name != "opsbot-alice" {
		t.Fatalf("App = %+v, want opsbot-alice of the signed-in user", app)
	}
	gh.TakeAppName("opsbot-alice") // taken by someone else meanwhile
	code, body := f.get(back.String())
	err := f.wait()
	if !errors.Is(err, errAppNameTaken) || !strings.Contains(err.Error(), `"opsbot-alice"`) || !strings.Contains(err.Error(), "--name") {
		t.Fatalf("app-create = %v, want the name refused, naming --name", err)
	}
	if code != http.StatusBadGateway || !strings.Contains(body, "already in use") {
		t.Errorf("the browser was answered %d:\n%s", code, body)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("wrote %v after a refusal", entries)
	}
}

// Stopping (Ctrl-C) or the --timeout ends the command cleanly, with
// nothing written and the loopback server closed.
func TestAppCreateStops(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	out := t.TempDir()
	f := startAppCreate(t, gh, "--url", "https://opsbot.example.com", "--org", "acme", "--out", out)
	f.cancel()
	if err := f.wait(); err == nil || !strings.Contains(err.Error(), "stopped before GitHub sent the browser back") {
		t.Fatalf("after Ctrl-C: %v", err)
	}
	if _, err := http.Get(f.base); err == nil {
		t.Errorf("the page is still served after the command returned")
	}
	_, _, err := runCLI(t, nil, "github", "app-create", "--url", "https://opsbot.example.com", "--org", "acme", "--out", out, "--timeout", "1ns")
	if err == nil || !strings.Contains(err.Error(), "did not send the browser back within 1ns") {
		t.Fatalf("--timeout: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
}

// Bad flags are refused before anything is served or created: an App's
// name is unique across GitHub, so one without an owner in it must be
// chosen; files already in --out are never overwritten.
func TestAppCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, appKeyFile), []byte("old key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no url", []string{"--org", "acme"}, "--url must be opsbot's public https://"},
		{"http url", []string{"--url", "http://opsbot.example.com", "--org", "acme"}, "https://"},
		{"no owner in the name", []string{"--url", "https://opsbot.example.com"}, "--name is required without --org"},
		{"bad org", []string{"--url", "https://opsbot.example.com", "--org", "acme/../x"}, "is not an organization's login"},
		{"long name", []string{"--url", "https://opsbot.example.com", "--org", "a-very-long-organization-name-indeed"}, "GitHub takes 1 to 34"},
		{"bad github url", []string{"--url", "https://opsbot.example.com", "--org", "acme", "--github-url", "github.com"}, "--github-url"},
		{"existing key", []string{"--url", "https://opsbot.example.com", "--org", "acme", "--out", full}, "already exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, err := runCLI(t, nil, append([]string{"github", "app-create"}, c.args...)...)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(errOut+err.Error(), c.want) {
				t.Fatalf("error %v %s, want %q", err, errOut, c.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(full, appKeyFile)); string(b) != "old key" {
		t.Fatal("an existing key was overwritten")
	}
}

// The code's exchange is tried again when its answer is lost (the network,
// GitHub's 5xx); when no try gets GitHub's answer, the terminal says how to
// finish by hand with the code (never the page), and --code does. A
// --url given as the webhook's own URL is taken for its base.
func TestAppCreateExchangeRetriedAndFinishedByHand(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	out := filepath.Join(t.TempDir(), "github")
	gh.Inject(conversions, githubtest.Fault{Drop: true, Times: 2})
	f := startAppCreate(t, gh, "--url", "https://opsbot.example.com/webhook/", "--org", "acme", "--out", out,
		"--github-url", gh.URL, "--api-url", gh.URL)
	back := f.submit()
	if hook := gh.ManifestApps()[0].Manifest["hook_attributes"].(map[string]any)["url"]; hook != "https://opsbot.example.com/webhook" {
		t.Errorf("the App's webhook is %v, want https://opsbot.example.com/webhook", hook)
	}
	if code, body := f.get(back.String()); code != http.StatusOK {
		t.Fatalf("the redirect answered %d:\n%s", code, body)
	}
	if err := f.wait(); err != nil {
		t.Fatalf("app-create after two lost exchanges: %v\n%s", err, f.errOut())
	}
	if n := gh.Count(conversions); n != 3 {
		t.Fatalf("%d exchanges, want 3 (two lost, one answered)", n)
	}
	if _, err := os.Stat(filepath.Join(out, appKeyFile)); err != nil {
		t.Fatal(err)
	}

	gh2 := githubtest.New(t)
	out2 := filepath.Join(t.TempDir(), "github")
	gh2.Inject(conversions, githubtest.Fault{Drop: true, Times: exchangeTries})
	f = startAppCreate(t, gh2, "--url", "https://opsbot.example.com", "--org", "acme", "--out", out2,
		"--github-url", gh2.URL, "--api-url", gh2.URL)
	back = f.submit()
	code, body := f.get(back.String())
	err := f.wait()
	if err == nil || code != http.StatusBadGateway {
		t.Fatalf("app-create with every exchange lost: %v; the page %d", err, code)
	}
	byHand := regexp.MustCompile(`opsbot github app-create (--url \S+ --out \S+ --code (\S+) --api-url \S+ --org acme)\n`).FindStringSubmatch(f.errOut())
	if byHand == nil || byHand[2] != back.Query().Get("code") {
		t.Fatalf("the terminal does not say how to finish with the code:\n%s", f.errOut())
	}
	if strings.Contains(body, byHand[2]) {
		t.Errorf("the page shows the code:\n%s", body)
	}
	if entries, _ := os.ReadDir(out2); len(entries) != 0 {
		t.Fatalf("wrote %v after the exchange failed", entries)
	}
	stdout, stderr, err := runCLI(t, nil, append([]string{"github", "app-create"}, strings.Fields(byHand[1])...)...)
	if err != nil {
		t.Fatalf("finishing by hand: %v\n%s%s", err, stdout, stderr)
	}
	mustContain(t, "finished by hand", stdout, "Created the GitHub App")
	if b, err := os.ReadFile(filepath.Join(out2, appKeyFile)); err != nil || string(b) != gh2.ManifestApps()[0].PEM {
		t.Fatalf("the key written by hand: %v", err)
	}
}
