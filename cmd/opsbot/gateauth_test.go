package main

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// issuer is a local GitHub Actions OIDC issuer (testkit's) minting tokens
// of this repository's sweep.
type issuer struct{ *testkit.Issuer }

func newIssuer(t *testing.T) *issuer { return &issuer{testkit.NewIssuer(t)} }

// token mints an ID token as GitHub Actions would for a pull_request run of
// PR 2512's sweep workflow; set overrides claims (nil deletes one).
func (is *issuer) token(t *testing.T, set map[string]any) string {
	t.Helper()
	return is.Sign(t, is.claims(set))
}

func (is *issuer) claims(set map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": is.URL, "aud": "opsbot", "sub": "repo:" + theRepo + ":pull_request",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"repository": theRepo, "ref": fmt.Sprintf("refs/pull/%d/merge", thePR), "event_name": "pull_request",
		"workflow_ref": theRepo + "/.github/workflows/run-sweep.yml@refs/pull/2512/merge", "run_id": "31200000001", "actor": "author"}
	for k, v := range set {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

type apiReply struct {
	code   int
	ct     string
	body   string
	header http.Header
}

// call makes one API request with a bearer (none when ""); a body starting
// with "{" is sent as JSON, any other as a form.
func (w *world) call(method, path, bearer, accept, body string) apiReply {
	w.T.Helper()
	req, err := http.NewRequest(method, w.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		w.T.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if body != "" && !strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return apiReply{resp.StatusCode, resp.Header.Get("Content-Type"), string(raw), resp.Header}
}

func askForm(pr int, head string) string {
	return url.Values{"repo": {theRepo}, "event": {"pull_request"}, "action": {"synchronize"},
		"pr": {fmt.Sprint(pr)}, "sha": {head}}.Encode()
}

// oidcConfig points api.github_oidc at a local issuer. It continues the
// world's api: block (the lines are indented under it).
func oidcConfig(issuerURL string) string {
	return fmt.Sprintf("  github_oidc:\n    issuer: %q\n", issuerURL)
}

// A GitHub Actions ID token asks the gate only for what its claims name:
// its repository, its PR (refs/pull/N/merge), a push from the default
// branch. Every other token is refused, and none reaches an admin route.
func TestGateWithGitHubActionsIDToken(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	w := newWorldWith(t, oidcConfig(is.URL), "", nil)
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Push(theRepo, thePR, []string{sha("c2")})

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pushAsk := func(head string) string {
		return url.Values{"repo": {theRepo}, "event": {"push"}, "sha": {head}}.Encode()
	}
	for _, tc := range []struct {
		name, token, body string
		code              int
		want              string
	}{
		{"wrong audience", is.token(t, map[string]any{"aud": "someone-else"}), askForm(thePR, sha("c2")), 401, "audience"},
		{"expired", is.token(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix(), "iat": time.Now().Add(-time.Hour).Unix(),
			"nbf": time.Now().Add(-time.Hour).Unix()}), askForm(thePR, sha("c2")), 401, "expired"},
		{"another issuer's key", testkit.SignJWT(t, other, testkit.KeyID, is.claims(nil)), askForm(thePR, sha("c2")), 401, "signature"},
		{"another repository's token", is.token(t, map[string]any{"repository": "octo-org/octo-repo"}), askForm(thePR, sha("c2")),
			401, `its repository \"octo-org/octo-repo\" is not served by this opsbot`},
		{"an ask for another repository", is.token(t, nil),
			url.Values{"repo": {"octo-org/octo-repo"}, "pr": {"2512"}, "sha": {sha("c2")}}.Encode(), 403, "the ask is for octo-org/octo-repo"},
		{"another PR's token", is.token(t, map[string]any{"ref": "refs/pull/7/merge"}), askForm(thePR, sha("c2")),
			403, "the token's ref is refs/pull/7/merge, an ask for PR #2512 needs refs/pull/2512/merge"},
		{"a branch token for a PR", is.token(t, map[string]any{"ref": "refs/heads/kimi-tune"}), askForm(thePR, sha("c2")), 403, "needs refs/pull/2512/merge"},
		{"a push token from another branch", is.token(t, map[string]any{"ref": "refs/heads/kimi-tune", "event_name": "push"}), pushAsk(sha("a1")),
			403, "a push ask needs the default branch refs/heads/main"},
		{"a push token from the default branch", is.token(t, map[string]any{"ref": "refs/heads/main", "event_name": "push"}), pushAsk(sha("a1")),
			200, "merged no pull request"},
	} {
		r := w.call(http.MethodPost, "/api/v1/gate", tc.token, "", tc.body)
		if r.code != tc.code || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, r.code, r.body, tc.code, tc.want)
		}
	}
	if st := w.Statuses("c2"); len(st) != 0 {
		t.Fatalf("a refused token decided c2: %+v", st)
	}
	// The repository's own PR token decides its head, answered as step outputs.
	r := w.call(http.MethodPost, "/api/v1/gate", is.token(t, nil), "text/plain", askForm(thePR, sha("c2")))
	if r.code != 200 || !strings.HasPrefix(r.ct, "text/plain") || !strings.Contains(r.body, "skip-pr-sweep=true\n") {
		t.Fatalf("the PR's own token: %d %s %s", r.code, r.ct, r.body)
	}
	w.Settle()
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip") {
		t.Fatalf("status of c2 = %+v", st)
	}
	for _, path := range []string{"/api/v1/audit", "/api/v1/dead-letters", "/api/v1/failed-notices", "/api/v1/backup"} {
		if r := w.call(http.MethodGet, path, is.token(t, nil), "", ""); r.code != 403 || !strings.Contains(r.body, "ID token may only ask the gate") {
			t.Errorf("GET %s with an ID token: %d %s", path, r.code, r.body)
		}
	}
	if r := w.call(http.MethodPost, "/api/v1/reconcile", is.token(t, nil), "", `{"repo":"`+theRepo+`"}`); r.code != 403 {
		t.Errorf("reconcile with an ID token: %d %s", r.code, r.body)
	}
	// The default branch was read from GitHub once, for the two push asks.
	if n := w.GH.Count("GET /repos/{owner}/{repo}"); n != 1 {
		t.Errorf("the default branch was read %d times, want 1", n)
	}
	m := w.Metrics()
	for outcome, want := range map[string]string{"unauthorized": "4", "forbidden": "4", "skip": "1", "no_reuse": "1", "error": "0"} {
		if got := m[`opsbot_gate_asks_total{outcome="`+outcome+`"}`]; got != want {
			t.Errorf("opsbot_gate_asks_total{outcome=%q} = %q, want %s", outcome, got, want)
		}
	}
	logs := w.Srv.Stderr.String()
	mustContain(t, "the server's log", logs, `"msg":"gate ask","repo":"SemiAnalysisAI/InferenceX","pr":2512,"sha":"`+sha("c2")+`"`,
		`"auth":"oidc","outcome":"skip"`, `"token_repository":"SemiAnalysisAI/InferenceX","token_ref":"refs/pull/2512/merge"`, `"token_run_id":"31200000001","token_actor":"author"`, `"msg":"gate ask refused"`, `"outcome":"forbidden"`)
}

