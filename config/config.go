// Package config reads opsbot's YAML configuration into a validated Config.
//
// Decoding is strict: unknown keys are errors, and every problem in a file is
// reported at once, each with its path (repos[0].sweep_workflow: required).
// Secrets never live in the file: it names the environment variables that
// hold them, and Resolve reads them through an injected getenv.
package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
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

// Slack is where notices are mirrored.
type Slack struct {
	APIURL   string `yaml:"api_url"`
	TokenEnv string `yaml:"token_env"`
	Channel  string `yaml:"channel"`
	// Digest is "weekly" for a digest of each repository's week in its
	// channel ("" for none), sent on DigestDay at DigestHour (UTC).
	Digest     string `yaml:"digest"`
	DigestDay  string `yaml:"digest_day"`
	DigestHour int    `yaml:"digest_hour"`
	// SigningSecretEnv names the variable holding the Slack app's signing
	// secret: with it, clicks on opsbot's buttons are taken at
	// /slack/interactions. Users maps Slack user ids to the GitHub logins
	// they act as (role-checked on GitHub as that account).
	SigningSecretEnv string            `yaml:"signing_secret_env"`
	Users            map[string]string `yaml:"users"`
}

// DigestWeekday is slack.digest_day as a weekday (Monday when unset).
func (s Slack) DigestWeekday() time.Weekday {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(d.String(), s.DigestDay) {
			return d
		}
	}
	return time.Monday
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

// WebHost is the host of GitHub's web pages (github.com, or an Enterprise host).
func (c *Config) WebHost() string {
	u, err := url.Parse(c.GitHub.WebURL)
	if err != nil || u.Host == "" {
		return "github.com"
	}
	return u.Host
}
