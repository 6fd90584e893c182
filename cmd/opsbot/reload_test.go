package main

import (
	"encoding/json"
	"fmt"
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
	path := filepath.Join(w.Dir, "opsbot.yaml")
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
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "pin under the running configuration", w.LastReply(), "pinned run")

	// A valid one: the maintainer (write) no longer may; listen needs a restart.
	next := strings.Replace(string(orig), `listen: "127.0.0.1:0"`, `listen: "127.0.0.1:9"`, 1) + "    reuse:\n      min_role: maintain\n"
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = reload()
	if code != http.StatusOK || body["applied"] != true || r2s(body["restart_needed_for"]) != "[listen]" {
		t.Fatalf("reload: %d %v", code, body)
	}
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "after the reload", w.LastReply(), "I did not run", "`maintain`")

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
		return strings.Contains(w.Srv.Stderr.String(), `"configuration reloaded"`) &&
			strings.Count(w.Srv.Stderr.String(), `"configuration reloaded"`) >= 2
	})
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "after SIGHUP", w.LastReply(), "pinned run")
}

func r2s(v any) string {
	b, _ := json.Marshal(v)
	return strings.ReplaceAll(strings.ReplaceAll(string(b), `"`, ""), ",", " ")
}

// A repository removed from the configuration (by a reload, or while opsbot
// was stopped) and added back does not keep its active pins: they are
// expired when it is removed, audited with why, and the push after it is
// served again sweeps instead of reusing a run pinned for an earlier push.
func TestRemovedRepositoryExpiresItsPins(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"reload", "restart"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, "")
			path := filepath.Join(w.Dir, "opsbot.yaml")
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			w.Comment(maintainer, "/reuse-sweep-run 31147925932")
			mustContain(t, "the pin", w.LastReply(), "pinned run")
			without := strings.Replace(string(orig), theRepo, "octo-org/elsewhere", 1)
			switch how {
			case "reload":
				for i, cfg := range []string{without, string(orig)} {
					if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
						t.Fatal(err)
					}
					r := w.call(http.MethodPost, "/api/v1/reload", apiToken, "", "")
					var body map[string]any
					json.Unmarshal([]byte(r.body), &body)
					if want := []any{float64(1), nil}[i]; r.code != http.StatusOK || body["expired_pins"] != want {
						t.Fatalf("reload %d: %d %v, want expired_pins %v", i, r.code, body, want)
					}
				}
			case "restart":
				w.restart(func(string) string { return without })
				w.restart(func(string) string { return string(orig) })
			}
			w.Push("c2")
			if got := w.Statuses("c2"); len(got) != 1 || !strings.HasPrefix(got[0].Description, "sweep") {
				t.Fatalf("the first push after the repository is served again = %+v, want a sweep", got)
			}
			var expired []string
			for _, r := range w.audit() {
				if r["kind"] == "pin" && r["outcome"] == "expired" {
					expired = append(expired, fmt.Sprint(r["reason"]))
				}
			}
			want := map[string]string{"reload": "its repository was removed from opsbot's configuration (a reload of " + path + ")",
				"restart": "its repository is not in opsbot's configuration (found at start)"}[how]
			if len(expired) != 1 || expired[0] != want {
				t.Fatalf("audited expiries %q, want one saying %q", expired, want)
			}
		})
	}
}

// A pin command in flight when a reload removes its repository commits
// after the removal's expiry; when the repository is added back, that pin
// is expired too, so it covers no push made after.
func TestPinInFlightAcrossARemovalIsExpiredWhenTheRepositoryReturns(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	path := filepath.Join(w.Dir, "opsbot.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := w.GH.Hold(permissionRoute)
	t.Cleanup(release)
	c := w.GH.AddComment(theRepo, thePR, maintainer.Login, "/reuse-sweep-run 31147925932")
	postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	waitFor(t, arrived, "the pin's role read")
	reload := func(cfg string) map[string]any {
		t.Helper()
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r := w.call(http.MethodPost, "/api/v1/reload", apiToken, "", "")
		var body map[string]any
		json.Unmarshal([]byte(r.body), &body)
		if r.code != http.StatusOK {
			t.Fatalf("reload: %d %v", r.code, body)
		}
		return body
	}
	reload(strings.Replace(string(orig), theRepo, "octo-org/elsewhere", 1))
	release() // the pin commits now, after its repository was removed
	w.Settle()
	if body := reload(string(orig)); body["expired_pins"] != float64(1) {
		t.Fatalf("adding the repository back: %v, want the pin from before expired", body)
	}
	w.Push("c2")
	if got := w.Statuses("c2"); len(got) != 1 || !strings.HasPrefix(got[0].Description, "sweep") {
		t.Fatalf("the first push after the repository is served again = %+v, want a sweep", got)
	}
}
