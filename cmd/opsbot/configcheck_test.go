package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lastLine is the last line of a command's output.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Every refusal `serve` makes about its file and environment, `config check`
// makes too, with the same words; its last line says what its exit code
// says. Each case here makes serve refuse to start.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a PEM block\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		env         map[string]string
		want        string
	}{
		{"a listen port that is no number", "listen=127.0.0.1:notaport", nil, `listen: "127.0.0.1:notaport": "notaport" is not a port number`},
		{"a listen port out of range", "listen=127.0.0.1:70000", nil, "port 70000 is not between 0 and 65535"},
		{"OPSBOT_LISTEN that is no address", "", map[string]string{"OPSBOT_LISTEN": "0.0.0.0"}, `listen: "0.0.0.0" is not a host:port address`},
		{"a metrics.listen that is no address", "metrics:\n  listen: \"127.0.0.1:notaport\"\n", nil, "metrics.listen:"},
		{"TLS files that do not exist", "tls:\n  cert_file: " + filepath.Join(dir, "missing.crt") + "\n  key_file: " + filepath.Join(dir, "missing.key") + "\n",
			nil, "tls.cert_file: stat " + filepath.Join(dir, "missing.crt")},
		{"TLS files that do not load", "tls:\n  cert_file: " + garbage + "\n  key_file: " + garbage + "\n", nil, "loading tls.cert_file " + garbage},
		{"metrics.token_env naming an unset variable", "metrics:\n  token_env: TEST_METRICS_TOKEN\n", nil,
			"metrics.token_env: TEST_METRICS_TOKEN (or TEST_METRICS_TOKEN_FILE) is empty or unset"},
		{"no webhook secret", "", map[string]string{"TEST_WEBHOOK_SECRET": ""}, "github.webhook_secret_env: the environment variable TEST_WEBHOOK_SECRET is empty or unset"},
		{"a GitHub App key that does not parse", "", map[string]string{"TEST_GITHUB_TOKEN": ""}, "github.app.private_key_file:"},
		{"a placeholder copied from the docs", "api:\n  github_oidc:\n    audience: \"https://YOUR-HOST\"\n", nil,
			`api.github_oidc.audience: "https://YOUR-HOST" holds the placeholder YOUR-HOST: put your own value in its place`},
		{"a GitHub App of the starter's placeholder id", "", map[string]string{"TEST_GITHUB_TOKEN": ""}, "github.app.id: 1 is the starter configuration's placeholder"},
		{"OPSBOT_STATE_PATH in a missing directory", "", map[string]string{"OPSBOT_STATE_PATH": filepath.Join(dir, "nowhere", "opsbot.db")},
			"state_path: directory " + `"` + filepath.Join(dir, "nowhere") + `" cannot be used`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := t.TempDir()
			extra, listen := tc.extra, ""
			if a, ok := strings.CutPrefix(extra, "listen="); ok {
				extra, listen = "", a
			}
			path := writeConfig(t, d, extra)
			if listen != "" {
				setListen(t, path, listen)
			}
			if strings.HasPrefix(tc.name, "a GitHub App") {
				raw, _ := os.ReadFile(path)
				id := "12345"
				if strings.Contains(tc.name, "placeholder") {
					id = "1"
				}
				cfg := strings.Replace(string(raw), `  token_env: "TEST_GITHUB_TOKEN"`, "  app:\n    id: "+id+"\n    private_key_file: "+garbage, 1)
				if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := testEnv(tc.env)
			var stdout, stderr strings.Builder
			err := run(t.Context(), []string{"serve", "--config", path}, env, strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve = %v, want a refusal saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "another server") {
				t.Fatalf("serve blames another server: %v", err)
			}
			if _, err := os.Stat(filepath.Join(d, "opsbot.db")); err == nil {
				t.Fatalf("serve opened the database before refusing")
			}
			stdout.Reset()
			err = run(t.Context(), []string{"config", "check", "--config", path}, env, strings.NewReader(""), &stdout, &stderr)
			out := stdout.String()
			if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(out, tc.want) {
				t.Fatalf("config check = %v, want exit 1 saying %q:\n%s", err, tc.want, out)
			}
			if last := lastLine(out); !strings.Contains(last, "problem(s)") || strings.Contains(last, ": ok") {
				t.Fatalf("config check exits 1 but its last line is %q", last)
			}
		})
	}
}

