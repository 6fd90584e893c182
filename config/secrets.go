package config

import (
	"fmt"
	"os"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/auth"
)

// Secrets are the credentials named by the configuration, read from the environment.
type Secrets struct {
	WebhookSecrets []auth.Secret
	GitHubToken    auth.Secret
	AppPrivateKey  []byte
	APITokens      []auth.Secret // legacy api.tokens_env: gate and admin
	GateTokens     []auth.Secret // may only ask the gate
	AdminTokens    []auth.Secret // may read the audit, back up and reconcile
	SlackToken     auth.Secret
	// SlackSigningSecret verifies clicks (slack.signing_secret_env).
	SlackSigningSecret auth.Secret
	AuditUser          auth.Secret
	AuditPassword      auth.Secret
	MetricsToken       auth.Secret // bearer GET /metrics needs, when metrics.token_env is set
}

// ResolveSecrets reads every secret the configuration names through getenv.
// Each named variable VAR has a twin VAR_FILE naming a file that holds the
// value (a Kubernetes secret mount); setting both is an error, and so is a
// VAR_FILE that cannot be read. A missing webhook secret is an error: opsbot
// never starts unable to verify what it is sent. Other missing credentials
// are allowed and mean dry-run (GitHub, Slack) or a closed door (API tokens,
// audit page).
//
// Webhook secrets and API tokens shorter than MinSecretLen are errors too
// (see WeakSecrets).
func (c *Config) ResolveSecrets(getenv func(string) string) (Secrets, error) {
	s, probs := c.resolveSecrets(getenv)
	probs = append(probs, s.weak(c)...)
	if len(probs) > 0 {
		return s, probs
	}
	return s, nil
}

// MinSecretLen is the shortest webhook secret or API token opsbot accepts.
const MinSecretLen = 16

// WeakSecrets reads the webhook secrets and API tokens that are set and
// reports each one shorter than MinSecretLen (by position, never by value).
// A secret that is not set is no problem here: `config check` checks what
// it can, and the server refuses to start without a webhook secret.
func (c *Config) WeakSecrets(getenv func(string) string) Problems {
	s, _ := c.resolveSecrets(getenv) // unreadable ones are the server's to report
	return s.weak(c)
}

func (s Secrets) weak(c *Config) Problems {
	var probs Problems
	for _, l := range []struct {
		key, env string
		vals     []auth.Secret
		list     bool // comma-separated values
	}{{"github.webhook_secret_env", c.GitHub.WebhookSecretEnv, s.WebhookSecrets, true}, {"api.tokens_env", c.API.TokensEnv, s.APITokens, true},
		{"api.gate_tokens_env", c.API.GateTokensEnv, s.GateTokens, true}, {"api.admin_tokens_env", c.API.AdminTokensEnv, s.AdminTokens, true},
		{"audit_web.password_env", c.AuditWeb.PasswordEnv, nonEmpty(s.AuditPassword), false},
		{"metrics.token_env", c.Metrics.TokenEnv, nonEmpty(s.MetricsToken), false}} {
		for i, v := range l.vals {
			n := len(v.Reveal())
			switch {
			case n >= MinSecretLen:
			case l.list:
				probs = append(probs, fmt.Sprintf("%s: value %d of %d in %s is %d characters long; use at least %d "+
					"(a comma separates values, so a secret with a comma in it is read as several; openssl rand -hex 32 makes a good one)",
					l.key, i+1, len(l.vals), l.env, n, MinSecretLen))
			default:
				probs = append(probs, fmt.Sprintf("%s: %s is %d characters long; use at least %d (openssl rand -hex 32 makes a good one)",
					l.key, l.env, n, MinSecretLen))
			}
		}
	}
	return probs
}

// nonEmpty is v as a list of one, or none when v is empty.
func nonEmpty(v auth.Secret) []auth.Secret {
	if v == "" {
		return nil
	}
	return []auth.Secret{v}
}

