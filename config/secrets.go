package config

import (
	"fmt"
	"os"
	"strings"

	"opsbot/auth"
)

// Secrets are the credentials named by the configuration, read from the environment.
type Secrets struct {
	WebhookSecrets []auth.Secret
	GitHubToken    auth.Secret
	AppPrivateKey  []byte
	APITokens      []auth.Secret
	SlackToken     auth.Secret
	AuditUser      auth.Secret
	AuditPassword  auth.Secret
}

// ResolveSecrets reads every secret the configuration names through getenv.
// A missing webhook secret is an error: opsbot never starts unable to verify
// what it is sent. Other missing credentials are allowed and mean dry-run
// (GitHub, Slack) or a closed door (API tokens, audit page).
func (c *Config) ResolveSecrets(getenv func(string) string) (Secrets, error) {
	var s Secrets
	var probs Problems
	s.WebhookSecrets = splitSecrets(getenv(c.GitHub.WebhookSecretEnv))
	if len(s.WebhookSecrets) == 0 {
		probs = append(probs, fmt.Sprintf("github.webhook_secret_env: the environment variable %s is empty or unset; "+
			"set it to the webhook secret configured on GitHub (comma-separated for rotation); opsbot will not start without it",
			c.GitHub.WebhookSecretEnv))
	}
	if c.GitHub.TokenEnv != "" {
		s.GitHubToken = auth.Secret(strings.TrimSpace(getenv(c.GitHub.TokenEnv)))
	}
	if c.GitHub.App != nil {
		key, err := os.ReadFile(c.GitHub.App.PrivateKeyFile)
		if err != nil {
			probs = append(probs, fmt.Sprintf("github.app.private_key_file: %v", err))
		}
		s.AppPrivateKey = key
	}
	if c.API.TokensEnv != "" {
		s.APITokens = splitSecrets(getenv(c.API.TokensEnv))
	}
	if c.Slack.TokenEnv != "" {
		s.SlackToken = auth.Secret(strings.TrimSpace(getenv(c.Slack.TokenEnv)))
	}
	if c.AuditWeb.Enabled {
		s.AuditUser = auth.Secret(getenv(c.AuditWeb.UserEnv))
		s.AuditPassword = auth.Secret(getenv(c.AuditWeb.PasswordEnv))
		if s.AuditUser == "" || s.AuditPassword == "" {
			probs = append(probs, fmt.Sprintf("audit_web: %s and %s must both be set when the audit page is enabled",
				c.AuditWeb.UserEnv, c.AuditWeb.PasswordEnv))
		}
	}
	if len(probs) > 0 {
		return s, probs
	}
	return s, nil
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
