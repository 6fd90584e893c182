package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
)

// Warnings are what `config check` reports that does not stop opsbot.
func (c *Config) Warnings() []string {
	var w []string
	if o := c.API.GitHubOIDC; o.On() && o.Audience == DefaultOIDCAudience {
		w = append(w, fmt.Sprintf("api.github_oidc.audience is the default %q, which every opsbot shares: an ID token minted for another "+
			"deployment would be taken here too; set a value unique to this deployment (its URL) and request it in the workflow", DefaultOIDCAudience))
	}
	if c.API.TokensEnv != "" {
		w = append(w, "api.tokens_env is deprecated: its tokens may both ask the gate and read the audit, back up and reconcile; "+
			"give the workflow a gate token (api.gate_tokens_env) and operators an admin token (api.admin_tokens_env)")
	}
	for i, r := range c.Repos {
		if role, _ := auth.ParseRole(r.Reuse.MinRole); role <= auth.RoleWrite {
			w = append(w, fmt.Sprintf("repos[%d].reuse.min_role is %s: any collaborator with %s access or more (people, and apps or "+
				"bots given it) can authorize skipping a sweep; set maintain, or list who may in allow_users or allow_teams", i,
				r.Reuse.MinRole, r.Reuse.MinRole))
		}
		if role, _ := auth.ParseRole(r.Stage.MinRole); r.Stage.Dispatch.Repo != "" && role <= auth.RoleWrite {
			w = append(w, fmt.Sprintf("repos[%d].stage.min_role is %s: any collaborator with %s access or more can publish a run to "+
				"the staging site; set maintain, or list who may in allow_users or allow_teams", i, r.Stage.MinRole, r.Stage.MinRole))
		}
		if len(r.Reuse.AllowedPaths) == 0 {
			w = append(w, fmt.Sprintf("repos[%d].reuse.allowed_paths is empty: a pin covers the next push whatever it changes; list the "+
				"paths a push that reuses a run may touch (for example perf-changelog.yaml, docs/**)", i))
		}
		if r.Stage.Dispatch.Repo != "" && len(r.Stage.CallbackSenders) == 0 {
			w = append(w, fmt.Sprintf("repos[%d].stage.callback_senders is empty: a staging report is taken from whoever can send a "+
				"repository_dispatch to %s and echoes the request's token; list the staging workflow's account (logins or ids)", i, r.Name))
		}
		if len(r.ProtectedPaths) == 0 {
			w = append(w, fmt.Sprintf("repos[%d].protected_paths: empty, so a run made by a workflow that the PR itself changed "+
				"(a pull_request run executes the PR's own .github/workflows files) can be pinned, used and staged; "+
				"remove the key to protect %s", i, strings.Join(DefaultProtectedPaths, ", ")))
		}
	}
	return w
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.StatePath == "" {
		c.StatePath = DefaultStatePath
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.GitHub.APIURL == "" {
		c.GitHub.APIURL = DefaultGitHubAPI
	}
	if !strings.HasSuffix(c.GitHub.APIURL, "/") {
		c.GitHub.APIURL += "/"
	}
	if c.GitHub.WebURL == "" {
		c.GitHub.WebURL = "https://github.com/"
	}
	if c.GitHub.WebhookSecretEnv == "" {
		c.GitHub.WebhookSecretEnv = "OPSBOT_WEBHOOK_SECRET"
	}
	if c.GitHub.RoleCacheTTL == 0 {
		c.GitHub.RoleCacheTTL = DefaultRoleTTL
	}
	if c.GitHub.RequestTimeout == 0 {
		c.GitHub.RequestTimeout = DefaultRequestTimeout
	}
	cr := &c.GitHub.ContentRate
	if cr.PerMinute == 0 {
		cr.PerMinute = DefaultContentPerMinute
	}
	if cr.PerHour == 0 {
		cr.PerHour = DefaultContentPerHour
	}
	if cr.Minute == 0 {
		cr.Minute = time.Minute
	}
	if cr.Hour == 0 {
		cr.Hour = time.Hour
	}
	if c.Slack.APIURL == "" {
		c.Slack.APIURL = DefaultSlackAPI
	}
	if !strings.HasSuffix(c.Slack.APIURL, "/") {
		c.Slack.APIURL += "/"
	}
	if c.Retention.Processed == 0 {
		c.Retention.Processed = DefaultRetention
	}
	if c.Webhook.MaxBodyBytes == 0 {
		c.Webhook.MaxBodyBytes = DefaultMaxBody
	}
	if c.API.GitHubOIDC.Issuer == "" {
		c.API.GitHubOIDC.Issuer = DefaultOIDCIssuer
	}
	if c.API.GitHubOIDC.Audience == "" {
		c.API.GitHubOIDC.Audience = DefaultOIDCAudience
	}
	if c.Webhook.MaxInflightBytes == 0 {
		c.Webhook.MaxInflightBytes = 64 << 20
	}
	if c.Webhook.MinBodyRate == 0 {
		c.Webhook.MinBodyRate = 16 << 10
	}
	if c.Webhook.MinBodyRateGrace == 0 {
		c.Webhook.MinBodyRateGrace = 10 * time.Second // GitHub gives up on a delivery after 10 s
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.HTTP.ReadHeaderTimeout, 10 * time.Second}, {&c.HTTP.ReadTimeout, time.Minute}, {&c.HTTP.WriteTimeout, 2 * time.Minute},
		{&c.HTTP.IdleTimeout, 2 * time.Minute}, {&c.API.GateWait, 10 * time.Second}, {&c.HTTP.SlowHeader, time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.HTTP.MaxConnections == 0 {
		c.HTTP.MaxConnections = 2000
	}
	if c.API.GateRate.Burst == 0 {
		c.API.GateRate.Burst = DefaultGateBurst
	}
	if c.API.GateRate.PerMinute == 0 {
		c.API.GateRate.PerMinute = DefaultGatePerMinute
	}
	if c.Notices.MaxRepliesPerUserPerHour == 0 {
		c.Notices.MaxRepliesPerUserPerHour = DefaultMaxRepliesPerUserPerHour
	}
	if c.Notices.MaxOutsiderReactionsPerUserPerHour == 0 {
		c.Notices.MaxOutsiderReactionsPerUserPerHour = DefaultMaxOutsiderReactionsPerUserPerHour
	}
	if c.Notices.MaxOutsiderReactionsPerRepoPerHour == 0 {
		c.Notices.MaxOutsiderReactionsPerRepoPerHour = DefaultMaxOutsiderReactionsPerRepoPerHour
	}
	if c.HTTP.MaxConnectionsPerIP == 0 {
		c.HTTP.MaxConnectionsPerIP = 64
	}
	if c.HTTP.IPv6PrefixLen == 0 {
		c.HTTP.IPv6PrefixLen = 64
	}
	if c.HTTP.MaxPendingPerIP == 0 {
		c.HTTP.MaxPendingPerIP = min(8, max(1, c.HTTP.MaxConnectionsPerIP/4))
	}
	for i := range c.Repos {
		r := &c.Repos[i]
		if len(r.ResultArtifacts) == 0 {
			r.ResultArtifacts = []string{"results_bmk", "eval_results_all", "bmk_agentic_*"}
		}
		if len(r.GateActions) == 0 {
			r.GateActions = []string{"synchronize"}
		}
		if r.ProtectedPaths == nil { // absent; `protected_paths: []` opts out
			r.ProtectedPaths = append([]string(nil), DefaultProtectedPaths...)
		}
		if r.Stage.ReportTimeout == 0 {
			r.Stage.ReportTimeout = DefaultStageReportTimeout
		}
		if r.Reuse.FullSweepLabels == nil { // absent; `full_sweep_labels: []` turns the rule off
			r.Reuse.FullSweepLabels = append([]string(nil), DefaultFullSweepLabels...)
		}
		if r.Reuse.IncompatibleLabels == nil {
			r.Reuse.IncompatibleLabels = append([]string(nil), DefaultIncompatibleLabels...)
		}
		// The commands' own sections first, a section the file left out
		// included: their defaults (a merge's maintain) win over the common
		// one below.
		for _, sec := range registered() {
			if sec.New != nil && r.own[sec.Key] == nil {
				if r.own == nil {
					r.own = map[string]any{}
				}
				r.own[sec.Key] = sec.New()
			}
			if sec.Defaults != nil {
				sec.Defaults(r)
			}
		}
		if r.External.MinRole == "" {
			r.External.MinRole = "maintain" // likewise
		}
		// Every section that says who may run a command, its own fields'
		// and the commands' own types' alike, takes the common default role.
		for _, at := range r.accesses("") {
			if at.a.MinRole == "" {
				at.a.MinRole = DefaultMinRole
			}
		}
		if r.Stage.Dispatch.EventType == "" {
			r.Stage.Dispatch.EventType = "stage-results"
		}
		if len(r.Stage.RequiredArtifacts) == 0 {
			r.Stage.RequiredArtifacts = []string{"changelog-metadata"}
		}
		if r.Stage.Slot == "" {
			r.Stage.Slot = "shared"
		}
	}
}

// CheckListenAddr reports whether addr is an address opsbot can listen on:
// host:port with a port number (0 to 65535) or a service name. A host name
// is not resolved here.
func CheckListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not a host:port address (for example 127.0.0.1:8080)", addr)
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return fmt.Errorf("%q: port %d is not between 0 and 65535", addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return fmt.Errorf("%q: %q is not a port number (for example 127.0.0.1:8080)", addr, port)
	}
	return nil
}

// CheckPaths checks what the configuration names on this machine: that
// state_path's directory exists and state_path is no directory. Preflight
// runs it after the overrides (serve, config check); Load, and `config
// check --no-env`, which lint the file alone, do not.
func (c *Config) CheckPaths() Problems {
	var p Problems
	if dir := filepath.Dir(c.StatePath); dir != "" {
		if fi, err := os.Stat(dir); err != nil {
			p = append(p, fmt.Sprintf("state_path: directory %q cannot be used: %v", dir, err))
		} else if !fi.IsDir() {
			p = append(p, fmt.Sprintf("state_path: %q is not a directory", dir))
		}
	}
	if fi, err := os.Stat(c.StatePath); err == nil && fi.IsDir() {
		p = append(p, fmt.Sprintf("state_path: %q is a directory; name a file", c.StatePath))
	}
	return p
}

func (c *Config) validate() Problems {
	var p Problems
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	if err := CheckListenAddr(c.Listen); err != nil {
		add("listen", "%v", err)
	}
	if c.Metrics.Listen != "" {
		if err := CheckListenAddr(c.Metrics.Listen); err != nil {
			add("metrics.listen", "%v", err)
		}
	}
	switch c.Slack.Digest {
	case "", "weekly":
	default:
		add("slack.digest", "%q is not a digest: use weekly, or leave it out for none", c.Slack.Digest)
	}
	if d := c.Slack.DigestDay; d != "" {
		ok := false
		for wd := time.Sunday; wd <= time.Saturday; wd++ {
			ok = ok || strings.EqualFold(wd.String(), d)
		}
		if !ok {
			add("slack.digest_day", "%q is not a day of the week (monday to sunday)", d)
		}
	}
	for id, login := range c.Slack.Users {
		if !slackUserID.MatchString(id) {
			add("slack.users", "%q is not a Slack user id (U or W and capital letters and digits, e.g. U012AB3CD)", id)
		}
		if !githubLogin.MatchString(login) {
			add("slack.users", "%q (for %s) is not a GitHub login", login, id)
		}
	}
	if len(c.Slack.Users) > 0 && c.Slack.SigningSecretEnv == "" {
		add("slack.users", "maps Slack users, but without slack.signing_secret_env no click is taken: set it, or remove slack.users")
	}
	if c.Slack.DigestHour < 0 || c.Slack.DigestHour > 23 {
		add("slack.digest_hour", "%d is not an hour of the day (0 to 23, UTC)", c.Slack.DigestHour)
	}
	if c.Workers < 1 || c.Workers > 256 {
		add("workers", "must be between 1 and 256, got %d", c.Workers)
	}
	checkURL := func(path, raw string) {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(path, "%q is not an http(s) URL", raw)
		}
	}
	checkURL("github.api_url", c.GitHub.APIURL)
	checkURL("github.web_url", c.GitHub.WebURL)
	checkURL("slack.api_url", c.Slack.APIURL)
	checkURL("api.github_oidc.issuer", c.API.GitHubOIDC.Issuer)
	if c.GitHub.App != nil {
		a := c.GitHub.App
		switch {
		case a.ID <= 0:
			add("github.app.id", "required: the GitHub App's id")
		case a.ID == PlaceholderAppID:
			add("github.app.id", "%d is the starter configuration's placeholder: set your App's id (opsbot github app-create prints it)",
				PlaceholderAppID)
		}
		if a.PrivateKeyFile == "" {
			add("github.app.private_key_file", "required: the App's private key (PEM)")
		}
		if a.InstallationID < 0 {
			add("github.app.installation_id", "must be positive (or omitted, to take it from each webhook)")
		}
		if c.GitHub.TokenEnv != "" {
			add("github", "token_env and app are exclusive: choose one way to authenticate")
		}
	}
	if c.GitHub.RequestTimeout < 0 {
		add("github.request_timeout", "must be positive")
	}
	if c.GitHub.RoleCacheTTL < 0 {
		add("github.role_cache_ttl", "must be positive")
	}
	if cr := c.GitHub.ContentRate; cr.PerMinute < 1 || cr.PerHour < 1 {
		add("github.content_rate", "per_minute and per_hour must be at least 1 (GitHub allows 80 and 500), got %d and %d", cr.PerMinute, cr.PerHour)
	}
	if cr := c.GitHub.ContentRate; cr.Minute < 0 || cr.Hour < cr.Minute {
		add("github.content_rate", "minute must be positive and hour at least as long (1m and 1h), got %s and %s", cr.Minute, cr.Hour)
	}
	if c.Retention.Processed < time.Hour {
		add("retention.processed", "must be at least 1h (deliveries are deduplicated for that long), got %s", c.Retention.Processed)
	}
	if c.Reconcile.Period < 0 || (c.Reconcile.Period > 0 && c.Reconcile.Period < time.Minute) {
		add("reconcile.period", "must be 0 (off) or at least 1m, got %s", c.Reconcile.Period)
	}
	if c.HTTP.ReadHeaderTimeout < 0 || c.HTTP.ReadTimeout < 0 || c.HTTP.WriteTimeout < 0 || c.HTTP.IdleTimeout < 0 || c.HTTP.SlowHeader < 0 {
		add("http", "timeouts must be positive")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		add("tls", "cert_file and key_file go together: set both, or neither (and terminate TLS in a reverse proxy)")
	}
	if c.API.GateRate.Burst < 0 || c.API.GateRate.PerMinute < 0 {
		add("api.gate_rate", "burst and per_minute must be positive (or left out for %d and %d)", DefaultGateBurst, DefaultGatePerMinute)
	}
	if c.HTTP.MaxConnections < 1 {
		add("http.max_connections", "must be at least 1, got %d", c.HTTP.MaxConnections)
	}
	if c.Notices.MaxRepliesPerUserPerHour < 1 {
		add("notices.max_replies_per_user_per_hour", "must be at least 1, got %d", c.Notices.MaxRepliesPerUserPerHour)
	}
	if c.Notices.MaxOutsiderReactionsPerUserPerHour < 1 {
		add("notices.max_outsider_reactions_per_user_per_hour", "must be at least 1, got %d", c.Notices.MaxOutsiderReactionsPerUserPerHour)
	}
	if c.Notices.MaxOutsiderReactionsPerRepoPerHour < 1 {
		add("notices.max_outsider_reactions_per_repo_per_hour", "must be at least 1, got %d", c.Notices.MaxOutsiderReactionsPerRepoPerHour)
	}
	if c.HTTP.MaxPendingPerIP < 0 {
		add("http.max_pending_per_ip", "must be at least 1, got %d", c.HTTP.MaxPendingPerIP)
	}
	if c.HTTP.MaxConnectionsPerIP < 1 {
		add("http.max_connections_per_ip", "must be at least 1, got %d", c.HTTP.MaxConnectionsPerIP)
	}
	if c.HTTP.IPv6PrefixLen < 1 || c.HTTP.IPv6PrefixLen > 128 {
		add("http.ipv6_prefix_len", "must be between 1 and 128 (64 counts each /64 as one client), got %d", c.HTTP.IPv6PrefixLen)
	}
	if _, err := c.HTTP.TrustedProxyPrefixes(); err != nil {
		add("http.trusted_proxies", "%v", err)
	}
	if c.Webhook.MaxBodyBytes < 1024 {
		add("webhook.max_body_bytes", "must be at least 1024")
	}
	if c.Webhook.MaxInflightBytes < c.Webhook.MaxBodyBytes+64<<10 {
		add("webhook.max_inflight_bytes", "must be at least webhook.max_body_bytes + 65536 (%d) so the largest delivery fits, got %d",
			c.Webhook.MaxBodyBytes+64<<10, c.Webhook.MaxInflightBytes)
	}
	if c.Webhook.MinBodyRate < -1 {
		add("webhook.min_body_rate", "must be bytes per second, or -1 for no floor, got %d", c.Webhook.MinBodyRate)
	}
	if c.Webhook.MinBodyRateGrace < time.Second {
		add("webhook.min_body_rate_grace", "must be at least 1s, got %s", c.Webhook.MinBodyRateGrace)
	}
	if c.AuditWeb.Enabled && (c.AuditWeb.UserEnv == "" || c.AuditWeb.PasswordEnv == "") {
		add("audit_web", "user_env and password_env are required when enabled")
	}
	if len(c.Repos) == 0 {
		add("repos", "required: list at least one repository opsbot serves")
	}
	seen := map[string]int{}
	for i, r := range c.Repos {
		rp := fmt.Sprintf("repos[%d]", i)
		owner, name, ok := strings.Cut(r.Name, "/")
		switch {
		case r.Name == "":
			add(rp+".name", "required: OWNER/REPO")
		case !ok || owner == "" || name == "" || strings.ContainsAny(name, "/ \t"):
			add(rp+".name", "%q is not OWNER/REPO", r.Name)
		}
		key := strings.ToLower(r.Name)
		if j, dup := seen[key]; dup && r.Name != "" {
			add(rp+".name", "%q is also repos[%d]", r.Name, j)
		}
		seen[key] = i
		if r.SweepWorkflow == "" {
			add(rp+".sweep_workflow", "required: the sweep workflow's path, e.g. .github/workflows/run-sweep.yml")
		} else if !strings.HasPrefix(r.SweepWorkflow, ".github/workflows/") {
			add(rp+".sweep_workflow", "%q must be a path under .github/workflows/", r.SweepWorkflow)
		}
		for j, pat := range r.ResultArtifacts {
			if _, err := path.Match(pat, ""); err != nil {
				add(fmt.Sprintf("%s.result_artifacts[%d]", rp, j), "bad pattern %q: %v", pat, err)
			}
		}
		for j, a := range r.GateActions {
			if !validGateAction[a] {
				add(fmt.Sprintf("%s.gate_actions[%d]", rp, j), "%q is not a pull_request action opsbot gates on (synchronize, opened, reopened, ready_for_review, labeled)", a)
			}
		}
		// Every section's access rule, found by its type wherever it is
		// (the commands' own sections included): a section added later is
		// checked without being listed here.
		for _, acc := range r.accesses(rp) {
			if _, err := auth.ParseRole(acc.a.MinRole); err != nil {
				add(acc.path+".min_role", "%s", describeRole(acc.a.MinRole))
			}
			for j, t := range acc.a.AllowTeams {
				if o, s, ok := strings.Cut(t, "/"); !ok || o == "" || s == "" {
					add(fmt.Sprintf("%s.allow_teams[%d]", acc.path, j), "%q is not ORG/TEAM-SLUG", t)
				}
			}
		}
		if r.Reuse.MinCoverage < 0 || r.Reuse.MinCoverage > 1 {
			add(rp+".reuse.min_coverage", "%v is not a fraction: the least share of a run's jobs that must have succeeded, from 0 to 1 (for example 0.95)", r.Reuse.MinCoverage)
		}
		for glob, n := range r.GPUsPerRunner {
			if _, err := path.Match(glob, ""); err != nil || glob == "" {
				add(rp+".gpus_per_runner", "%q is not a runner label glob", glob)
			}
			if n < 0 || n > 1024 {
				add(rp+".gpus_per_runner", "%q: %d GPUs is out of range (0 to 1024)", glob, n)
			}
		}
		for _, sec := range registered() {
			if sec.Check == nil {
				continue
			}
			for _, prob := range sec.Check(&r) {
				add(rp+"."+sec.Key+"."+prob.Key, "%s", prob.Message)
			}
		}
		for j, g := range r.Reuse.AllowedPaths {
			if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil {
				add(fmt.Sprintf("%s.reuse.allowed_paths[%d]", rp, j), "bad glob %q: %v", g, err)
			}
		}
		for _, rule := range []struct {
			key  string
			list []string
		}{{"full_sweep_labels", r.Reuse.FullSweepLabels}, {"incompatible_labels", r.Reuse.IncompatibleLabels}} {
			for j, l := range rule.list {
				if strings.TrimSpace(l) != l || l == "" || len(l) > 100 {
					add(fmt.Sprintf("%s.reuse.%s[%d]", rp, rule.key, j), "%q is not a label name (1 to 100 characters without spaces around them, as GitHub names labels)", l)
				}
			}
		}
		for _, f := range r.Reuse.FullSweepLabels {
			for _, in := range r.Reuse.IncompatibleLabels {
				if strings.EqualFold(f, in) {
					add(rp+".reuse.incompatible_labels", "%q is also a full-sweep label: no PR could pass both rules", in)
				}
			}
		}
		if r.RepositoryID < 0 {
			add(rp+".repository_id", "%d is not a repository id (GitHub's numeric id: gh api repos/%s --jq .id)", r.RepositoryID, r.Name)
		}
		if strings.ContainsAny(r.DefaultBranch, " \t") || strings.HasPrefix(r.DefaultBranch, "refs/") {
			add(rp+".default_branch", "%q is not a branch name (write main, not refs/heads/main)", r.DefaultBranch)
		}
		for j, g := range r.ProtectedPaths {
			if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil || g == "" {
				add(fmt.Sprintf("%s.protected_paths[%d]", rp, j), "bad glob %q (for example \".github/**\")", g)
			}
		}
		st := r.Stage
		if st.ReportTimeout < time.Minute {
			add(rp+".stage.report_timeout", "%v is too short: the staging side needs time to stage a run (for example 6h; at least 1m)", st.ReportTimeout)
		}
		if st.Slot != "shared" && st.Slot != "accumulate" {
			add(rp+".stage.slot", "%q must be shared or accumulate", st.Slot)
		}
		if st.Dispatch.Repo != "" {
			if o, n, ok := strings.Cut(st.Dispatch.Repo, "/"); !ok || o == "" || n == "" {
				add(rp+".stage.dispatch.repo", "%q is not OWNER/REPO", st.Dispatch.Repo)
			}
		}
		if st.URLTemplate != "" {
			if _, err := template.New("url").Option("missingkey=error").Parse(st.URLTemplate); err != nil {
				add(rp+".stage.url_template", "does not parse: %v", err)
			} else if err := checkURLTemplate(st.URLTemplate); err != nil {
				add(rp+".stage.url_template", "%v", err)
			}
		}
	}
	return p
}

var validGateAction = map[string]bool{
	"synchronize": true, "opened": true, "reopened": true, "ready_for_review": true, "labeled": true,
}

var (
	slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)
	githubLogin = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
)
