package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

func TestValidationAtPinTime(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 7, WorkflowID: 77, Event: "pull_request", Status: "in_progress", HeadSHA: sha("c1"), HeadBranch: "kimi-tune"})
	w.GH.AddRun(theRepo, githubtest.Run{ID: 8, WorkflowID: 99, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts})
	for _, tc := range []struct{ cmd, want string }{
		{"/use 7", "run 7 has not finished yet"},
		{"/use 8", "run 8 is not a run of the sweep workflow"},
		{"/use 9", "run 9 was not found in SemiAnalysisAI/InferenceX"},
		{"/use https://github.com/SemiAnalysisAI/InferenceX/actions/runs/9/attempts/1", "run 9 was not found"},
	} {
		c := w.Comment(maintainer, tc.cmd)
		if r := w.GH.Reactions(c.ID); len(r) != 1 || r[0] != "-1" {
			t.Errorf("%s: reactions %v", tc.cmd, r)
		}
		mustContain(t, tc.cmd, w.LastReply(), "I did not pin run", tc.want)
	}
	if p := w.trail(); len(p) != 4 || p[0] != "command reuse-sweep-run rejected" {
		t.Fatalf("audit = %v", p)
	}
}

func TestValidationAgainAtUse(t *testing.T) {
	t.Parallel()
	t.Run("artifacts expired", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.ExpireArtifacts(theRepo, runR1)
		w.Push("c2")
		st := w.Statuses("c2")
		if len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep: pinned run 31147925932 no longer qualifies") {
			t.Fatalf("status = %+v", st)
		}
		mustContain(t, "invalid comment", w.LastReply(), "is invalid", "have expired", "sweeps", "authorized by @maintainer")
		if tr := w.trail(); tr[len(tr)-1] != "pin invalid" || tr[len(tr)-2] != "decision sweep" {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("rebased away", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.ForcePush(theRepo, thePR, []string{sha("d1"), sha("d2")})
		w.SendSync(sha("d2"), "")
		mustContain(t, "invalid comment", w.LastReply(), "is invalid", "not a commit of PR #2512")
	})
	t.Run("path guard", func(t *testing.T) {
		w := newWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\", \"docs/**\"]\n")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.Push("c2", "benchmarks/kimi.sh")
		mustContain(t, "invalid comment", w.LastReply(), "touch `benchmarks/kimi.sh`", "outside the allowed paths")
	})
}

// A run whose own sweep was skipped has no results: it cannot be pinned,
// and the reply names the run it reused.
func TestReusedRunCannotBePinned(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 31204430170, WorkflowID: 77, Event: "pull_request", Status: "completed",
		Conclusion: "success", HeadSHA: sha("c2"), HeadBranch: "kimi-tune"})
	w.Comment(maintainer, "/reuse-sweep-run 31204430170")
	mustContain(t, "reply", w.LastReply(), "I did not pin run 31204430170", "opsbot skipped the sweep of its commit", "reusing run 31147925932",
		"pin run 31147925932 instead")
}

// A run on a head whose sweep opsbot skipped is no sweep even when a job of
// it (collect-results) uploaded a result-named aggregate of the reused run's
// results: an explicit pin and a stage request refuse it naming the reused
// run, and a bare /reuse-sweep-run passes it over for the real sweep.
func TestSkippedRunWithAggregateArtifactIsNoSweep(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) == 0 || !strings.Contains(st[len(st)-1].Description, "reus") {
		t.Fatalf("c2 was not skipped: %+v", st)
	}
	w.GH.AddRun(theRepo, githubtest.Run{ID: 31204430170, WorkflowID: 77, Event: "pull_request", Status: "completed",
		Conclusion: "success", HeadSHA: sha("c2"), HeadBranch: "kimi-tune", CreatedAt: time.Now().Add(-time.Minute),
		Artifacts: []githubtest.Artifact{{Name: "eval_results_all"}, {Name: "changelog-metadata"}}})
	w.Comment(maintainer, "/reuse-sweep-run 31204430170")
	mustContain(t, "explicit pin", w.LastReply(), "I did not pin run 31204430170", "opsbot skipped the sweep of its commit `c2c2c2c`",
		"reusing run 31147925932", "pin run 31147925932 instead")
	w.Comment(maintainer, "/stage-results 31204430170")
	mustContain(t, "stage", w.LastReply(), "I did not stage run 31204430170", "reusing run 31147925932")
	if ds := w.GH.Dispatches(); len(ds) != 0 {
		t.Fatalf("a skipped run was dispatched for staging: %+v", ds)
	}
	w.Comment(maintainer, "/reuse-sweep-run")
	if r := w.LastReply(); strings.Contains(r, "31204430170") || !strings.Contains(r, "31147925932") {
		t.Fatalf("bare pin: want the real sweep 31147925932, not the skipped run 31204430170: %s", r)
	}
}

func TestGitHubDownDecidesSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Inject("GET /repos/{owner}/{repo}/actions/runs/{id}", githubtest.Fault{Status: 502})
	w.Push("c2")
	st := w.Statuses("c2")
	if len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep: pinned run 31147925932 could not be checked") {
		t.Fatalf("status = %+v", st)
	}
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "could not be checked") {
		t.Fatalf("gate = %v", out)
	}
}

func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("redelivered synchronize", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Push(theRepo, thePR, []string{sha("c2")})
		id := w.SendSync(sha("c2"), "")
		if code := w.SendAs(id, "pull_request", w.SyncPayload(sha("c2"))); code != http.StatusOK {
			t.Fatalf("same delivery id: %d, want 200", code)
		}
		w.SendSync(sha("c2"), "") // the same event under a new delivery id
		if n := len(w.Statuses("c2")); n != 1 {
			t.Fatalf("%d statuses on c2, want 1", n)
		}
		if n := strings.Count(strings.Join(w.Replies(), "\n"), "Sweep skipped"); n != 1 {
			t.Fatalf("%d skip comments, want 1", n)
		}
	})
	t.Run("ask before webhook", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Push(theRepo, thePR, []string{sha("c2")})
		out, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
		if out["skip-pr-sweep"] != "true" {
			t.Fatalf("ask = %v", out)
		}
		w.Settle()
		w.SendSync(sha("c2"), "")
		out2, _ := w.gate("--pr", "2512", "--sha", sha("c2"))
		if out2["skip-pr-sweep"] != "true" || out2["reuse-source-run-id"] != out["reuse-source-run-id"] {
			t.Fatalf("second ask = %v", out2)
		}
		if n := len(w.Statuses("c2")); n != 1 {
			t.Fatalf("%d statuses, want 1", n)
		}
		if tr := w.trail(); strings.Count(strings.Join(tr, ","), "decision") != 1 {
			t.Fatalf("audit = %v", tr)
		}
	})
	t.Run("two quick pushes", func(t *testing.T) {
		w := newWorld(t, "")
		w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.GH.Push(theRepo, thePR, []string{sha("c2"), sha("c3")})
		var wg sync.WaitGroup
		for _, h := range []string{"c2", "c3"} {
			body, _ := json.Marshal(w.SyncPayload(sha(h)))
			code, _ := post(t, fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", w.ID(), body, testSecret))
			if code != http.StatusAccepted {
				t.Fatalf("push %s: %d", h, code)
			}
		}
		wg.Wait()
		w.Settle()
		c2, c3 := w.Statuses("c2"), w.Statuses("c3")
		// c2 was no longer the head when its webhook was decided: the pin
		// waits for c3, GitHub's head, and only c3 skips.
		if len(c2) != 1 || !strings.HasPrefix(c2[0].Description, "sweep: commit c2c2c2c is no longer the head") ||
			len(c3) != 1 || !strings.HasPrefix(c3[0].Description, "skip") {
			t.Fatalf("c2 %+v, c3 %+v: the head of the two pushes is skipped, the commit under it sweeps", c2, c3)
		}
	})
	t.Run("replayed comment", func(t *testing.T) {
		w := newWorld(t, "")
		c := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
		w.Push("c2")                                                        // consumes the pin
		w.CommentEvent("created", maintainer, maintainer, c.ID, c.Body, "") // the old comment again, new delivery id
		w.Push("c3")
		if st := w.Statuses("c3"); !strings.HasPrefix(st[0].Description, "sweep") {
			t.Fatalf("a replayed comment pinned again: %+v", st)
		}
		if n := strings.Count(strings.Join(w.trail(), ","), "command"); n != 1 {
			t.Fatalf("the comment's commands ran %d times", n)
		}
	})
}

