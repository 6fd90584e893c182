package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
)

// The world of the end-to-end tests: one benchmark repository on a fake
// GitHub, and opsbot serving it (internal/e2e, which a command's own tests
// use too). Here it is wrapped, so the server's tests add their helpers
// (the CLI's gate and audit among them) as methods.
const (
	theRepo   = e2e.Repo
	thePR     = e2e.PR
	runR1     = e2e.RunR1
	apiToken  = e2e.APIToken
	maintLog  = e2e.MaintLogin
	maintID   = e2e.MaintID
	readerLog = e2e.ReaderLogin
	readerID  = e2e.ReaderID
)

type world struct{ *e2e.World }

// GitHub's routes a merge asks.
const (
	routeUpdateBranch = "PUT /repos/{owner}/{repo}/pulls/{n}/update-branch"
	routeMerge        = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
)

type worldOpts = e2e.Options

type user = e2e.User

var (
	resultArtifacts = e2e.ResultArtifacts
	maintainer      = e2e.Maintainer
	reader          = e2e.Reader
)

// newWorld sets up PR 2512 (commit c1 on base b0) with a successful sweep
// run R1 on c1, a maintainer with write access and a reader, and starts
// opsbot on it. extra is appended to the repository's configuration.
func newWorld(t *testing.T, repoExtra string) *world {
	t.Helper()
	return newWorldWith(t, "", repoExtra, nil)
}

// newWorldWith adds top-level configuration and environment variables.
func newWorldWith(t *testing.T, topExtra, repoExtra string, env map[string]string) *world {
	t.Helper()
	return newWorldOpts(t, worldOpts{Top: topExtra, Repo: repoExtra, Env: env})
}

func newWorldOpts(t *testing.T, o worldOpts) *world {
	t.Helper()
	return &world{e2e.New(t, o)}
}

func payload(t *testing.T, event, action string) map[string]any { return e2e.Payload(t, event, action) }

func setPath(m map[string]any, path string, v any) { e2e.SetPath(m, path, v) }

// sha makes a commit id from a short hex name: sha("c1") is c1c1…c1.
func sha(name string) string { return e2e.SHA(name) }

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	e2e.MustContain(t, what, s, subs...)
}

// postNoSettle posts a payload and returns its delivery id without waiting.
func postNoSettle(t *testing.T, w *world, event string, p map[string]any) string {
	t.Helper()
	return w.PostNoSettle(event, p)
}

// gate runs `opsbot gate` for the PR at sha and returns its outputs.
func (w *world) gate(args ...string) (map[string]string, string) {
	w.T.Helper()
	out := filepath.Join(w.T.TempDir(), "github_output")
	var stdout, stderr bytes.Buffer
	base := []string{"gate", "--server", w.Srv.URL, "--repo", theRepo, "--github-output", out}
	err := run(w.T.Context(), append(base, args...), func(k string) string {
		if k == "OPSBOT_API_TOKEN" {
			return apiToken
		}
		return ""
	}, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		w.T.Fatalf("opsbot gate: %v\n%s\n%s", err, stderr.String(), stdout.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		w.T.Fatal(err)
	}
	if !strings.Contains(stdout.String(), string(raw)) {
		w.T.Fatalf("GITHUB_OUTPUT %q differs from stdout %q", raw, stdout.String())
	}
	vals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vals[k] = v
	}
	return vals, stdout.String()
}

// audit lists the PR's audit through `opsbot audit --server`.
func (w *world) audit() []map[string]any {
	w.T.Helper()
	var stdout, stderr bytes.Buffer
	err := run(w.T.Context(), []string{"audit", "--server", w.Srv.URL, "--repo", theRepo, "--pr", strconv.Itoa(thePR), "--format", "json"},
		func(k string) string {
			if k == "OPSBOT_API_TOKEN" {
				return apiToken
			}
			return ""
		}, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		w.T.Fatalf("opsbot audit: %v\n%s", err, stderr.String())
	}
	var recs []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &recs); err != nil {
		w.T.Fatalf("audit JSON: %v\n%s", err, stdout.String())
	}
	return recs
}

// trail is the audit as "kind outcome" lines.
func (w *world) trail() []string {
	var out []string
	for _, r := range w.audit() {
		s := fmt.Sprint(r["kind"], " ", r["outcome"])
		if c, ok := r["command"]; ok {
			s = fmt.Sprint(r["kind"], " ", c, " ", r["outcome"])
		}
		out = append(out, s)
	}
	return out
}

func newGet(url string) (*http.Request, error) { return http.NewRequest(http.MethodGet, url, nil) }

func doReq(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(r)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// mergeWorld is the merge's world (e2e.MergeWorld).
func mergeWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	return &world{e2e.MergeWorld(t, repoExtra, clock)}
}

// approveWorld is the approval's world (e2e.ApproveWorld), repoExtra added
// to the repository's configuration.
func approveWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	return &world{e2e.ApproveWorld(t, worldOpts{Repo: repoExtra}, clock)}
}
