package config

import (
	"errors"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "opsbot.example.yaml"))
	if err != nil {
		t.Fatalf("opsbot.example.yaml: %v", err)
	}
	r, ok := cfg.Repo("semianalysisai/inferencex")
	if !ok {
		t.Fatal("example repo not found case-insensitively")
	}
	// The example asks more than write for what skips sweeps, and guards what a reused push may change.
	if got, want := r.Reuse.MinRole, "maintain"; got != want {
		t.Errorf("reuse.min_role = %q, want %q", got, want)
	}
	if len(r.Reuse.AllowedPaths) == 0 {
		t.Error("reuse.allowed_paths is empty in the example")
	}
	if got, want := strings.Join(r.ResultArtifacts, ","), "results_bmk,eval_results_all,bmk_agentic_*"; got != want {
		t.Errorf("result_artifacts = %q, want %q", got, want)
	}
	// The example protects the harness the sweep runs from the PR's checkout, not only .github/**.
	if got, want := strings.Join(r.ProtectedPaths, ","), ".github/**,ci/**,scripts/**"; got != want {
		t.Errorf("protected_paths = %q, want %q", got, want)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte("repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Repos[0]
	checks := []struct{ name, got, want string }{
		{"listen", cfg.Listen, DefaultListen},
		{"state_path", cfg.StatePath, DefaultStatePath},
		{"github.api_url", cfg.GitHub.APIURL, DefaultGitHubAPI},
		{"webhook_secret_env", cfg.GitHub.WebhookSecretEnv, "OPSBOT_WEBHOOK_SECRET"},
		{"stage.min_role", r.Stage.MinRole, "write"},
		{"help.min_role", r.Help.MinRole, "write"},
		{"stage.slot", r.Stage.Slot, "shared"},
		{"stage.dispatch.event_type", r.Stage.Dispatch.EventType, "stage-results"},
		{"gate_actions", strings.Join(r.GateActions, ","), "synchronize"},
		{"role_cache_ttl", cfg.GitHub.RoleCacheTTL.String(), "1m0s"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

// Every problem in a file is reported at once, each with its path.
func TestProblemsAreAllReportedWithPaths(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"typos", `
listn: ":8080"
github:
  api_ur: "http://x/"
repos:
  - name: o/r
    sweep_workflow: .github/workflows/run-sweep.yml
    reuse:
      min_rol: write
`, []string{`listn: unknown key (line 2); did you mean "listen"?`, `github.api_ur: unknown key (line 4); did you mean "api_url"?`,
			`repos[0].reuse.min_rol: unknown key (line 9); did you mean "min_role"?`}},
		{"no repos", "listen: 127.0.0.1:1\n", []string{"repos: required"}},
		{"bad listen", "listen: nonsense\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n",
			[]string{`listen: "nonsense" is not a host:port address`}},
		{"unreadable state path", "state_path: " + filepath.Join(dir, "missing", "db") +
			"\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n",
			[]string{"state_path: directory", "no such file or directory"}},
		{"state path is a directory", "state_path: " + dir + "\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n",
			[]string{"state_path: \"" + dir + "\" is a directory"}},
		{"many at once", `
workers: 999
repos:
  - name: not-a-repo
    reuse: {min_role: god, allow_teams: [noslash]}
    stage: {slot: private, url_template: "{{.Nope}}"}
    gate_actions: [closed]
  - name: o/r
    sweep_workflow: run-sweep.yml
  - name: O/R
    sweep_workflow: .github/workflows/x.yml
`, []string{
			"workers: must be between 1 and 256",
			`repos[0].name: "not-a-repo" is not OWNER/REPO`,
			"repos[0].sweep_workflow: required",
			`repos[0].reuse.min_role: "god" is not a role`,
			`repos[0].reuse.allow_teams[0]: "noslash" is not ORG/TEAM-SLUG`,
			`repos[0].stage.slot: "private" must be shared or accumulate`,
			"repos[0].stage.url_template: uses a field it does not have",
			`repos[0].gate_actions[0]: "closed" is not a pull_request action`,
			`repos[1].sweep_workflow: "run-sweep.yml" must be a path under .github/workflows/`,
			`repos[2].name: "O/R" is also repos[1]`,
		}},
		{"wrong type", "workers: many\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n",
			[]string{"workers (line 1): must be a whole number, not `many`"}},
		{"a type error does not renumber the repositories after it", `
repos:
  - {name: o/a, sweep_workflow: .github/workflows/s.yml, reuse: {allowed_paths: 3}}
  - {name: o/b, sweep_workflow: .github/workflows/s.yml, stage: {min_role: wrtie}}
`, []string{"repos[0].reuse.allowed_paths (line 3): must be a list of texts, not `3`", `repos[1].stage.min_role: "wrtie" is not a role`}},
		{"a type error in the only repository", "repos:\n  - {name: o/a, sweep_workflow: .github/workflows/s.yml, reuse: {allowed_paths: 3}}\n",
			[]string{"repos[0].reuse.allowed_paths (line 2)"}},
		{"not yaml", "repos: [\n", []string{"not valid YAML"}},
		{"empty", "", []string{"the file is empty"}},
		{"app and token", `
github: {token_env: T, app: {id: 0}}
repos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]
`, []string{"github.app.id: required", "github.app.private_key_file: required", "github: token_env and app are exclusive"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml))
			var probs Problems
			if err == nil {
				probs = cfg.CheckPaths() // what the file names on this machine: checked after the overrides
			} else if !errors.As(err, &probs) {
				t.Fatalf("Parse = %v, want Problems", err)
			}
			if len(probs) == 0 {
				t.Fatal("no problem found")
			}
			all := strings.Join(probs, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems lack %q; got:\n%s", w, all)
				}
			}
		})
	}
}

