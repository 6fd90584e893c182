package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// The page says a reason in words: a raw URL it quotes (GitHub's
// documentation_url in an error) is left out.
func TestReasonsInWords(t *testing.T) {
	for in, want := range map[string]string{
		"GitHub answered 422: Validation Failed (https://docs.github.com/rest/commits/statuses)": "GitHub answered 422: Validation Failed",
		"see https://example.com/x for more":                                                     "see for more",
		"no URL here":                                                                            "no URL here",
	} {
		if got := words(in); got != want {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}

// auditBench is a store with one repository whose PR 1 has records
// records, and others spread over other PRs, and the page on it.
func auditBench(b *testing.B, records, others int) (*httptest.Server, func(path string)) {
	b.Helper()
	st, err := state.Open(filepath.Join(b.TempDir(), "a.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	const repo = "o/r"
	write := func(n int, pr func(i int) int) {
		for done := 0; done < n; {
			batch := min(20000, n-done)
			if err := st.Update(func(tx *state.Tx) error {
				for i := range batch {
					r := state.AuditRecord{Kind: "decision", Outcome: "skip", Repo: repo, PR: pr(done + i), HeadSHA: fmt.Sprintf("%040x", done+i),
						RunID: 31147925932, ActorLogin: "maintainer", RunnerSeconds: 21900, Reason: "reusing run 31147925932, authorized by @maintainer"}
					if err := tx.Audit(r); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			done += batch
		}
	}
	write(records, func(int) int { return 1 })
	write(others, func(i int) int { return 2 + i%10000 })
	if err := st.Update(func(tx *state.Tx) error {
		return tx.PutDecision(&state.Decision{Repo: repo, PR: 1, HeadSHA: fmt.Sprintf("%040x", 1), Decision: state.Skip, RunID: 31147925932,
			RunnerSeconds: 21900, DecidedAt: time.Now()})
	}); err != nil {
		b.Fatal(err)
	}
	a := &AuditWeb{Store: st, Repos: []RepoLine{{Name: repo, Workflow: ".github/workflows/run-sweep.yml", ReuseRole: "write"}},
		User: auth.Secret("maint"), Password: auth.Secret("s3cret-page-0123456"), Log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	a.Routes(mux)
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.SetBasicAuth("maint", "s3cret-page-0123456")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "</html>") {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	return srv, get
}

// BenchmarkAuditPagePR renders one PR's page when the PR has 1,000 audit
// records (the page shows the first 200).
func BenchmarkAuditPagePR(b *testing.B) {
	_, get := auditBench(b, 1000, 0)
	for b.Loop() {
		get("/audit/o/r/1")
	}
}

// BenchmarkAuditPageHeader renders the repository's page (its header of
// totals and its first 50 PRs) over 1,000,000 audit records.
func BenchmarkAuditPageHeader(b *testing.B) {
	_, get := auditBench(b, 1000, 999000)
	b.ResetTimer()
	for b.Loop() {
		get("/audit/o/r")
	}
}