// With repos[].oidc_require_workflow, only the sweep workflow's token may ask.
func TestIDTokenMustComeFromTheSweepWorkflow(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	w := newWorldWith(t, oidcConfig(is.URL), "    oidc_require_workflow: true\n", nil)
	lint := is.token(t, map[string]any{"workflow_ref": theRepo + "/.github/workflows/lint.yml@refs/pull/2512/merge"})
	if r := w.call(http.MethodPost, "/api/v1/gate", lint, "", askForm(thePR, sha("c1"))); r.code != 403 ||
		!strings.Contains(r.body, "this repository requires .github/workflows/run-sweep.yml") {
		t.Fatalf("another workflow's token: %d %s", r.code, r.body)
	}
	if r := w.call(http.MethodPost, "/api/v1/gate", is.token(t, nil), "", askForm(thePR, sha("c1"))); r.code != 200 {
		t.Fatalf("the sweep workflow's token: %d %s", r.code, r.body)
	}
}

// An issuer that cannot be reached does not stop opsbot from starting; an
// ID token is then answered 503 with the cause, and static tokens still work.
func TestUnreachableIssuerFailsClosedWithoutBlockingStart(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	w := newWorldWith(t, oidcConfig("http://127.0.0.1:1"), "", nil)
	r := w.call(http.MethodPost, "/api/v1/gate", is.token(t, map[string]any{"iss": "http://127.0.0.1:1"}), "text/plain", askForm(thePR, sha("c1")))
	if r.code != 503 || !strings.Contains(r.body, "skip-pr-sweep=false\n") ||
		!strings.Contains(r.body, "cannot verify the GitHub Actions ID token now: idtoken: the ID token issuer cannot be reached: discovering http://127.0.0.1:1") {
		t.Fatalf("ID token with the issuer down: %d %s", r.code, r.body)
	}
	if r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "", askForm(thePR, sha("c1"))); r.code != 200 {
		t.Fatalf("static token with the issuer down: %d %s", r.code, r.body)
	}
}

