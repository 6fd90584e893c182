package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// `opsbot gate` never follows a redirect (the bearer would go with it, to
// another port or scheme of the same host or anywhere else) and uses an
// answer only when it is for the repository, PR and commit it asked about.
func TestGateCLIRefusesRedirectsAndAnswersForSomethingElse(t *testing.T) {
	var bearerElsewhere atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearerElsewhere.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"repo": theRepo, "pr": thePR, "sha": sha("c2"), "event": "pull_request",
			"skip_pr_sweep": true, "decision": "skip"})
	}))
	t.Cleanup(elsewhere.Close)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/api/v1/gate", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"repo": theRepo, "pr": thePR, "sha": sha("c9"), "event": "pull_request",
			"skip_pr_sweep": true, "decision": "skip"})
	}))
	t.Cleanup(other.Close)
	for name, tc := range map[string]struct{ server, why string }{
		"redirect":                  {redirect.URL, "does not follow"},
		"answer for another commit": {other.URL, "answered for commit"},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), []string{"gate", "--server", tc.server, "--repo", theRepo, "--pr", "2512", "--sha", sha("c2"),
				"--github-output", out}, func(k string) string {
				if k == "OPSBOT_API_TOKEN" {
					return apiToken
				}
				return ""
			}, strings.NewReader(""), &stdout, &stderr)
			if err != nil {
				t.Fatalf("opsbot gate: %v", err)
			}
			raw, _ := os.ReadFile(out)
			if !strings.Contains(string(raw), "skip-pr-sweep=false") || !strings.Contains(stdout.String(), tc.why) {
				t.Fatalf("outputs %q, stdout %q: want a sweep saying %q", raw, stdout.String(), tc.why)
			}
		})
	}
	if b, _ := bearerElsewhere.Load().(string); b != "" {
		t.Fatalf("the bearer followed the redirect: %q", b)
	}
}
