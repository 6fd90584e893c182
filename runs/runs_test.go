package runs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const repo = "SemiAnalysisAI/InferenceX"

var results = []githubtest.Artifact{{Name: "results_bmk"}, {Name: "eval_results_all"}, {Name: "changelog-metadata"}}

type world struct {
	f  *githubtest.Fake
	gh *ghclient.Client
	v  *runs.Validator
}

func newWorld(t *testing.T) *world {
	t.Helper()
	f := githubtest.New(t)
	f.AddRepo(repo, "run-sweep.yml", 77)
	f.AddUser("author", 1, "User")
	// PR 2512: base b0, commits c1 (the benchmark), c2 (changelog link), c3 (merge of main).
	f.AddPR(repo, 2512, "author", "kimi-tune", "b0", []string{"c1", "c2", "c3"},
		[]string{"benchmarks/kimi.sh"}, []string{"perf-changelog.yaml"}, []string{"docs/guide.md"})
	base := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	add := func(run githubtest.Run) {
		if run.WorkflowID == 0 {
			run.WorkflowID = 77
		}
		if run.Event == "" {
			run.Event = "pull_request"
		}
		if run.Status == "" {
			run.Status = "completed"
		}
		if run.HeadBranch == "" {
			run.HeadBranch = "kimi-tune"
		}
		f.AddRun(repo, run)
	}
	add(githubtest.Run{ID: 100, Conclusion: "success", HeadSHA: "c1", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 101, Conclusion: "success", HeadSHA: "c1", WorkflowID: 55, Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 102, Conclusion: "success", HeadSHA: "c1", Event: "push", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 103, Status: "in_progress", HeadSHA: "c2", CreatedAt: base})
	add(githubtest.Run{ID: 104, Conclusion: "failure", HeadSHA: "c1", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 105, Conclusion: "success", HeadSHA: "zz9", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 106, Conclusion: "success", HeadSHA: "c2", CreatedAt: base.Add(time.Hour)})
	add(githubtest.Run{ID: 107, Conclusion: "success", HeadSHA: "c1", Artifacts: []githubtest.Artifact{{Name: "results_bmk", Expired: true}}, CreatedAt: base})
	add(githubtest.Run{ID: 108, Conclusion: "success", HeadSHA: "c1", Artifacts: []githubtest.Artifact{{Name: "bmk_agentic_kimi"}}, CreatedAt: base})
	// PR 2600: w1 edits the sweep workflow, w2 follows; a run on each. PR 2601: the workflow edit comes after the run.
	f.AddPR(repo, 2600, "author", "wf", "b0", []string{"w1", "w2"}, []string{".github/workflows/run-sweep.yml"}, []string{"README.md"})
	f.AddPR(repo, 2601, "author", "wf2", "b0", []string{"v1", "v2"}, []string{"README.md"}, []string{".github/actions/x/action.yml"})
	add(githubtest.Run{ID: 110, Conclusion: "success", HeadSHA: "w2", HeadBranch: "wf", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 111, Conclusion: "success", HeadSHA: "v1", HeadBranch: "wf2", Artifacts: results, CreatedAt: base})
	add(githubtest.Run{ID: 112, Conclusion: "success", HeadSHA: "c1", Artifacts: results, CreatedAt: base, Attempt: 3})
	add(githubtest.Run{ID: 113, Conclusion: "success", HeadSHA: "gone1", Artifacts: results, CreatedAt: base, PRs: []int{2512}})
	// PR 2602 merges into release, PR 2603 into bench-tmp (a branch that may carry its own run-sweep.yml);
	// PR 2604's head e1 does not contain c1 (diverged from PR 2512's commits).
	f.AddPR(repo, 2602, "author", "rel", "b0", []string{"r1"}, []string{"src/a.cu"}).BaseRef = "release"
	f.AddPR(repo, 2603, "author", "tmp", "b0", []string{"t1"}, []string{"src/kernel.cu"}).BaseRef = "bench-tmp"
	f.AddPR(repo, 2604, "author", "other", "b0", []string{"e1"}, []string{"perf-changelog.yaml"})
	add(githubtest.Run{ID: 114, Conclusion: "success", HeadSHA: "r1", HeadBranch: "rel", Artifacts: results, CreatedAt: base, PRs: []int{2602}})
	add(githubtest.Run{ID: 115, Conclusion: "success", HeadSHA: "t1", HeadBranch: "tmp", Artifacts: results, CreatedAt: base, PRs: []int{2603}})
	add(githubtest.Run{ID: 116, Conclusion: "success", HeadSHA: "c1", HeadBranch: "kimi-tune", Artifacts: results, CreatedAt: base,
		PRs: []int{2512}, PRBase: "bench-tmp"})
	add(githubtest.Run{ID: 117, Conclusion: "success", HeadSHA: "c1", HeadBranch: "kimi-tune", Artifacts: results, CreatedAt: base, PRs: []int{2604}})
	// Run 118 is a fork's run on a branch named as PR 2512's; run 119 ran on another branch of the repository; run 122
	// also lists PR 2605, of the same head into wip-base (whose run-sweep.yml may fabricate results).
	add(githubtest.Run{ID: 118, Conclusion: "success", HeadSHA: "c1", Artifacts: results, CreatedAt: base, HeadRepoID: 999,
		HeadRepo: "mallory/InferenceX"})
	add(githubtest.Run{ID: 119, Conclusion: "success", HeadSHA: "c1", HeadBranch: "other", Artifacts: results, CreatedAt: base})
	f.AddPR(repo, 2605, "author", "kimi-tune-copy", "b0", []string{"c1"}).BaseRef = "wip-base"
	add(githubtest.Run{ID: 122, Conclusion: "success", HeadSHA: "c1", Artifacts: results, CreatedAt: base, PRs: []int{2512, 2605}})
	fac, err := ghclient.NewFactory(ghclient.Options{APIURL: f.URL, Token: "t", Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := fac.For(0)
	v := &runs.Validator{GH: gh, Reused: func(r, sha string) (record.SkippedHead, bool) {
		if sha == "c2" {
			return record.SkippedHead{RunID: 100}, true // opsbot skipped c2's sweep, reusing run 100
		}
		return record.SkippedHead{}, false
	}}
	return &world{f: f, gh: gh, v: v}
}

func rules() runs.Rules {
	return runs.Rules{Repo: repo, SweepWorkflow: ".github/workflows/run-sweep.yml",
		ResultArtifacts: []string{"results_bmk", "eval_results_all", "bmk_agentic_*"}}
}

func TestEveryRule(t *testing.T) {
	w := newWorld(t)
	partial := rules()
	partial.Conclusions = []string{"success", "failure", "cancelled"}
	guard := rules()
	guard.AllowedPaths = []string{"perf-changelog.yaml", "docs/**"}
	tight := rules()
	tight.AllowedPaths = []string{"perf-changelog.yaml"}
	protected := rules()
	protected.ProtectedPaths = []string{".github/**"}
	attempt1 := rules()
	attempt1.Attempt = 1
	protectedListed := protected
	protectedListed.ListedPR = true
	protectedRelease := protected
	protectedRelease.DefaultBranch = "release" // configured; the fake repository has no such branch
	divergedHead := guard
	divergedHead.NewHead = "e1"
	decidedHead := rules()
	decidedHead.NewHead = "c3"
	stage := rules()
	stage.ListedPR = true
	cases := []struct {
		name  string
		rules runs.Rules
		run   int64
		rule  string // "" passes
	}{
		{"passes", rules(), 100, ""},
		{"agentic artifact pattern", rules(), 108, ""},
		{"not found", rules(), 999, runs.RuleNotFound},
		{"other workflow", rules(), 101, runs.RuleWorkflow},
		{"push event", rules(), 102, runs.RuleEvent},
		{"in progress", rules(), 103, runs.RuleIncomplete},
		{"failure", rules(), 104, runs.RuleConclusion},
		{"failure allowed when partial", partial, 104, ""},
		{"commit not in PR", rules(), 105, runs.RuleCommit},
		{"sweep skipped, reused another run", rules(), 106, runs.RuleSkipped},
		{"artifacts expired", rules(), 107, runs.RuleArtifacts},
		{"path guard passes", guard, 100, ""},
		{"path guard fails", tight, 100, runs.RulePaths},
		{"protected paths untouched", protected, 100, ""},
		{"protected paths touched before the run", protected, 110, runs.RuleProtected},
		{"protected paths touched after the run only", protected, 111, ""},
		{"the named attempt is the latest", attempt1, 100, ""},
		{"re-run after the named attempt", attempt1, 112, runs.RuleAttempt},
		{"protected paths, commit unknown to the compare API", protectedListed, 113, runs.RuleProtected},
		{"protected paths, compared with the configured default branch", protectedRelease, 114, runs.RuleProtected},
		{"PR based on another branch than the default", protected, 115, runs.RuleBase},
		{"PR based on the default branch, configured as another", protectedRelease, 100, runs.RuleBase},
		{"run made when the PR merged into another branch", rules(), 116, runs.RuleBase},
		{"run made when the PR merged into another branch, staging", stage, 116, runs.RuleBase},
		{"run made for another PR only", rules(), 117, runs.RuleBase},
		{"a fork's run on a branch of the same name", rules(), 118, runs.RuleHead},
		{"run on another branch", rules(), 119, runs.RuleHead},
		{"run also listing a PR of the same head into another base", rules(), 122, runs.RuleBase},
		{"decided head contains the run's commit", decidedHead, 100, ""},
		{"decided head diverged from the run's commit", divergedHead, 100, runs.RuleAncestor},
	}
	var reasons strings.Builder
	prOf := map[int64]int{110: 2600, 111: 2601, 114: 2602, 115: 2603}
	for _, tc := range cases {
		pr := 2512
		if n, ok := prOf[tc.run]; ok {
			pr = n
		}
		got, err := w.v.Validate(t.Context(), tc.rules, pr, tc.run)
		if tc.rule == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if got.ID != tc.run || got.HeadSHA == "" {
				t.Errorf("%s: %+v", tc.name, got)
			}
			continue
		}
		rej, ok := runs.IsRejection(err)
		if !ok || rej.Rule != tc.rule {
			t.Errorf("%s: %v, want rule %s", tc.name, err, tc.rule)
			continue
		}
		fmt.Fprintf(&reasons, "%s: %s\n", tc.name, rej.Reason)
	}
	golden.Assert(t, "reasons.txt", reasons.String())
}

// A fork's run lists no pull requests, so which base's workflow files it
// ran is told by the PR's timeline: a base change at or after the run was
// made refuses it. The bare command passes over another fork's runs of a
// branch with the same name.
func TestForkRunsAndBaseChanges(t *testing.T) {
	w := newWorld(t)
	p := w.f.AddPR(repo, 2700, "author", "tune", "b0", []string{"f1"}, []string{"src/a.cu"})
	p.HeadRepoID, p.HeadRepo = 999, "contributor/InferenceX"
	made := time.Now().Add(-time.Hour)
	w.f.AddRun(repo, githubtest.Run{ID: 130, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "f1", HeadBranch: "tune", HeadRepoID: 999, HeadRepo: "contributor/InferenceX", Artifacts: results, CreatedAt: made})
	w.f.AddRun(repo, githubtest.Run{ID: 131, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "f1", HeadBranch: "tune", HeadRepoID: 998, HeadRepo: "mallory/InferenceX", Artifacts: results, CreatedAt: made.Add(time.Minute)})
	if _, err := w.v.Validate(t.Context(), rules(), 2700, 130); err != nil {
		t.Fatalf("the fork's own run: %v", err)
	}
	if got, err := w.v.Newest(t.Context(), rules(), 2700); err != nil || got.ID != 130 {
		t.Fatalf("bare: %+v, %v; want run 130, not the other fork's newer run", got, err)
	}
	// Retargeted to wip-base and back after the run: its base cannot be told.
	w.f.Retarget(repo, 2700, "wip-base")
	w.f.Retarget(repo, 2700, "")
	_, err := w.v.Validate(t.Context(), rules(), 2700, 130)
	if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleBase || !strings.Contains(rej.Reason, "base branch was changed") {
		t.Fatalf("after a retarget: %v, want a base-branch refusal", err)
	}
}

// A run of this PR's head may have been made for another PR of the same
// head into another base: a fork's run lists no PRs at all, and a run lists
// no closed PR. Any such PR, open or closed, refuses the run.
func TestSiblingPRIntoAnotherBase(t *testing.T) {
	t.Run("fork", func(t *testing.T) {
		w := newWorld(t)
		w.f.AddPR(repo, 2700, "author", "tune", "b0", []string{"f1"}, []string{"src/a.cu"})
		w.f.FromFork(repo, 2700, 999, "contributor/InferenceX")
		w.f.AddPR(repo, 2701, "author", "tune", "b0", []string{"f1"}).BaseRef = "wip-base"
		w.f.FromFork(repo, 2701, 999, "contributor/InferenceX")
		w.f.AddRun(repo, githubtest.Run{ID: 140, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
			HeadSHA: "f1", HeadBranch: "tune", HeadRepoID: 999, HeadRepo: "contributor/InferenceX", Artifacts: results})
		_, err := w.v.Validate(t.Context(), rules(), 2700, 140)
		if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleBase || !strings.Contains(rej.Reason, "PR #2701 of the same head") {
			t.Fatalf("fork run with a sibling PR into wip-base: %v", err)
		}
		if _, err := w.v.Newest(t.Context(), rules(), 2700); err == nil {
			t.Fatal("the bare command picked a run a sibling PR into wip-base may have made")
		}
	})
	t.Run("closed same-repo sibling", func(t *testing.T) {
		w := newWorld(t)
		w.f.AddPR(repo, 2702, "author", "kimi-tune", "b0", []string{"c1"}).BaseRef = "wip-base"
		w.f.ClosePR(repo, 2702, false, "")
		_, err := w.v.Validate(t.Context(), rules(), 2512, 100) // lists PR 2512 only: 2702 is closed
		if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleBase || !strings.Contains(rej.Reason, "PR #2702") {
			t.Fatalf("run with a closed sibling PR into wip-base: %v", err)
		}
	})
}

func TestRebasedAway(t *testing.T) {
	w := newWorld(t)
	if _, err := w.v.Validate(t.Context(), rules(), 2512, 100); err != nil {
		t.Fatal(err)
	}
	w.f.ForcePush(repo, 2512, []string{"d1", "d2"})
	_, err := w.v.Validate(t.Context(), rules(), 2512, 100)
	if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleCommit {
		t.Fatalf("after a force-push: %v", err)
	}
}

func TestAPIErrorIsNotARejection(t *testing.T) {
	w := newWorld(t)
	w.f.Inject("GET /repos/{owner}/{repo}/actions/runs/{id}/artifacts", githubtest.Fault{Status: 500})
	_, err := w.v.Validate(t.Context(), rules(), 2512, 100)
	if err == nil {
		t.Fatal("validated with the artifacts API down")
	}
	if _, ok := runs.IsRejection(err); ok {
		t.Fatalf("%v: GitHub failing must not read as a rule failing", err)
	}
}

// A pin with a run id, cold, costs at most 6 reads (the workflow's id, the
// run, the PR, the other PRs of its head, the PR's commits, the artifacts),
// and one more (a compare) to check the protected paths.
func TestReadBudget(t *testing.T) {
	w := newWorld(t)
	if _, err := w.v.Validate(t.Context(), rules(), 2512, 100); err != nil {
		t.Fatal(err)
	}
	if n := w.f.Reads(); n > 6 {
		t.Fatalf("%d reads, want at most 6: %+v", n, w.f.Requests())
	}
	w2 := newWorld(t)
	protected := rules()
	protected.ProtectedPaths = []string{".github/**"}
	if _, err := w2.v.Validate(t.Context(), protected, 2512, 100); err != nil {
		t.Fatal(err)
	}
	if n := w2.f.Reads(); n > 7 {
		t.Fatalf("%d reads with protected paths, want at most 7: %+v", n, w2.f.Requests())
	}
}

// The bare command passes over a newer run that a workflow edit made.
func TestNewestSkipsARunOfAChangedWorkflow(t *testing.T) {
	w := newWorld(t)
	w.f.AddPR(repo, 2700, "author", "wf3", "b0", []string{"u1", "u2"}, []string{"src/a.cu"}, []string{".github/workflows/run-sweep.yml"})
	base := time.Now().Add(-time.Hour)
	w.f.AddRun(repo, githubtest.Run{ID: 120, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "u1", HeadBranch: "wf3", Artifacts: results, CreatedAt: base})
	w.f.AddRun(repo, githubtest.Run{ID: 121, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "u2", HeadBranch: "wf3", Artifacts: results, CreatedAt: base.Add(time.Minute)})
	r := rules()
	r.ProtectedPaths = []string{".github/**"}
	got, err := w.v.Newest(t.Context(), r, 2700)
	if err != nil || got.ID != 120 {
		t.Fatalf("newest = %+v, %v; want run 120", got, err)
	}
}

// Names that others control come out as one inline code span that nothing
// in them can close early.
func TestCodeSpan(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{".github/workflows/run-sweep.yml", "`.github/workflows/run-sweep.yml`"},
		{"a`b", "``a`b``"},
		{"`x", "`` `x ``"},
		{"x``", "``` x`` ```"},
		{"two\nlines", "`two lines`"},
		{" padded ", "`  padded  `"},
		{"@channel <!-- x -->", "`@channel <!\u200b-- x -->`"}, // no text that looks like opsbot's hidden marker
	} {
		if got := runs.Code(tc.in); got != tc.want {
			t.Errorf("Code(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestManyCommitsUseCompare(t *testing.T) {
	w := newWorld(t)
	commits := make([]string, 300)
	for i := range commits {
		commits[i] = fmt.Sprintf("m%03d", i)
	}
	w.f.AddPR(repo, 3000, "author", "big", "b0", commits)
	w.f.AddRun(repo, githubtest.Run{ID: 300, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "m280", HeadBranch: "big", Artifacts: results})
	w.f.AddRun(repo, githubtest.Run{ID: 301, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "c1", HeadBranch: "big", Artifacts: results})
	if _, err := w.v.Validate(t.Context(), rules(), 3000, 300); err != nil {
		t.Fatalf("commit 281 of 300: %v", err)
	}
	if _, err := w.v.Validate(t.Context(), rules(), 3000, 301); err == nil {
		t.Fatal("a commit of another PR passed")
	}
	if w.f.Count("GET /repos/{owner}/{repo}/compare/{basehead}") == 0 {
		t.Fatal("the compare API was not used beyond 250 commits")
	}
}

func TestNewestForBareCommand(t *testing.T) {
	w := newWorld(t)
	got, err := w.v.Newest(t.Context(), rules(), 2512)
	if err != nil {
		t.Fatal(err)
	}
	// 106 is newer but was a reused, sweep-less run; 100, 108 and 112 qualify.
	if got.ID != 100 && got.ID != 108 && got.ID != 112 {
		t.Fatalf("newest = %d", got.ID)
	}
	w.f.AddPR(repo, 9, "author", "empty", "b0", []string{"e1"})
	_, err = w.v.Newest(t.Context(), rules(), 9)
	rej, ok := runs.IsRejection(err)
	if !ok || rej.Rule != runs.RuleNoRun || !strings.Contains(rej.Reason, "/reuse-sweep-run <run-id>") {
		t.Fatalf("no runs: %v", err)
	}
}

func TestMatchAny(t *testing.T) {
	for _, tc := range []struct {
		pats []string
		name string
		want bool
	}{
		{[]string{"docs/**"}, "docs/a/b.md", true},
		{[]string{"docs/**"}, "docs", true},
		{[]string{"docs/**"}, "src/docs/a.md", false},
		{[]string{"perf-changelog.yaml"}, "perf-changelog.yaml", true},
		{[]string{"*.md"}, "docs/a.md", false},
		{[]string{"**/*.md"}, "docs/a.md", true},
		{[]string{"bmk_agentic_*"}, "bmk_agentic_kimi", true},
	} {
		if got := runs.MatchAny(tc.pats, tc.name); got != tc.want {
			t.Errorf("MatchAny(%v, %q) = %v", tc.pats, tc.name, got)
		}
	}
	_ = errors.New
}

// File names come from the PR's author through the compare API: in the
// path guard's reason each is one code span, and none puts a line of its own
// (a command) or a mention into opsbot's reply.
func TestPathGuardReasonHoldsHostileFileNames(t *testing.T) {
	w := newWorld(t)
	names := []string{"a`b\n/reuse-sweep-run 1", "@org/team ](http://x) <!-- opsbot:notice=1 --> |"}
	w.f.Push(repo, 2512, []string{"c4"}, names)
	tight := rules()
	tight.AllowedPaths = []string{"perf-changelog.yaml"}
	_, err := w.v.Validate(t.Context(), tight, 2512, 100)
	rej, ok := runs.IsRejection(err)
	if !ok || rej.Rule != runs.RulePaths {
		t.Fatalf("Validate = %v, want the path guard to refuse", err)
	}
	if strings.ContainsAny(rej.Reason, "\r\n") || strings.Contains(rej.Reason, "<!--") {
		t.Fatalf("reason %q holds a line break or a comment", rej.Reason)
	}
	var codes []string
	for _, n := range mdtext.Parse(rej.Reason) {
		switch n.Kind {
		case mdtext.KCode:
			codes = append(codes, n.Text)
		case mdtext.KText:
			if strings.ContainsAny(n.Raw, "@<|[]") {
				t.Errorf("text outside code spans %q holds Markdown syntax", n.Raw)
			}
		default:
			t.Errorf("reason %q has a %v node", rej.Reason, n.Kind)
		}
	}
	want := []string{"@org/team ](http://x) <!\u200b-- opsbot:notice=1 --> |", "a`b /reuse-sweep-run 1", "docs/guide.md", "perf-changelog.yaml"}
	if strings.Join(codes, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("code spans %q, want %q", codes, want)
	}
}

// A run on a head whose sweep opsbot skipped is no sweep even when one of
// its jobs uploaded a result-named artifact (an aggregate of the reused
// run's results): an explicit pin refuses it naming the reused run, and a
// bare command passes it over.
func TestSkippedRunWithAggregateArtifactIsNoSweep(t *testing.T) {
	w := newWorld(t)
	w.f.AddRun(repo, githubtest.Run{ID: 120, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: "c2", HeadBranch: "kimi-tune", Artifacts: []githubtest.Artifact{{Name: "eval_results_all"}},
		CreatedAt: time.Now().Add(-time.Hour)})
	r := rules()
	r.ProtectedPaths = []string{".github/**"}
	_, err := w.v.Validate(t.Context(), r, 2512, 120)
	if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleSkipped || !strings.Contains(rej.Reason, "reusing run 100") {
		t.Fatalf("explicit pin of run 120, whose sweep opsbot skipped: %v", err)
	}
	got, err := w.v.Newest(t.Context(), r, 2512)
	if err != nil || got.ID == 120 {
		t.Fatalf("bare selection picked run %d (%v), want a real sweep", got.ID, err)
	}
}

// The head being decided must contain the run's commit: after a force-push
// that drops the measured change and a second one that brings it back, the
// head in between (decided while the PR already shows the run's commit
// again) is refused, though its own changes are in the allowed paths.
func TestDivergedDecidedHeadIsRefused(t *testing.T) {
	w := newWorld(t)
	w.f.ForcePush(repo, 2512, []string{"h1"}, []string{"perf-changelog.yaml"})
	w.f.ForcePush(repo, 2512, []string{"c1", "h2"}, []string{"benchmarks/kimi.sh"}, []string{"docs/x.md"})
	r := rules()
	r.AllowedPaths = []string{"perf-changelog.yaml", "docs/**"}
	r.ProtectedPaths = []string{".github/**"}
	r.Attempt = 1
	r.NewHead = "h1"
	_, err := w.v.Validate(t.Context(), r, 2512, 100)
	if rej, ok := runs.IsRejection(err); !ok || rej.Rule != runs.RuleAncestor || !strings.Contains(rej.Reason, "does not contain run 100's commit `c1`") {
		t.Fatalf("head h1 without c1: %v", err)
	}
	r.NewHead = "h2"
	if _, err := w.v.Validate(t.Context(), r, 2512, 100); err != nil {
		t.Fatalf("head h2 contains c1 and only docs after it: %v", err)
	}
}
