// Package config reads opsbot's YAML configuration into a validated Config.
//
// Decoding is strict: unknown keys are errors, and every problem in a file is
// reported at once, each with its path (repos[0].sweep_workflow: required).
// Secrets never live in the file: it names the environment variables that
// hold them, and Resolve reads them through an injected getenv.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"opsbot/auth"
)

// Config is the whole configuration file.
type Config struct {
	Listen    string     `yaml:"listen"`
	StatePath string     `yaml:"state_path"`
	DryRun    bool       `yaml:"dry_run"`
	Workers   int        `yaml:"workers"`
	GitHub    GitHub     `yaml:"github"`
	API       API        `yaml:"api"`
	Slack     Slack      `yaml:"slack"`
	Retention Retention  `yaml:"retention"`
	AuditWeb  AuditWeb   `yaml:"audit_web"`
	Repos     []Repo     `yaml:"repos"`
	Webhook   WebhookCfg `yaml:"webhook"`
	Reconcile Reconcile  `yaml:"reconcile"`
	HTTP      HTTP       `yaml:"http"`
	Metrics   Metrics    `yaml:"metrics"`
	TLS       TLS        `yaml:"tls"`
	Notices   Notices    `yaml:"notices"`
}

// Notices bounds what commenters can make opsbot say.
type Notices struct {
	// MaxRepliesPerUserPerHour is how many reply comments one user may get
	// on one repository in a rolling hour; past it opsbot only reacts.
	MaxRepliesPerUserPerHour int `yaml:"max_replies_per_user_per_hour"`
	// MaxOutsiderReactionsPerUserPerHour is how many reactions one
	// commenter below triage may get on one repository in a rolling hour;
	// MaxOutsiderReactionsPerRepoPerHour how many all of them together
	// may. Past either the audit alone records their commands.
	MaxOutsiderReactionsPerUserPerHour int `yaml:"max_outsider_reactions_per_user_per_hour"`
	MaxOutsiderReactionsPerRepoPerHour int `yaml:"max_outsider_reactions_per_repo_per_hour"`
}

// DefaultMaxRepliesPerUserPerHour is notices.max_replies_per_user_per_hour when unset.
const DefaultMaxRepliesPerUserPerHour = 20

// Defaults of notices.max_outsider_reactions_per_user_per_hour and
// notices.max_outsider_reactions_per_repo_per_hour.
const (
	DefaultMaxOutsiderReactionsPerUserPerHour = 5
	DefaultMaxOutsiderReactionsPerRepoPerHour = 60
)

// TLS serves HTTPS from a certificate and key file, loaded again when
// they change; unset, opsbot serves plain HTTP (behind a TLS-terminating
// reverse proxy).
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Metrics is where GET /metrics is served, and what it needs.
type Metrics struct {
	// Listen, when set, serves /metrics on this address only (not on
	// listen): a port the firewall keeps inside.
	Listen string `yaml:"listen"`
	// TokenEnv, when set, names the variable holding the bearer token
	// GET /metrics needs (Prometheus's authorization credentials).
	TokenEnv string `yaml:"token_env"`
}

// HTTP bounds what clients may hold of the server.
type HTTP struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// MaxConnections open at once; past it a new connection is answered 503 and closed.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP open at once from one client address; behind a
	// trusted proxy, requests in flight per forwarded client address.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// TrustedProxies (CIDRs or addresses) may name the client in
	// X-Forwarded-For; their own connections are not limited per address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// IPv6PrefixLen is how many leading bits of an IPv6 client address
	// count as one client for MaxConnectionsPerIP (default 64).
	IPv6PrefixLen int `yaml:"ipv6_prefix_len"`
	// MaxPendingPerIP bounds the connections from one client address still
	// sending their first request's header (default a quarter of
	// MaxConnectionsPerIP, between 1 and 8); past it the oldest is closed.
	MaxPendingPerIP int `yaml:"max_pending_per_ip"`
	// SlowHeader is how long a connection may take over its first header
	// before a new connection may close it to make room (default 1s).
	SlowHeader time.Duration `yaml:"slow_header"`
}