func TestResolveSecrets(t *testing.T) {
	cfg, err := Parse([]byte("github: {token_env: GH}\napi: {tokens_env: API}\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPSBOT_WEBHOOK_SECRET": " new-secret-0123456 , old-secret-0123456 ", "GH": "ghp_x", "API": "api-token-a-01234,api-token-b-01234"}
	s, err := cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(s.WebhookSecrets) != 2 || s.WebhookSecrets[0].Reveal() != "new-secret-0123456" || s.WebhookSecrets[1].Reveal() != "old-secret-0123456" {
		t.Errorf("webhook secrets = %v", s.WebhookSecrets)
	}
	if len(s.APITokens) != 2 || s.GitHubToken.Reveal() != "ghp_x" {
		t.Errorf("tokens = %v %v", s.APITokens, s.GitHubToken)
	}
	env["API"] = "ab,api-token-b-01234" // a comma in a token splits it
	_, err = cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "api.tokens_env: value 1 of 2 in API is 2 characters long; use at least 16") ||
		strings.Contains(err.Error(), "ab,") {
		t.Fatalf("a short token: %v", err)
	}
	if weak := cfg.WeakSecrets(func(k string) string { return env[k] }); len(weak) != 1 {
		t.Fatalf("WeakSecrets = %q, want the one short token", weak)
	}
	delete(env, "OPSBOT_WEBHOOK_SECRET")
	_, err = cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "OPSBOT_WEBHOOK_SECRET is empty or unset") {
		t.Fatalf("without a webhook secret: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load = %v, want not-exist", err)
	}
}

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "opsbot.example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add("repos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n")
	f.Add("listen: [1, 2]\nrepos: {a: b}\n")
	f.Add("repos:\n  - name: o/r\n    stage: {url_template: \"{{.RunID\"}\n")
	f.Fuzz(func(t *testing.T, yaml string) {
		cfg, err := Parse([]byte(yaml))
		if err == nil {
			if cfg == nil || len(cfg.Repos) == 0 || cfg.Listen == "" {
				t.Fatalf("accepted a configuration without repos or listen: %+v", cfg)
			}
			return
		}
		var probs Problems
		if !errors.As(err, &probs) || len(probs) == 0 {
			t.Fatalf("error %v is not a list of problems", err)
		}
		for _, p := range probs {
			if p == "" {
				t.Fatal("an empty problem")
			}
		}
	})
}