func TestGateAPI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ask := func(token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, w.Srv.URL+"/api/v1/gate", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	good := fmt.Sprintf(`{"repo":%q,"pr":2512,"sha":%q,"event":"pull_request","action":"synchronize"}`, theRepo, sha("c1"))
	for _, tc := range []struct {
		name, token, body string
		code              int
		want              string
	}{
		{"no token", "", good, 401, "bearer token"},
		{"wrong token", "nope", good, 401, "bearer token"},
		{"not JSON", apiToken, "repo=x", 400, "body must be JSON"},
		{"unknown field", apiToken, `{"repo":"x","sha":"abcdef0","extra":1}`, 400, "unknown field"},
		{"no sha", apiToken, fmt.Sprintf(`{"repo":%q,"pr":1}`, theRepo), 400, "commit sha"},
		{"short sha", apiToken, fmt.Sprintf(`{"repo":%q,"pr":1,"sha":"abcdef0"}`, theRepo), 400, "not a full commit SHA"},
		{"no pr", apiToken, fmt.Sprintf(`{"repo":%q,"sha":%q}`, theRepo, sha("ab")), 400, "PR number"},
		{"bad event", apiToken, fmt.Sprintf(`{"repo":%q,"pr":1,"sha":%q,"event":"release"}`, theRepo, sha("ab")), 400, "event"},
		{"unknown repo", apiToken, fmt.Sprintf(`{"repo":"someone/else","pr":1,"sha":%q}`, sha("ab")), 404, "not served"},
		{"decides", apiToken, good, 200, `"decision":"sweep"`},
	} {
		code, body := ask(tc.token, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	// An ask for an action that does not gate answers sweep and stores nothing.
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.GH.Push(theRepo, thePR, []string{sha("c2")})
	out, _ := w.gate("--pr", "2512", "--sha", sha("c2"), "--action", "labeled")
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], `"labeled" does not decide`) {
		t.Fatalf("labeled ask = %v", out)
	}
	w.SendSync(sha("c2"), "")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip") {
		t.Fatalf("after a labeled ask the synchronize must still decide: %+v", st)
	}
}

// `opsbot gate` fails closed: a server that does not answer within the
// timeout answers skip-pr-sweep=false with a warning and exits 0, or 1 with
// --strict; no token fails the step.
func TestGateCommandFailsClosed(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	env := func(k string) string {
		if k == "OPSBOT_API_TOKEN" {
			return "x"
		}
		return ""
	}
	args := []string{"gate", "--server", "http://127.0.0.1:1", "--repo", theRepo, "--pr", "1", "--sha", sha("c1"), "--github-output", out,
		"--timeout", "1s"}
	if err := run(t.Context(), args, env, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("gate with the server down: %v", err)
	}
	raw, _ := os.ReadFile(out)
	mustContain(t, "outputs", string(raw), "skip-pr-sweep=false\n", "reuse-enabled=false\n", "reuse-reason=opsbot gate failed: ")
	mustContain(t, "stdout", stdout.String(), "::warning::opsbot gate could not get a decision, so the sweep runs")
	err := run(t.Context(), append(args, "--strict"), env, strings.NewReader(""), &stdout, &stderr)
	if code, ok := err.(exitCode); !ok || code != 1 {
		t.Fatalf("--strict: %v, want exit 1", err)
	}
	stdout.Reset()
	err = run(t.Context(), args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	if code, ok := err.(exitCode); !ok || code != 1 {
		t.Fatalf("without a token: %v, want exit 1", err)
	}
	mustContain(t, "without a token", stdout.String(), "::error::", "skip-pr-sweep=false", "OPSBOT_API_TOKEN is not set")
}

// A gate ask decides only for the PR's head: an ask for another commit,
// made before the real push, answers sweep and uses up nothing, so the real
// push is still skipped.
func TestGateAskForAnotherCommitUsesUpNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	out, _ := w.gate("--pr", "2512", "--sha", sha("e9"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "commit e9e9e9e is not the head of PR #2512 (c1c1c1c is)") ||
		!strings.Contains(out["reuse-reason"], "used up nothing") {
		t.Fatalf("ask for a commit that is not the head = %v", out)
	}
	if st := w.Statuses("e9"); len(st) != 0 {
		t.Fatalf("a commit that is not the head got a status: %+v", st)
	}
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("the real push after the forged ask: %+v", st)
	}
	// Once c2 is the head (as its webhook said), the old head is not decided either.
	out, _ = w.gate("--pr", "2512", "--sha", sha("c1"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "is not the head of PR #2512 (c2c2c2c is)") {
		t.Fatalf("ask for the old head = %v", out)
	}
	out, _ = w.gate("--pr", "2512", "--sha", sha("c2"))
	if out["skip-pr-sweep"] != "true" {
		t.Fatalf("ask for the decided head = %v", out)
	}
	if tr := strings.Join(w.trail(), ","); strings.Count(tr, "decision") != 1 || !strings.Contains(tr, "pin consumed") {
		t.Fatalf("audit = %s", tr)
	}
}