func (c *Config) resolveSecrets(getenv func(string) string) (Secrets, Problems) {
	var s Secrets
	var probs Problems
	read := func(key, name string) string {
		v, err := SecretValue(getenv, name)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s: %v", key, err))
		}
		return v
	}
	s.WebhookSecrets = splitSecrets(read("github.webhook_secret_env", c.GitHub.WebhookSecretEnv))
	if len(s.WebhookSecrets) == 0 && len(probs) == 0 {
		probs = append(probs, fmt.Sprintf("github.webhook_secret_env: the environment variable %s is empty or unset (and %s_FILE names no file); "+
			"set it to the webhook secret configured on GitHub (comma-separated for rotation); opsbot will not start without it",
			c.GitHub.WebhookSecretEnv, c.GitHub.WebhookSecretEnv))
	}
	if c.GitHub.TokenEnv != "" {
		s.GitHubToken = auth.Secret(strings.TrimSpace(read("github.token_env", c.GitHub.TokenEnv)))
	}
	if c.GitHub.App != nil {
		key, err := os.ReadFile(c.GitHub.App.PrivateKeyFile)
		if err != nil {
			probs = append(probs, fmt.Sprintf("github.app.private_key_file: %v", err))
		}
		s.AppPrivateKey = key
	}
	if c.API.TokensEnv != "" {
		s.APITokens = splitSecrets(read("api.tokens_env", c.API.TokensEnv))
	}
	if c.API.GateTokensEnv != "" {
		s.GateTokens = splitSecrets(read("api.gate_tokens_env", c.API.GateTokensEnv))
	}
	if c.API.AdminTokensEnv != "" {
		s.AdminTokens = splitSecrets(read("api.admin_tokens_env", c.API.AdminTokensEnv))
	}
	if c.Slack.TokenEnv != "" {
		s.SlackToken = auth.Secret(strings.TrimSpace(read("slack.token_env", c.Slack.TokenEnv)))
	}
	if c.Slack.SigningSecretEnv != "" {
		s.SlackSigningSecret = auth.Secret(strings.TrimSpace(read("slack.signing_secret_env", c.Slack.SigningSecretEnv)))
		if len(s.SlackSigningSecret) < 16 {
			probs = append(probs, fmt.Sprintf("slack.signing_secret_env: %s (or %s_FILE) is empty, unset or shorter than 16 characters: "+
				"set the Slack app's signing secret (Basic Information → App Credentials), or remove slack.signing_secret_env", c.Slack.SigningSecretEnv, c.Slack.SigningSecretEnv))
		}
	}
	if c.Metrics.TokenEnv != "" {
		s.MetricsToken = auth.Secret(strings.TrimSpace(read("metrics.token_env", c.Metrics.TokenEnv)))
		if s.MetricsToken == "" {
			probs = append(probs, fmt.Sprintf("metrics.token_env: %s (or %s_FILE) is empty or unset: set the token Prometheus sends, "+
				"or remove metrics.token_env", c.Metrics.TokenEnv, c.Metrics.TokenEnv))
		}
	}
	if c.AuditWeb.Enabled {
		s.AuditUser = auth.Secret(read("audit_web.user_env", c.AuditWeb.UserEnv))
		s.AuditPassword = auth.Secret(read("audit_web.password_env", c.AuditWeb.PasswordEnv))
		if s.AuditUser == "" || s.AuditPassword == "" {
			probs = append(probs, fmt.Sprintf("audit_web: %s and %s (or their _FILE twins) must both be set when the audit page is enabled",
				c.AuditWeb.UserEnv, c.AuditWeb.PasswordEnv))
		}
	}
	return s, probs
}

// SecretValue reads the secret named name: the variable itself, or the file
// its twin name_FILE names (trailing newlines and spaces dropped, as a
// mounted secret often ends with one). Both set is an error, as is an
// unreadable file; neither set is "".
func SecretValue(getenv func(string) string, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case v != "" && file != "":
		return "", fmt.Errorf("both %s and %s_FILE are set: keep one", name, name)
	case file == "":
		return v, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: reading the secret: %w", name, err)
	}
	return strings.TrimRight(string(raw), "\r\n\t "), nil
}

func splitSecrets(v string) []auth.Secret {
	var out []auth.Secret
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, auth.Secret(p))
		}
	}
	return out
}
