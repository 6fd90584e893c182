package main

import (
	"bytes"
	"strings"
	"testing"
)

// A webhook secret or API token shorter than 16 characters (a fragment of a
// comma-split list, such as "ab") stops the server from starting and fails
// `config check`, each naming the setting and never the value.
func TestShortSecretsAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a comma-split token fragment", map[string]string{"TEST_API_TOKENS": "ab," + apiToken}, "api.tokens_env: value 1 of 2 in TEST_API_TOKENS is 2 characters long; use at least 16"},
		{"a short webhook secret", map[string]string{"TEST_WEBHOOK_SECRET": testSecret + ",s3cret"}, "github.webhook_secret_env: value 2 of 2 in TEST_WEBHOOK_SECRET is 6 characters long"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"serve", "--config", cfg}, testEnv(tc.env), strings.NewReader(""), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: serve = %v, want an error with %q", tc.name, err, tc.want)
		}
		stdout.Reset()
		err = run(t.Context(), []string{"config", "check", "--config", cfg}, testEnv(tc.env), strings.NewReader(""), &stdout, &stderr)
		if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%s: config check = %v\n%s, want exit 1 with %q", tc.name, err, stdout.String(), tc.want)
		}
		if strings.Contains(stdout.String(), "s3cret") || (err != nil && strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("%s: a secret's value was printed", tc.name)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"config", "check", "--config", cfg}, testEnv(nil), strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("config check with good secrets: %v\n%s", err, stdout.String())
	}
}