// Gate tokens only ask the gate, admin tokens only administer, the legacy
// api.tokens_env does both; each secret may come from a VAR_FILE.
func TestTokenClasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gateFile, hookFile := filepath.Join(dir, "gate-tokens"), filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(gateFile, []byte("gate-token-1-0123,gate-token-2-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hookFile, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWorldWith(t, "  gate_tokens_env: TEST_GATE_TOKENS\n  admin_tokens_env: TEST_ADMIN_TOKENS\n", "",
		map[string]string{"TEST_GATE_TOKENS_FILE": gateFile, "TEST_ADMIN_TOKENS": "admin-token-01234",
			"TEST_WEBHOOK_SECRET": "", "TEST_WEBHOOK_SECRET_FILE": hookFile})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932") // signed with the secret read from its file
	admin := []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/audit", ""}, {http.MethodGet, "/api/v1/dead-letters", ""},
		{http.MethodGet, "/api/v1/failed-notices", ""}, {http.MethodGet, "/api/v1/backup", ""},
		{http.MethodPost, "/api/v1/reconcile", `{"repo":"nobody/served"}`},
	}
	for _, a := range admin {
		if r := w.call(a.method, a.path, "gate-token-2-0123", "", a.body); r.code != 403 ||
			!strings.Contains(r.body, "this is a gate token (api.gate_tokens_env): it may only ask the gate; use an admin token (api.admin_tokens_env)") {
			t.Errorf("%s %s with a gate token: %d %s", a.method, a.path, r.code, r.body)
		}
		if r := w.call(a.method, a.path, "admin-token-01234", "", a.body); r.code == 401 || r.code == 403 {
			t.Errorf("%s %s with an admin token: %d %s", a.method, a.path, r.code, r.body)
		}
		if r := w.call(a.method, a.path, "nope", "", a.body); r.code != 401 {
			t.Errorf("%s %s with a wrong token: %d %s", a.method, a.path, r.code, r.body)
		}
	}
	if r := w.call(http.MethodPost, "/api/v1/gate", "admin-token-01234", "", askForm(thePR, sha("c1"))); r.code != 403 ||
		!strings.Contains(r.body, "this is an admin token (api.admin_tokens_env): it may not ask the gate") {
		t.Fatalf("gate ask with an admin token: %d %s", r.code, r.body)
	}
	if r := w.call(http.MethodPost, "/api/v1/gate", "gate-token-1-0123", "", askForm(thePR, sha("c1"))); r.code != 200 {
		t.Fatalf("gate ask with a gate token: %d %s", r.code, r.body)
	}
	// The legacy tokens still do both.
	if r := w.call(http.MethodGet, "/api/v1/audit", apiToken, "", ""); r.code != 200 {
		t.Fatalf("audit with a legacy token: %d %s", r.code, r.body)
	}
	if r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "", askForm(thePR, sha("c1"))); r.code != 200 {
		t.Fatalf("gate ask with a legacy token: %d %s", r.code, r.body)
	}
	mustContain(t, "the server's log", w.Srv.Stderr.String(), "api.tokens_env is deprecated")

	// The CLI reads its token from OPSBOT_API_TOKEN_FILE too.
	tokFile := filepath.Join(dir, "client-token")
	if err := os.WriteFile(tokFile, []byte("gate-token-1-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := func(k string) string {
		if k == "OPSBOT_API_TOKEN_FILE" {
			return tokFile
		}
		return ""
	}
	var out, errOut strings.Builder
	if err := run(t.Context(), []string{"gate", "--server", w.Srv.URL, "--repo", theRepo, "--pr", "2512", "--sha", sha("c1"),
		"--strict"}, fromFile, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("opsbot gate with OPSBOT_API_TOKEN_FILE: %v\n%s%s", err, out.String(), errOut.String())
	}
	mustContain(t, "opsbot gate", out.String(), "skip-pr-sweep=false\n", "reuse-reason=run 31147925932 was pinned when this commit was already the head")
	err := run(t.Context(), []string{"audit", "--server", w.Srv.URL, "--repo", theRepo}, fromFile, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden: this is a gate token") {
		t.Fatalf("opsbot audit with a gate token: %v", err)
	}

	// config check warns about the legacy variable, and only about it.
	var stdout, stderr strings.Builder
	if err := run(t.Context(), []string{"config", "check", "--config", filepath.Join(w.Dir, "opsbot.yaml")}, testEnv(nil),
		strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("config check: %v\n%s", err, stderr.String())
	}
	mustContain(t, "config check", stdout.String(), "warning: api.tokens_env is deprecated", "api.gate_tokens_env", "api.admin_tokens_env")
}

