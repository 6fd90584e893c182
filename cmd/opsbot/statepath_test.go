package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The environment and --state override the file's state_path before it is
// checked: a file written for the container (/data, missing here) serves
// when $OPSBOT_STATE_PATH names a path on this machine, and config check
// says the same.
func TestStatePathOverrideComesBeforeItsCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(raw), "state_path: \""+filepath.Join(dir, "opsbot.db")+"\"", `state_path: "/nonexistent-volume/opsbot.db"`, 1)
	if cfg == string(raw) {
		t.Fatal("the test's configuration names no state_path to replace")
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "opsbot.db")
	env := map[string]string{"TEST_WEBHOOK_SECRET": testSecret, "OPSBOT_STATE_PATH": db}
	out, errOut, err := runCLI(t, env, "config", "check", "--config", path)
	if err != nil || strings.Contains(out+errOut, "state_path: directory") {
		t.Fatalf("config check with $OPSBOT_STATE_PATH: %v\n%s%s", err, out, errOut)
	}
	srv := startServing(t, path, func(k string) string { return env[k] })
	srv.Stop(t)
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the database at $OPSBOT_STATE_PATH: %v", err)
	}
}

// A --state that names no database, in a directory that holds other files
// (a typo), is refused, saying what to do, and creates nothing; with --init
// it is created, and the log says so. The configuration's own state_path is
// created on a first start, as the README's command needs.
func TestServeCreatesNoDatabaseOnAMistypedState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	typo := filepath.Join(dir, "opsbto.db")
	env := testEnv(nil)
	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"serve", "--config", path, "--state", typo}, env, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "there is no database at "+typo+", which --state names") || !strings.Contains(err.Error(), "add --init") {
		t.Fatalf("serve --state TYPO = %v", err)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Fatalf("serve --state TYPO made %s: %v", typo, err)
	}
	srv := startServing(t, path, env, "--state", typo, "--init")
	mustContain(t, "log", srv.Stderr.String(), "no database at "+typo+": creating a new, empty one (--init)")
	srv.Stop(t)
	first := startServing(t, writeConfig(t, t.TempDir(), ""), env)
	mustContain(t, "log", first.Stderr.String(), "creating a new, empty one (the configuration's state_path)")
}

// A new volume is not a typo: a directory that holds lost+found alone (a
// new ext4 volume) is empty, and $OPSBOT_STATE_PATH naming the file's own
// state_path (the container image sets it) is the file's own. config check
// refuses what serve would refuse, saying to add --init.
func TestServeCreatesTheDatabaseOnANewVolume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	volume := t.TempDir()
	if err := os.Mkdir(filepath.Join(volume, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(volume, "opsbot.db")
	env := map[string]string{"TEST_WEBHOOK_SECRET": testSecret, "OPSBOT_STATE_PATH": db}
	if out, errOut, err := runCLI(t, env, "config", "check", "--config", path); err != nil {
		t.Fatalf("config check on a new volume: %v\n%s%s", err, out, errOut)
	}
	srv := startServing(t, path, func(k string) string { return env[k] })
	mustContain(t, "log", srv.Stderr.String(), "no database at "+db+": creating a new, empty one")
	srv.Stop(t)

	// The variable naming the file's own state_path, in a directory that
	// holds other files (the configuration): created, as the file's own.
	own := filepath.Join(dir, "opsbot.db")
	env["OPSBOT_STATE_PATH"] = own
	srv = startServing(t, path, func(k string) string { return env[k] })
	mustContain(t, "log", srv.Stderr.String(), "creating a new, empty one (the configuration's state_path)")
	srv.Stop(t)

	// A typo in the variable: config check says what serve would.
	env["OPSBOT_STATE_PATH"] = filepath.Join(dir, "opsbto.db")
	out, _, err := runCLI(t, env, "config", "check", "--config", path)
	if err == nil || !strings.Contains(out, "which $OPSBOT_STATE_PATH names") || !strings.Contains(out, "add --init") {
		t.Fatalf("config check with a mistyped $OPSBOT_STATE_PATH: %v\n%s", err, out)
	}
}