// What serve accepts, config check accepts, its last line saying so; with
// --no-env it checks the file alone (CI, with none of the secrets, TLS
// files or directories of the host it is written for), and still refuses
// what the file alone gets wrong.
func TestConfigCheckOKAndFileOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	out, _, err := runCLI(t, map[string]string{"TEST_WEBHOOK_SECRET": testSecret}, "config", "check", "--config", path)
	if err != nil || !strings.HasSuffix(lastLine(out), ": ok: opsbot serve would start with it in this environment") {
		t.Fatalf("config check of a good file: %v, last line %q\n%s", err, lastLine(out), out)
	}
	hostOnly := "tls:\n  cert_file: /etc/opsbot/tls.crt\n  key_file: /etc/opsbot/tls.key\nmetrics:\n  token_env: TEST_METRICS_TOKEN\n"
	path = writeConfig(t, dir, hostOnly)
	raw, _ := os.ReadFile(path)
	cfg := strings.Replace(string(raw), filepath.Join(dir, "opsbot.db"), "/var/lib/opsbot-nowhere/opsbot.db", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, nil, "config", "check", "--config", path); err == nil {
		t.Fatal("config check without --no-env passed a file whose secrets, TLS files and directory are missing here")
	}
	out, _, err = runCLI(t, nil, "config", "check", "--config", path, "--no-env")
	if err != nil || !strings.Contains(lastLine(out), ": ok: the file alone is valid (--no-env") {
		t.Fatalf("config check --no-env: %v, last line %q\n%s", err, lastLine(out), out)
	}
	if strings.Contains(out, "UNSET") {
		t.Fatalf("config check --no-env looked at the environment:\n%s", out)
	}
	bad := writeConfig(t, t.TempDir(), "")
	setListen(t, bad, "127.0.0.1:notaport")
	out, _, err = runCLI(t, nil, "config", "check", "--config", bad, "--no-env")
	if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(out, "notaport") || !strings.Contains(lastLine(out), "1 problem(s)") {
		t.Fatalf("config check --no-env of a bad listen: %v\n%s", err, out)
	}
}

// A port in use is the only listen failure that blames another server.
func TestServeSaysWhenThePortIsTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path := writeConfig(t, t.TempDir(), "")
	var stdout, stderr strings.Builder
	err = run(t.Context(), []string{"serve", "--config", path, "--listen", ln.Addr().String()}, testEnv(nil), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "another server is using the port") {
		t.Fatalf("serve on a taken port = %v", err)
	}
	// Said before anything was made: no new, empty database beside it.
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "opsbot.db")); err == nil {
		t.Fatal("serve made a database before it found the port taken")
	}
}

// setListen sets the listen address in a configuration writeConfig wrote.
func setListen(t *testing.T, path, addr string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), `listen: "127.0.0.1:0"`, `listen: "`+addr+`"`, 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A file at state_path that is no opsbot database is refused by config
// check as serve refuses it; one a running opsbot holds is not a problem.
func TestConfigCheckReadsTheDatabase(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	path := writeConfig(t, d, "")
	if err := os.WriteFile(filepath.Join(d, "opsbot.db"), []byte(strings.Repeat("not a database ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	err := run(t.Context(), []string{"config", "check", "--config", path}, testEnv(nil), strings.NewReader(""), &stdout, &stderr)
	if code, ok := err.(exitCode); !ok || code != 1 || !strings.Contains(stdout.String(), "state_path: ") {
		t.Fatalf("config check of a file that is no database = %v:\n%s", err, stdout.String())
	}
	if err := run(t.Context(), []string{"serve", "--config", path}, testEnv(nil), strings.NewReader(""), &stdout, &stderr); err == nil {
		t.Fatal("serve started on a file that is no database")
	}

	held := t.TempDir()
	heldPath := writeConfig(t, held, "")
	startServer(t, heldPath, testEnv(nil))
	stdout.Reset()
	if err := run(t.Context(), []string{"config", "check", "--config", heldPath}, testEnv(nil), strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("config check beside a running opsbot = %v:\n%s", err, stdout.String())
	}
}