// Asked for text/plain, the gate answers the eight step outputs; an error
// keeps its status and its lines say skip-pr-sweep=false; no value can
// break a line to add an output.
func TestGateAnswersStepOutputs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Push(theRepo, thePR, []string{sha("c2")})
	r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "text/plain", askForm(thePR, sha("c2")))
	want := "skip-pr-sweep=true\nreuse-enabled=true\nreuse-source-run-id=31147925932\nreuse-source-run-attempt=1\n" +
		"reuse-source-run-url=https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932\nreuse-source-pr-number=2512\n" +
		"reuse-source-head-sha=" + sha("c1") + "\nreuse-reason=reusing run 31147925932, authorized by @maintainer\n"
	if r.code != 200 || r.ct != "text/plain; charset=utf-8" || r.body != want {
		t.Fatalf("text/plain answer: %d %s\n%s\nwant\n%s", r.code, r.ct, r.body, want)
	}
	// The same ask in JSON, with JSON preferred, is the stored decision.
	if r := w.call(http.MethodPost, "/api/v1/gate", apiToken, "application/json, text/plain;q=0.5",
		fmt.Sprintf(`{"repo":%q,"pr":%d,"sha":%q}`, theRepo, thePR, sha("c2"))); r.code != 200 || !strings.Contains(r.body, `"skip_pr_sweep":true`) {
		t.Fatalf("JSON answer: %d %s", r.code, r.body)
	}
	// JSON sent the way `curl -d` sends it, as a form, is read as JSON.
	req, err := http.NewRequest(http.MethodPost, w.Srv.URL+"/api/v1/gate",
		strings.NewReader(fmt.Sprintf(`{"repo":%q,"pr":%d,"sha":%q}`, theRepo, thePR, sha("c2"))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if code, body := post(t, req); code != 200 || body["skip_pr_sweep"] != true {
		t.Fatalf("JSON with a form content type: %d %v", code, body)
	}
	for _, tc := range []struct {
		name, token, body string
		code              int
		reason            string
	}{
		{"no token", "", askForm(thePR, sha("c2")), 401, "reuse-reason=opsbot could not decide (HTTP 401): missing or wrong bearer token"},
		{"a newline in the repo", apiToken, url.Values{"repo": {"x/y\nskip-pr-sweep=true"}, "pr": {"1"}, "sha": {sha("c2")}}.Encode(),
			404, "reuse-reason=opsbot could not decide (HTTP 404): gate: repository not served by this opsbot: x/y skip-pr-sweep=true\n"},
		{"unknown field", apiToken, askForm(thePR, sha("c2")) + "&skip=true", 400, `unknown form field "skip"`},
		{"bad pr", apiToken, url.Values{"repo": {theRepo}, "pr": {"12a"}, "sha": {sha("c2")}}.Encode(), 400, `pr "12a" is not a PR number`},
	} {
		r := w.call(http.MethodPost, "/api/v1/gate", tc.token, "text/plain", tc.body)
		lines := strings.Split(strings.TrimSuffix(r.body, "\n"), "\n")
		if r.code != tc.code || len(lines) != 8 || lines[0] != "skip-pr-sweep=false" || lines[1] != "reuse-enabled=false" ||
			!strings.Contains(r.body, tc.reason) {
			t.Errorf("%s: %d %q, want %d, eight lines, skip-pr-sweep=false and %q", tc.name, r.code, r.body, tc.code, tc.reason)
		}
	}
}

// An audience is a URL whose trailing / is no part of it: the gate action
// asks for its server input without one, and api.github_oidc.audience may
// name the same URL with one (or the other way round). Another URL is
// still refused.
func TestIDTokenAudienceTakesATrailingSlash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ configured, minted string }{
		{"https://opsbot.example.com/", "https://opsbot.example.com"},
		{"https://opsbot.example.com", "https://opsbot.example.com/"},
		{"https://opsbot.example.com/", "https://opsbot.example.com/"},
	} {
		is := newIssuer(t)
		w := newWorldWith(t, oidcConfig(is.URL)+fmt.Sprintf("    audience: %q\n", c.configured), "", nil)
		r := w.call(http.MethodPost, "/api/v1/gate", is.token(t, map[string]any{"aud": c.minted}), "text/plain", askForm(thePR, sha("c1")))
		if r.code != 200 || !strings.Contains(r.body, "skip-pr-sweep=") {
			t.Errorf("audience %q configured, %q minted: %d %s", c.configured, c.minted, r.code, r.body)
		}
		r = w.call(http.MethodPost, "/api/v1/gate", is.token(t, map[string]any{"aud": "https://opsbot.example.com.evil"}), "", askForm(thePR, sha("c1")))
		if r.code != 401 || !strings.Contains(r.body, "audience") {
			t.Errorf("another audience with %q configured: %d %s", c.configured, r.code, r.body)
		}
	}
}