// TrustedProxyPrefixes parses TrustedProxies (validated by Parse); a bare
// address is a prefix of its full length.
func (h HTTP) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range h.TrustedProxies {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an address", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Reconcile recovers lost webhooks on a period.
type Reconcile struct {
	// Period between reconciles of every repository; 0 turns the periodic run off.
	Period time.Duration `yaml:"period"`
}

// GitHub is how opsbot reaches GitHub and verifies its webhooks.
type GitHub struct {
	APIURL           string        `yaml:"api_url"`
	WebURL           string        `yaml:"web_url"`
	TokenEnv         string        `yaml:"token_env"`
	App              *App          `yaml:"app"`
	WebhookSecretEnv string        `yaml:"webhook_secret_env"`
	BotLogin         string        `yaml:"bot_login"`
	BotUserID        int64         `yaml:"bot_user_id"`
	RequestTimeout   time.Duration `yaml:"request_timeout"`
	RoleCacheTTL     time.Duration `yaml:"role_cache_ttl"`
	ContentRate      ContentRate   `yaml:"content_rate"`
}

// ContentRate paces the requests that create content on GitHub (comments,
// edits, reactions, commit statuses, dispatches) per installation, within
// GitHub's secondary rate limits: at most PerMinute in any minute and
// PerHour in any hour, bursts allowed inside those.
type ContentRate struct {
	PerMinute int `yaml:"per_minute"`
	PerHour   int `yaml:"per_hour"`
	// Minute and Hour are the windows' lengths (1m and 1h). Shorter ones
	// scale the limits down in time: for tests and benchmarks only.
	Minute time.Duration `yaml:"minute"`
	Hour   time.Duration `yaml:"hour"`
}

// App authenticates opsbot as a GitHub App installation.
type App struct {
	ID             int64  `yaml:"id"`
	InstallationID int64  `yaml:"installation_id"`
	PrivateKeyFile string `yaml:"private_key_file"`
}

// API guards /api/v1 and the `opsbot gate` client. Tokens come in classes:
// gate tokens may only ask the gate, admin tokens may only read the audit,
// back up and reconcile, and the legacy tokens_env is both (deprecated).
type API struct {
	TokensEnv      string     `yaml:"tokens_env"`
	GateTokensEnv  string     `yaml:"gate_tokens_env"`
	AdminTokensEnv string     `yaml:"admin_tokens_env"`
	GitHubOIDC     GitHubOIDC `yaml:"github_oidc"`
	// GateWait bounds how long a gate ask waits for the PR's webhooks
	// already received; past it the ask is answered 503 (retry).
	GateWait time.Duration `yaml:"gate_wait"`
	// GateRate limits gate asks per credential (a gate token, or the
	// repository of an ID token): a burst, then per minute; past it 429.
	GateRate GateRate `yaml:"gate_rate"`
}

// GateRate is a token bucket: Burst asks at once, refilled at PerMinute.
type GateRate struct {
	Burst     int `yaml:"burst"`
	PerMinute int `yaml:"per_minute"`
}

// Defaults of api.gate_rate: a busy repository's CI asks once a push.
const (
	DefaultGateBurst     = 20
	DefaultGatePerMinute = 30
)

// GitHubOIDC lets a GitHub Actions job ask the gate with its ID token instead
// of a static token; the token's claims must match the ask.
type GitHubOIDC struct {
	// Enabled defaults to true: a token only covers asks its claims match.
	Enabled  *bool  `yaml:"enabled"`
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
}

// On reports whether ID tokens are accepted.
func (o GitHubOIDC) On() bool { return o.Enabled == nil || *o.Enabled }

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

// Slack is where notices are mirrored.
type Slack struct {
	APIURL   string `yaml:"api_url"`
	TokenEnv string `yaml:"token_env"`
	Channel  string `yaml:"channel"`
}

// Retention bounds how long processed deliveries are kept. The audit is never pruned.
type Retention struct {
	Processed time.Duration `yaml:"processed"`
}

// AuditWeb is the browser view of the audit, behind HTTP basic auth.
type AuditWeb struct {
	Enabled     bool   `yaml:"enabled"`
	UserEnv     string `yaml:"user_env"`
	PasswordEnv string `yaml:"password_env"`
}

// WebhookCfg tunes ingest.
type WebhookCfg struct {
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxInflightBytes of bodies being read at once, before their
	// signatures are checked; past it a request is answered 503.
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`
	// MinBodyRate in bytes per second a body must keep arriving at once
	// MinBodyRateGrace has passed; slower clients are cut (408). -1 turns it off.
	MinBodyRate      int64         `yaml:"min_body_rate"`
	MinBodyRateGrace time.Duration `yaml:"min_body_rate_grace"`
}

// Repo is one repository opsbot serves.
type Repo struct {
	Name            string   `yaml:"name"`
	SweepWorkflow   string   `yaml:"sweep_workflow"`
	ResultArtifacts []string `yaml:"result_artifacts"`
	GateActions     []string `yaml:"gate_actions"`
	SlackChannel    string   `yaml:"slack_channel"`
	AllowBots       []string `yaml:"allow_bots"`
	Reuse           Reuse    `yaml:"reuse"`
	Stage           Stage    `yaml:"stage"`
	Help            Access   `yaml:"help"`
	// DefaultBranch is the branch a push ask's ID token must be for; when
	// empty it is read from GitHub once.
	DefaultBranch string `yaml:"default_branch"`
	// OIDCRequireWorkflow makes a gate ask's ID token name sweep_workflow
	// in its workflow_ref.
	OIDCRequireWorkflow bool `yaml:"oidc_require_workflow"`
	// ProtectedPaths are globs the PR must not have changed up to a run's
	// commit for the run to be pinned, used or staged (a pull_request run
	// executes the PR's own workflow files). Absent: DefaultProtectedPaths;
	// an empty list opts out, and Warnings says so.
	ProtectedPaths []string `yaml:"protected_paths"`
	// RepositoryID, when set, is the GitHub id an ID token's repository_id
	// claim must carry; otherwise a repository is matched by name only.
	RepositoryID int64 `yaml:"repository_id"`
}

// DefaultProtectedPaths are the paths a run's PR may not have changed when
// the configuration does not say.
var DefaultProtectedPaths = []string{".github/**"}

// Access is who may run a command: a minimum role, or a listed user or team.
type Access struct {
	MinRole    string   `yaml:"min_role"`
	AllowUsers []string `yaml:"allow_users"`
	AllowTeams []string `yaml:"allow_teams"`
}

// Reuse configures /reuse-sweep-run.
type Reuse struct {
	Access             `yaml:",inline"`
	AllowPartialPinned bool     `yaml:"allow_partial_pinned"`
	AllowedPaths       []string `yaml:"allowed_paths"`
}

// Stage configures /stage-results.
type Stage struct {
	Access            `yaml:",inline"`
	Dispatch          Dispatch `yaml:"dispatch"`
	URLTemplate       string   `yaml:"url_template"`
	RequiredArtifacts []string `yaml:"required_artifacts"`
	RequiredLabels    []string `yaml:"required_labels"`
	Slot              string   `yaml:"slot"`
	// CallbackSenders are the accounts (logins, bound to their ids as
	// allow_users are, or numeric ids) whose repository_dispatch reports of
	// staging are taken; empty takes any sender that echoes the request's
	// token.
	CallbackSenders []string `yaml:"callback_senders"`
}

// Dispatch is the repository_dispatch that asks the staging side to stage a run.
type Dispatch struct {
	Repo      string `yaml:"repo"`
	EventType string `yaml:"event_type"`
}

// Defaults applied where the file is silent.
const (
	DefaultListen         = "127.0.0.1:8080"
	DefaultStatePath      = "opsbot.db"
	DefaultGitHubAPI      = "https://api.github.com/"
	DefaultSlackAPI       = "https://slack.com/api/"
	DefaultWorkers        = 64
	DefaultMaxBody        = 25 << 20 // GitHub's maximum payload
	DefaultRoleTTL        = 60 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultRetention      = 7 * 24 * time.Hour
	DefaultMinRole        = "write"
	DefaultOIDCIssuer     = "https://token.actions.githubusercontent.com"
	DefaultOIDCAudience   = "opsbot"
	// GitHub's documented secondary limits on content-creating requests.
	DefaultContentPerMinute = 80
	DefaultContentPerHour   = 500
)

// Problems is every problem found in a configuration, each with its path.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("%d problem(s) in the configuration:\n  %s", len(p), strings.Join(p, "\n  "))
}

// Load reads and validates the file at path. The error, if any, is a
// Problems listing everything wrong, or a read error.
func Load(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading config %q: %w", file, err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	// A relative state path is relative to the working directory, as the
	// README's commands expect; nothing to rewrite.
	return cfg, nil
}

// Parse decodes and validates a configuration held in memory.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{fmt.Sprintf("not valid YAML: %v", err)}
	}
	if len(root.Content) == 0 {
		return nil, Problems{"the file is empty: start from opsbot.example.yaml"}
	}
	var probs Problems
	checkKeys(root.Content[0], reflect.TypeOf(Config{}), "", &probs)

	var cfg Config
	if err := root.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			paths := map[int]string{}
			keyPaths(root.Content[0], "", paths)
			for _, e := range te.Errors {
				probs = append(probs, withKeyPath(e, paths))
			}
		} else {
			probs = append(probs, err.Error())
		}
	}
	cfg.applyDefaults()
	probs = append(probs, cfg.validate()...)
	if len(probs) > 0 {
		return nil, probs
	}
	return &cfg, nil
}

// keyPaths maps each line of a value in the YAML document to the key path
// that names it (workers, repos[0].reuse.min_role).
func keyPaths(n *yaml.Node, path string, out map[int]string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if _, ok := out[v.Line]; !ok || v.Kind == yaml.ScalarNode {
				out[v.Line] = p
			}
			keyPaths(v, p, out)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := out[v.Line]; !ok || v.Kind == yaml.ScalarNode {
				out[v.Line] = p
			}
			keyPaths(v, p, out)
		}
	}
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

// withKeyPath names the key of a YAML type error ("line 3: cannot
// unmarshal …" becomes "workers (line 3): cannot unmarshal …").
func withKeyPath(e string, paths map[int]string) string {
	m := lineRE.FindStringSubmatch(e)
	if m == nil {
		return e
	}
	n, _ := strconv.Atoi(m[1])
	p, ok := paths[n]
	if !ok {
		return e
	}
	return fmt.Sprintf("%s (line %d): %s", p, n, strings.TrimPrefix(e, m[0]))
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
		for _, a := range []*Access{&r.Reuse.Access, &r.Stage.Access, &r.Help} {
			if a.MinRole == "" {
				a.MinRole = DefaultMinRole
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

func (c *Config) validate() Problems {
	var p Problems
	add := func(path, format string, args ...any) {
		p = append(p, path+": "+fmt.Sprintf(format, args...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		add("listen", "%q is not a host:port address (for example 127.0.0.1:8080)", c.Listen)
	}
	if dir := filepath.Dir(c.StatePath); dir != "" {
		if fi, err := os.Stat(dir); err != nil {
			add("state_path", "directory %q cannot be used: %v", dir, err)
		} else if !fi.IsDir() {
			add("state_path", "%q is not a directory", dir)
		}
	}
	if fi, err := os.Stat(c.StatePath); err == nil && fi.IsDir() {
		add("state_path", "%q is a directory; name a file", c.StatePath)
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
		if a.ID <= 0 {
			add("github.app.id", "required: the GitHub App's id")
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
		for _, acc := range []struct {
			path string
			a    Access
		}{{rp + ".reuse", r.Reuse.Access}, {rp + ".stage", r.Stage.Access}, {rp + ".help", r.Help}} {
			if _, err := auth.ParseRole(acc.a.MinRole); err != nil {
				add(acc.path+".min_role", "%q is not a role (none, read, triage, write, maintain, admin)", acc.a.MinRole)
			}
			for j, t := range acc.a.AllowTeams {
				if o, s, ok := strings.Cut(t, "/"); !ok || o == "" || s == "" {
					add(fmt.Sprintf("%s.allow_teams[%d]", acc.path, j), "%q is not ORG/TEAM-SLUG", t)
				}
			}
		}
		for j, g := range r.Reuse.AllowedPaths {
			if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil {
				add(fmt.Sprintf("%s.reuse.allowed_paths[%d]", rp, j), "bad glob %q: %v", g, err)
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

// StageURLData is what a stage url_template can use.
type StageURLData struct {
	RunID   int64
	RunDate string
	PR      int
	Repo    string
}

func checkURLTemplate(s string) error {
	t, err := template.New("url").Option("missingkey=error").Parse(s)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, StageURLData{RunID: 1, RunDate: "2026-01-01", PR: 1, Repo: "o/r"}); err != nil {
		return fmt.Errorf("uses a field it does not have (.RunID, .RunDate, .PR, .Repo): %v", err)
	}
	return nil
}

// Repo returns the configuration of the named repository (case-insensitive).
func (c *Config) Repo(name string) (*Repo, bool) {
	for i := range c.Repos {
		if strings.EqualFold(c.Repos[i].Name, name) {
			return &c.Repos[i], true
		}
	}
	return nil, false
}

// SlackChannelFor is the channel a repository's notices go to.
func (c *Config) SlackChannelFor(r *Repo) string {
	if r != nil && r.SlackChannel != "" {
		return r.SlackChannel
	}
	return c.Slack.Channel
}

// AllowUsers is every login the repository's allow_users lists and its
// stage.callback_senders name, once each: the logins bound to account ids.
func (r *Repo) AllowUsers() []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if k := strings.ToLower(u); !seen[k] {
			seen[k] = true
			out = append(out, u)
		}
	}
	for _, a := range []Access{r.Reuse.Access, r.Stage.Access, r.Help} {
		for _, u := range a.AllowUsers {
			add(u)
		}
	}
	for _, u := range r.Stage.CallbackSenders {
		if _, err := strconv.ParseInt(u, 10, 64); err != nil {
			add(u) // a login, bound to its account id; an id needs no binding
		}
	}
	return out
}

// IsGateAction reports whether a pull_request action decides the sweep for the repository.
func (r *Repo) IsGateAction(action string) bool {
	for _, a := range r.GateActions {
		if a == action {
			return true
		}
	}
	return false
}

// checkKeys walks a mapping node against a struct type, reporting every key
// the type does not have with its full path and, when one is close, a hint.
func checkKeys(n *yaml.Node, t reflect.Type, at string, probs *Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			p := k
			if at != "" {
				p = at + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				msg := fmt.Sprintf("%s: unknown key (line %d)", p, n.Content[i].Line)
				if s := closest(k, fields); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				*probs = append(*probs, msg)
				continue
			}
			checkKeys(v, ft, p, probs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", at, i), probs)
		}
	}
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func closest(k string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(k, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// WebHost is the host of GitHub's web pages (github.com, or an Enterprise host).
func (c *Config) WebHost() string {
	u, err := url.Parse(c.GitHub.WebURL)
	if err != nil || u.Host == "" {
		return "github.com"
	}
	return u.Host
}

// Live is the configuration in use, swapped whole on a reload: whoever
// reads it gets one consistent configuration, the old or the new.
type Live struct{ p atomic.Pointer[Config] }

// NewLive holds c.
func NewLive(c *Config) *Live {
	l := &Live{}
	l.p.Store(c)
	return l
}

// Get is the configuration in use now.
func (l *Live) Get() *Config { return l.p.Load() }

// Swap puts c in use and returns the one it replaces.
func (l *Live) Swap(c *Config) *Config { return l.p.Swap(c) }

// RestartOnly names the top-level settings a reload does not apply to the
// running server (they shaped what it built at start) that differ between
// old and new: each takes effect at the next start. Repositories and
// notices apply at once.
func RestartOnly(old, new *Config) []string {
	var out []string
	oldV, newV := reflect.ValueOf(*old), reflect.ValueOf(*new)
	t := oldV.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || name == "repos" || name == "notices" {
			continue
		}
		if !reflect.DeepEqual(oldV.Field(i).Interface(), newV.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}
