package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// coverageRun is a run on c2 with four jobs: two benchmarks that
// succeeded, one cancelled under a name built to escape its code span, and
// one skipped.
func coverageRun(w *world, id int64) {
	w.GH.Push(theRepo, thePR, []string{sha("c2")})
	w.GH.AddRun(theRepo, githubtest.Run{ID: id, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c2"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-time.Hour),
		Jobs: []githubtest.Job{
			{Name: "benchmark (h100)", Conclusion: "success", Labels: []string{"self-hosted", "gpu-h100"}, Took: 2 * time.Hour},
			{Name: "benchmark (b200)", Conclusion: "success", Labels: []string{"self-hosted", "gpu-b200"}, Took: time.Hour},
			{Name: "x` @org/team <!-- [y](http://evil.example)", Conclusion: "cancelled", Labels: []string{"self-hosted", "gpu-h100"}, Took: 30 * time.Minute},
			{Name: "evals", Conclusion: "skipped"},
		}})
}

// A pin's reply says how much of the sweep its run covers: jobs by
// conclusion, the ones that did not succeed named (inert), its runner
// time; the audit keeps the counts.
func TestPinReplyStatesCoverage(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	coverageRun(w, 31200000007)
	w.Comment(maintainer, "/reuse-sweep-run 31200000007")
	reply := w.LastReply()
	mustContain(t, "pin reply", reply, "**Coverage**: 2 of 3 jobs succeeded, 1 cancelled (``x` @org/team <!", "``); 1 skipped; 3.5 runner hours.")
	if strings.Contains(reply, "<!-- [y]") {
		t.Fatalf("a job's name opened an HTML comment in the reply:\n%s", reply)
	}
	for _, r := range w.audit() {
		if r["kind"] == "pin" && r["outcome"] == "active" {
			if r["jobs"] != float64(3) || r["jobs_succeeded"] != float64(2) || r["runner_seconds"] != float64(3.5*3600) {
				t.Fatalf("pin audit record %v; want jobs 3, jobs_succeeded 2, runner_seconds 12600", r)
			}
			return
		}
	}
	t.Fatalf("no active pin in the audit: %v", w.trail())
}

// A run below repos[].reuse.min_coverage is refused, saying its coverage.
func TestRunBelowMinCoverageIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      min_coverage: 0.9\n")
	coverageRun(w, 31200000007)
	w.Comment(maintainer, "/reuse-sweep-run 31200000007")
	mustContain(t, "refusal", w.LastReply(), "I did not pin run 31200000007: run 31200000007 covers too little of the sweep: 2 of 3 jobs succeeded",
		"under the 90% this repository asks for")
}

// A skipped push records what the skipped sweep would have cost: the
// reused run's runner time and, with gpus_per_runner, its GPU time, in the
// decision's audit record and the metrics.
func TestSkipRecordsTheTimeItSaved(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    gpus_per_runner: {\"gpu-*\": 8}\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	// R1's default jobs: three benchmarks of 2 h on GPU runners, an
	// aggregation of 5 min on a hosted one.
	const runner, gpu = 6*3600 + 5*60, 3 * 2 * 3600 * 8
	mustContain(t, "skip comment", w.LastReply(), "The run covers 4 of 4 jobs (succeeded); this push saves 6.1 runner hours (48.0 GPU hours).")
	var found bool
	for _, r := range w.audit() {
		if r["kind"] == "decision" && r["outcome"] == "skip" {
			found = true
			if r["runner_seconds"] != float64(runner) || r["gpu_seconds"] != float64(gpu) || r["jobs"] != float64(4) {
				t.Fatalf("skip audit record %v; want runner_seconds %d, gpu_seconds %d", r, runner, gpu)
			}
		}
	}
	if !found {
		t.Fatalf("no skip in the audit: %v", w.trail())
	}
	m := w.Metrics()
	for name, want := range map[string]int{"opsbot_sweep_runner_seconds_saved_total": runner, "opsbot_sweep_gpu_seconds_saved_total": gpu} {
		key := fmt.Sprintf(`%s{repo="%s"}`, name, theRepo)
		if m[key] != fmt.Sprint(want) {
			t.Errorf("%s = %q, want %d (metrics with that name: %v)", key, m[key], want, matching(m, name))
		}
	}
}

func matching(m map[string]string, prefix string) []string {
	var out []string
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// What the skips saved, by repository and ISO week: `opsbot audit --saved`
// through the server's API and from the database file alike.
func TestAuditSavedTotals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    gpus_per_runner: {\"gpu-*\": 8}\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c3")
	out, errOut, err := runCLI(t, map[string]string{"OPSBOT_API_TOKEN": apiToken}, "audit", "--server", w.Srv.URL, "--saved", "--format", "json")
	if err != nil {
		t.Fatalf("audit --saved: %v %s", err, errOut)
	}
	var ws []struct {
		Repo          string `json:"repo"`
		Week          string `json:"week"`
		Skips         int    `json:"skips"`
		RunnerSeconds int64  `json:"runner_seconds"`
		GPUSeconds    int64  `json:"gpu_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &ws); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(ws) != 1 || ws[0].Repo != theRepo || ws[0].Skips != 2 || ws[0].RunnerSeconds != 2*(6*3600+5*60) || ws[0].GPUSeconds != 2*3*2*3600*8 {
		t.Fatalf("saved = %+v; want one week of %s with 2 skips, their runner and GPU seconds", ws, theRepo)
	}
	table, _, err := runCLI(t, map[string]string{"OPSBOT_API_TOKEN": apiToken}, "audit", "--server", w.Srv.URL, "--saved")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "table", table, "RUNNER HOURS SAVED", theRepo+"  "+ws[0].Week+"  2      12.2", "96.0")
	if _, errOut, err := runCLI(t, map[string]string{"OPSBOT_API_TOKEN": apiToken}, "audit", "--server", w.Srv.URL, "--saved", "--pr", "2512", "--repo", theRepo); err == nil ||
		!strings.Contains(errOut, "--saved lists totals by repository and week") {
		t.Fatalf("--saved with --pr: %v %s", err, errOut)
	}
	w.Srv.Stop(t)
	fromDB, _, err := runCLI(t, nil, "audit", "--db", filepath.Join(w.Dir, "opsbot.db"), "--saved", "--format", "json")
	if err != nil || !strings.Contains(fromDB, `"skips": 2`) {
		t.Fatalf("audit --db --saved: %v\n%s", err, fromDB)
	}
}