func TestEnterpriseWebHost(t *testing.T) {
	cfg, err := Parse([]byte("github: {api_url: 'https://ghe.example.com/api/v3', web_url: 'https://ghe.example.com/'}\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.WebHost(); got != "ghe.example.com" {
		t.Fatalf("WebHost = %q", got)
	}
	if _, err := Parse([]byte("github: {web_url: 'not a url'}\nrepos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n")); err == nil ||
		!strings.Contains(err.Error(), "github.web_url") {
		t.Fatalf("bad web_url: %v", err)
	}
}

// Every secret variable VAR has a twin VAR_FILE naming a file that holds it.
func TestSecretFileTwins(t *testing.T) {
	cfg, err := Parse([]byte("github: {token_env: GH}\napi: {gate_tokens_env: GATE, admin_tokens_env: ADMIN}\n" +
		"slack: {token_env: SLACK}\naudit_web: {enabled: true, user_env: AU, password_env: AP}\n" +
		"repos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"OPSBOT_WEBHOOK_SECRET_FILE": file("hook", "s3cret-0123456789\n"), "GH_FILE": file("gh", "ghp_f\r\n"),
		"GATE_FILE": file("gate", "gate-token-1-0123,gate-token-2-0123\n"), "ADMIN_FILE": file("admin", "admin-token-01234"), "SLACK_FILE": file("slack", "xoxb-f\n"),
		"AU_FILE": file("au", "ops\n"), "AP_FILE": file("ap", "audit-password-0123\n")}
	s, err := cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"webhook", s.WebhookSecrets[0].Reveal(), "s3cret-0123456789"}, {"github", s.GitHubToken.Reveal(), "ghp_f"},
		{"gate", s.GateTokens[1].Reveal(), "gate-token-2-0123"}, {"admin", s.AdminTokens[0].Reveal(), "admin-token-01234"},
		{"slack", s.SlackToken.Reveal(), "xoxb-f"}, {"audit user", s.AuditUser.Reveal(), "ops"}, {"audit password", s.AuditPassword.Reveal(), "audit-password-0123"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	env["GH"] = "ghp_env"
	env["SLACK_FILE"] = filepath.Join(dir, "missing")
	_, err = cfg.ResolveSecrets(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "github.token_env: both GH and GH_FILE are set: keep one") ||
		!strings.Contains(err.Error(), "slack.token_env: SLACK_FILE: reading the secret: open ") {
		t.Fatalf("both set and an unreadable file: %v", err)
	}
}

func TestProtectedPaths(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
		warn bool
	}{
		{"", ".github/**", false},
		{"    protected_paths: []\n", "", true},
		{"    protected_paths: [\".github/**\", \"scripts/ci/**\"]\n", ".github/**,scripts/ci/**", false},
	} {
		cfg, err := Parse([]byte("repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n" + tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := strings.Join(cfg.Repos[0].ProtectedPaths, ","); got != tc.want {
			t.Errorf("%q: protected_paths = %q, want %q", tc.yaml, got, tc.want)
		}
		w := cfg.Warnings()
		if got := strings.Contains("\n"+strings.Join(w, "\n"), "\nrepos[0].protected_paths: empty"); got != tc.warn {
			t.Errorf("%q: warnings %q, want a warning: %v", tc.yaml, w, tc.warn)
		}
	}
	_, err := Parse([]byte("repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n    protected_paths: [\"[\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "repos[0].protected_paths[0]: bad glob") {
		t.Fatalf("a bad glob: %v", err)
	}
}

// The label rules: their defaults, the empty list that turns one off, and
// what a PR's labels and draft flag make of its sweep.
func TestLabelRules(t *testing.T) {
	const head = "repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n"
	cfg, err := Parse([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Repos[0].Reuse
	if got := strings.Join(r.FullSweepLabels, ","); got != "full-sweep-fail-fast,full-sweep-enabled,non-canary-full-sweep-enabled,full-sweep-fail-fast-no-canary" {
		t.Fatalf("full_sweep_labels default = %q", got)
	}
	if got := strings.Join(r.IncompatibleLabels, ","); got != "evals-only,agentx-fast" {
		t.Fatalf("incompatible_labels default = %q", got)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		draft  bool
		full   bool
		gated  bool
	}{
		{"a full sweep", []string{"Full-Sweep-Enabled"}, false, true, true},
		{"a full sweep's draft", []string{"full-sweep-enabled"}, true, true, false},
		{"a partial sweep", []string{"full-sweep-enabled", "evals-only"}, false, false, false},
		{"a trimmed sweep", []string{"sweep-enabled"}, false, false, false},
		{"no labels", nil, false, false, false},
	} {
		v := r.Judge(tc.labels, tc.draft)
		if v.Full() != tc.full || v.Gated() != tc.gated {
			t.Errorf("%s: full %v gated %v, want %v %v (%+v)", tc.name, v.Full(), v.Gated(), tc.full, tc.gated, v)
		}
	}
	cfg, err = Parse([]byte(head + "    reuse:\n      full_sweep_labels: []\n      incompatible_labels: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := cfg.Repos[0].Reuse.Judge([]string{"evals-only"}, false); !v.Gated() {
		t.Fatalf("with both rules off, an evals-only PR is not gated: %+v", v)
	}
	_, err = Parse([]byte(head + "    reuse:\n      full_sweep_labels: [evals-only]\n"))
	if err == nil || !strings.Contains(err.Error(), "repos[0].reuse.incompatible_labels: \"evals-only\" is also a full-sweep label") {
		t.Fatalf("a label in both lists: %v", err)
	}
}

// The ingress limits: defaults, and each bad value named with what to do.
func TestIngressLimits(t *testing.T) {
	const repos = "repos: [{name: o/r, sweep_workflow: .github/workflows/s.yml}]\n"
	cfg, err := Parse([]byte("http: {trusted_proxies: ['10.0.0.0/8', '192.0.2.7', 'fd00::/8']}\n" + repos))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP.MaxConnectionsPerIP != 64 || cfg.Webhook.MaxInflightBytes != 64<<20 || cfg.Webhook.MinBodyRate != 16<<10 ||
		cfg.Webhook.MinBodyRateGrace != 10*time.Second {
		t.Fatalf("defaults: %+v %+v", cfg.HTTP, cfg.Webhook)
	}
	if p, err := cfg.HTTP.TrustedProxyPrefixes(); err != nil || len(p) != 3 || p[1].String() != "192.0.2.7/32" {
		t.Fatalf("trusted proxies = %v, %v", p, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http: {max_connections_per_ip: -1}", "http.max_connections_per_ip"},
		{"http: {trusted_proxies: ['lb.internal']}", "http.trusted_proxies"},
		{"webhook: {max_inflight_bytes: 1048576}", "webhook.max_inflight_bytes: must be at least webhook.max_body_bytes"},
		{"webhook: {min_body_rate: -2}", "webhook.min_body_rate"},
		{"webhook: {min_body_rate_grace: 100ms}", "webhook.min_body_rate_grace"},
	} {
		if _, err := Parse([]byte(tc.yaml + "\n" + repos)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a problem naming %s", tc.yaml, err, tc.want)
		}
	}
}

// An ID token audience left at the shared default is warned about; one set
// for the deployment is not. repository_id must be a GitHub id.
func TestOIDCAudienceWarningAndRepositoryID(t *testing.T) {
	base := "repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n"
	for _, tc := range []struct {
		name, yaml string
		warns      bool
	}{
		{"default audience", base, true},
		{"own audience", "api:\n  github_oidc:\n    audience: https://opsbot.example.com\n" + base, false},
		{"ID tokens off", "api:\n  github_oidc:\n    enabled: false\n" + base, false},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.Contains(strings.Join(cfg.Warnings(), "\n"), "api.github_oidc.audience is the default"); got != tc.warns {
			t.Errorf("%s: audience warning = %v, want %v (%q)", tc.name, got, tc.warns, cfg.Warnings())
		}
	}
	_, err := Parse([]byte(base + "    repository_id: -1\n"))
	if err == nil || !strings.Contains(err.Error(), "repos[0].repository_id") {
		t.Fatalf("repository_id -1: %v", err)
	}
}

// A value of the wrong type is reported with the key that holds it.
func TestTypeErrorsNameTheKey(t *testing.T) {
	_, err := Parse([]byte("workers: many\nrepos:\n  - name: o/r\n    sweep_workflow: .github/workflows/s.yml\n    reuse:\n      allowed_paths: 3\n"))
	for _, want := range []string{"workers (line 1): must be a whole number, not `many`", "repos[0].reuse.allowed_paths (line 6): must be a list of texts, not `3`"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error %v lacks %q", err, want)
		}
	}
}

// A type error is said in the file's words, and costs the file no
// repository: the one it is in is still there, and still checked.
func TestTypeErrorsSpeakTheFilesWords(t *testing.T) {
	_, err := Parse([]byte(`http:
  read_timeout: 5
repos:
  - name: o/a
    sweep_workflow: .github/workflows/s.yml
    reuse: {allowed_paths: 3}
    stage: {min_role: wrtie}
`))
	if err == nil {
		t.Fatal("Parse took a file with type errors")
	}
	got := err.Error()
	for _, want := range []string{"http.read_timeout (line 2): must be a duration such as 168h or 30m, not `5`",
		"repos[0].reuse.allowed_paths (line 6): must be a list of texts, not `3`", `repos[0].stage.min_role: "wrtie" is not a role`} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	for _, not := range []string{"repos: required", "cannot unmarshal", "time.Duration"} {
		if strings.Contains(got, not) {
			t.Errorf("problems say %q; got:\n%s", not, got)
		}
	}
}

func TestCheckListenAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, ":8080": true, "0.0.0.0:0": true, "[::1]:443": true, "localhost:http": true,
		"127.0.0.1:notaport": false, "127.0.0.1": false, "127.0.0.1:70000": false, "127.0.0.1:-1": false, "127.0.0.1:": false, "": false,
	} {
		if err := CheckListenAddr(addr); (err == nil) != ok {
			t.Errorf("CheckListenAddr(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

// A type error names the key it is about, even on a line that holds
// several values; an alias is checked as the value it names, where it is
// used.
func TestTypeErrorsNameTheirKeyOnABusyLineAndAliasesAreChecked(t *testing.T) {
	_, err := Parse([]byte(`http: {read_timeout: 5, max_connections: 10}
repos:
  - name: o/a
    sweep_workflow: .github/workflows/s.yml
    reuse: &r {min_role: write, allowed_paths: ["docs/**"]}
    stage: *r
  - name: o/b
    sweep_workflow: .github/workflows/s.yml
    stage:
      min_role:
        admin: true
`))
	if err == nil {
		t.Fatal("Parse took a file with type errors")
	}
	got := err.Error()
	for _, want := range []string{"http.read_timeout (line 1): must be a duration", "repos[0].stage.allowed_paths: unknown key",
		"repos[1].stage.min_role (line 11): must be"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	for _, not := range []string{"max_connections (line 1)", "min_role.admin"} {
		if strings.Contains(got, not) {
			t.Errorf("problems name %q; got:\n%s", not, got)
		}
	}
}
