package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// A reload (POST /api/v1/reload, or SIGHUP) reads the configuration file
// again: a valid one is in use at once for repositories; one with any
// problem is refused, every problem said, and the running one stays.
func TestConfigReload(t *testing.T) {
	w := newWorld(t, "")
	path := filepath.Join(w.dir, "opsbot.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reload := func() (int, map[string]any) {
		t.Helper()
		r := w.call(http.MethodPost, "/api/v1/reload", apiToken, "", "")
		var body map[string]any
		json.Unmarshal([]byte(r.body), &body)
		return r.code, body
	}
	// A broken file: refused, nothing changes.
	if err := os.WriteFile(path, append(orig, []byte("    reuse:\n      min_role: boss\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := reload()
	if code != http.StatusBadRequest || body["applied"] != false || !strings.Contains(r2s(body["problems"]), "min_role") {
		t.Fatalf("reload of a broken file: %d %v", code, body)
	}
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "pin under the running configuration", w.lastReply(), "pinned run")

	// A valid one: the maintainer (write) no longer may; listen needs a restart.
	next := strings.Replace(string(orig), `listen: "127.0.0.1:0"`, `listen: "127.0.0.1:9"`, 1) + "    reuse:\n      min_role: maintain\n"
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = reload()
	if code != http.StatusOK || body["applied"] != true || r2s(body["restart_needed_for"]) != "[listen]" {
		t.Fatalf("reload: %d %v", code, body)
	}
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "after the reload", w.lastReply(), "I did not run", "`maintain`")

	// SIGHUP does the same: back to write.
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	guard := make(chan os.Signal, 1) // the test binary survives the signal whatever happens
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "SIGHUP reloads the configuration", func() bool {
		return strings.Contains(w.srv.stderr.String(), `"configuration reloaded"`) &&
			strings.Count(w.srv.stderr.String(), `"configuration reloaded"`) >= 2
	})
	w.comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "after SIGHUP", w.lastReply(), "pinned run")
}

func r2s(v any) string {
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(strings.ReplaceAll(string(b), `"`, ""), ",", " ")
}
