package docs

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
)

// The example sweep workflow keeps every gating rule of the benchmark
// repository's own run-sweep.yml that opsbot does not take over: its
// decision whether a push sweeps (the setup job runs) agrees, in every case,
// with the reference the repository's own gating suite
// (utils/changelog_gate_tests/test_run_sweep_gating.py) holds its workflow
// to: the same 17,666 scenarios (4 actions x 2 draft x 23 label sets x 12
// label names x 2 reuse x 2 changelog outcomes x 2 commit messages, plus
// two pushes) and its named cases. The example's own conditions
// (check-changelog, reuse-sweep-gate, setup) are read from the file and
// evaluated by an expression engine of GitHub's subset, as the suite does;
// where the suite's gate answers "reuse authorized", opsbot answers as
// opsbot.example.yaml's label rules decide (skip only for a full sweep).
func TestExampleWorkflowGatesAsTheRepositorysSuite(t *testing.T) {
	raw, err := os.ReadFile("examples/run-sweep.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]yaml.Node `yaml:"on"`
		Jobs map[string]struct {
			If string `yaml:"if"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	cond := func(job string) string {
		j, ok := wf.Jobs[job]
		if !ok {
			t.Fatalf("the example has no job %s", job)
		}
		return j.If
	}
	registerSections.Do(func() { app.RegisterSections() }) // as the program does before it reads a configuration
	cfg, err := config.LoadFileOnly("../opsbot.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.Repos[0]
	ex := exampleDAG{check: cond("check-changelog"), gate: cond("reuse-sweep-gate"), setup: cond("setup"),
		push: cond("reuse-push-gate"), groupChanges: cond("group-changes"), groupGate: cond("reuse-group-gate"),
		skips: func(sc scenario) bool {
			return sc.reuseAuth && slices.Contains(rc.GateActions, sc.action) && rc.Reuse.Judge(sc.labels, sc.draft).Full()
		}}

	// The trigger: what the suite holds of run-sweep.yml's (label events and
	// ready_for_review start it; opened and reopened do not).
	var types []string
	if n, ok := wf.On["pull_request"]; ok {
		var pr struct {
			Types []string `yaml:"types"`
		}
		if err := n.Decode(&pr); err != nil {
			t.Fatal(err)
		}
		types = pr.Types
	}
	for _, want := range []string{"synchronize", "labeled", "unlabeled", "ready_for_review"} {
		if !slices.Contains(types, want) {
			t.Errorf("the example's pull_request types %v lack %s", types, want)
		}
	}
	for _, not := range []string{"opened", "reopened"} {
		if slices.Contains(types, not) {
			t.Errorf("the example's pull_request types %v hold %s, which starts a sweep for a PR opened with a sweep label", types, not)
		}
	}

	for _, c := range namedCases() {
		if got := ex.run(t, c.sc); got != c.want {
			t.Errorf("%s: the example decides %v, the suite %v", c.name, got, c.want)
		}
		if got := referenceGate(c.sc); got != c.want {
			t.Errorf("%s: the reference decides %v, the suite's case %v", c.name, got, c.want)
		}
	}
	all := allScenarios()
	if len(all) != 17666 {
		t.Fatalf("%d scenarios, want the suite's 17666", len(all))
	}
	var differ []string
	for _, sc := range all {
		if got, want := ex.run(t, sc), referenceGate(sc); got.setup != want.setup {
			differ = append(differ, fmt.Sprintf("%+v: the example %s, the suite %s", sc, got.setup, want.setup))
		}
	}
	if len(differ) > 0 {
		t.Fatalf("%d of %d scenarios sweep otherwise than the repository's suite decides, such as:\n%s", len(differ), len(all),
			strings.Join(differ[:min(10, len(differ))], "\n"))
	}
}

var registerSections sync.Once

// scenario is one of the suite's: an event and what the workflow reads of it.
type scenario struct {
	event, action, labelName, check, msg, headRepo string
	draft, reuseAuth                               bool
	labels                                         []string
}

// decision is what the three jobs come to: check-changelog's and
// reuse-sweep-gate's results, and whether setup runs (RUN, SKIP).
type decision struct{ check, gate, setup string }

const theRepository = "SemiAnalysisAI/InferenceX"

var (
	sweepLabels       = []string{"sweep-enabled", "full-sweep-enabled", "non-canary-full-sweep-enabled", "full-sweep-fail-fast", "full-sweep-fail-fast-no-canary"}
	relevantLabels    = append(slices.Clone(sweepLabels), "all-evals", "evals-only", "agentx-fast", "skip_queue", "ci-patchwork", "engine-patch", "ci-patchwork-waived", "ci-checklist-complete")
	reuseEligible     = sweepLabels[1:]
	reuseIncompatible = []string{"evals-only", "agentx-fast"}
)

func countIn(labels, set []string) int {
	n := 0
	for _, l := range labels {
		if slices.Contains(set, l) {
			n++
		}
	}
	return n
}

// referenceGate is the suite's reference_gate: the intended gating, written
// from intent, independent of any workflow's conditions.
func referenceGate(sc scenario) decision {
	isPR := sc.event == "pull_request"
	headRepo := sc.headRepo
	if headRepo == "" {
		headRepo = theRepository
	}
	labelOK := (sc.action != "labeled" && sc.action != "unlabeled") || slices.Contains(relevantLabels, sc.labelName)
	check := "skipped"
	if isPR && !sc.draft && labelOK {
		check = "success"
		if countIn(sc.labels, sweepLabels) > 1 {
			check = "failure"
		} else if sc.check != "" {
			check = sc.check
		}
	}
	gateRuns := check == "success" && isPR && sc.action == "synchronize" && !sc.draft && countIn(sc.labels, reuseEligible) > 0 &&
		countIn(sc.labels, reuseIncompatible) == 0
	gate := "skipped"
	if gateRuns {
		gate = "success"
	}
	authorized := gateRuns && sc.reuseAuth
	reuseClause := gate == "skipped" || (gate == "success" && !authorized)
	eventOK := true
	if isPR {
		eventOK = !sc.draft && headRepo == theRepository && countIn(sc.labels, sweepLabels) > 0 && labelOK &&
			!strings.Contains(sc.msg, "[skip-sweep]")
	}
	setup := "SKIP"
	if (check == "success" || check == "skipped") && reuseClause && eventOK {
		setup = "RUN"
	}
	return decision{check, gate, setup}
}

// exampleDAG runs the example workflow's conditions for a scenario, as the
// suite's run_dag runs the repository's: check-changelog, then the gate jobs
// (opsbot's answer where the suite's gate answers reuse), then setup.
type exampleDAG struct {
	check, gate, setup, push, groupChanges, groupGate string
	skips                                             func(scenario) bool
}

func (x exampleDAG) run(t *testing.T, sc scenario) decision {
	t.Helper()
	headRepo := sc.headRepo
	if headRepo == "" {
		headRepo = theRepository
	}
	ctx := map[string]any{
		"github.event_name": sc.event, "github.repository": theRepository, "github.event.action": sc.action,
		"github.event.pull_request.draft": sc.draft, "github.event.pull_request.head.repo.full_name": headRepo,
		"github.event.pull_request.labels.*.name": sc.labels, "github.event.label.name": sc.labelName,
		"github.event.head_commit.message": sc.msg,
	}
	if sc.labelName == "" {
		ctx["github.event.label.name"] = nil
	}
	eval := func(expr string) bool {
		v, err := evalExpr(expr, ctx)
		if err != nil {
			t.Fatalf("%v in %q", err, expr)
		}
		return v
	}
	check := "skipped"
	if eval(x.check) {
		check = "success"
		if countIn(sc.labels, sweepLabels) > 1 {
			check = "failure"
		} else if sc.check != "" {
			check = sc.check
		}
	}
	ctx["needs.check-changelog.result"] = check
	ctx["needs.check-changelog.outputs.skip-pr-sweep"] = fmt.Sprint(strings.Contains(sc.msg, "[skip-sweep]"))
	gate := "skipped"
	ctx["needs.reuse-sweep-gate.outputs.skip-pr-sweep"] = ""
	if eval(x.gate) {
		gate = "success"
		ctx["needs.reuse-sweep-gate.outputs.skip-pr-sweep"] = fmt.Sprint(x.skips(sc))
	}
	ctx["needs.reuse-sweep-gate.result"] = gate
	for job, expr := range map[string]string{"reuse-push-gate": x.push, "group-changes": x.groupChanges, "reuse-group-gate": x.groupGate} {
		ctx["needs."+job+".result"] = "skipped"
		if eval(expr) {
			ctx["needs."+job+".result"] = "success"
		}
	}
	setup := "SKIP"
	if eval(x.setup) {
		setup = "RUN"
	}
	return decision{check, gate, setup}
}

type namedCase struct {
	name string
	sc   scenario
	want decision
}

// namedCases are the suite's CASES, each with what it expects.
func namedCases() []namedCase {
	pr := func(action string, labels ...string) scenario {
		return scenario{event: "pull_request", action: action, labels: labels}
	}
	with := func(sc scenario, f func(*scenario)) scenario { f(&sc); return sc }
	auth := func(sc *scenario) { sc.reuseAuth = true }
	d := func(c, g, s string) decision { return decision{c, g, s} }
	label := func(name string) func(*scenario) { return func(sc *scenario) { sc.labelName = name } }
	return []namedCase{
		{"PR-sync-full-noreuse", pr("synchronize", "full-sweep-enabled"), d("success", "success", "RUN")},
		{"PR-sync-full-reuse-authorized", with(pr("synchronize", "full-sweep-enabled"), auth), d("success", "success", "SKIP")},
		{"PR-sync-conflicting-labels-reuse-authorized", with(pr("synchronize", "full-sweep-enabled", "full-sweep-fail-fast"), auth), d("failure", "skipped", "SKIP")},
		{"PR-sync-full-changelog-failure", with(pr("synchronize", "full-sweep-enabled"), func(sc *scenario) { sc.check = "failure" }), d("failure", "skipped", "SKIP")},
		{"PR-sync-trim-sweep-enabled", pr("synchronize", "sweep-enabled"), d("success", "skipped", "RUN")},
		{"PR-sync-all-evals-without-sweep-label", pr("synchronize", "all-evals"), d("success", "skipped", "SKIP")},
		{"PR-sync-evals-only-without-sweep-label", pr("synchronize", "evals-only"), d("success", "skipped", "SKIP")},
		{"PR-sync-agentx-fast-without-sweep-label", pr("synchronize", "agentx-fast"), d("success", "skipped", "SKIP")},
		{"PR-sync-full-with-all-evals-uses-reuse", with(pr("synchronize", "full-sweep-enabled", "all-evals"), auth), d("success", "success", "SKIP")},
		{"PR-sync-full-with-evals-only-ignores-reuse", with(pr("synchronize", "full-sweep-enabled", "evals-only"), auth), d("success", "skipped", "RUN")},
		{"PR-sync-full-with-agentx-fast-ignores-reuse", with(pr("synchronize", "full-sweep-enabled", "agentx-fast"), auth), d("success", "skipped", "RUN")},
		{"PR-sync-full-with-both-modifiers-ignores-reuse", with(pr("synchronize", "full-sweep-enabled", "all-evals", "evals-only"), auth), d("success", "skipped", "RUN")},
		{"PR-sync-no-sweep-label", pr("synchronize"), d("success", "skipped", "SKIP")},
		{"PR-sync-external-fork-defers-to-trusted-dispatch", with(pr("synchronize", "full-sweep-enabled"), func(sc *scenario) { sc.headRepo = "external/InferenceX" }),
			d("success", "success", "SKIP")},
		{"PR-labeled-with-sweep-label", with(pr("labeled", "full-sweep-enabled"), label("full-sweep-enabled")), d("success", "skipped", "RUN")},
		{"PR-labeled-with-all-evals-without-sweep-label", with(pr("labeled", "all-evals"), label("all-evals")), d("success", "skipped", "SKIP")},
		{"PR-labeled-with-evals-only-without-sweep-label", with(pr("labeled", "evals-only"), label("evals-only")), d("success", "skipped", "SKIP")},
		{"PR-labeled-with-agentx-fast-without-sweep-label", with(pr("labeled", "agentx-fast"), label("agentx-fast")), d("success", "skipped", "SKIP")},
		{"PR-labeled-all-evals-modifies-full-sweep", with(pr("labeled", "full-sweep-enabled", "all-evals"), label("all-evals")), d("success", "skipped", "RUN")},
		{"PR-labeled-evals-only-modifies-full-sweep", with(pr("labeled", "full-sweep-enabled", "evals-only"), label("evals-only")), d("success", "skipped", "RUN")},
		{"PR-labeled-agentx-fast-modifies-full-sweep", with(pr("labeled", "full-sweep-enabled", "agentx-fast"), label("agentx-fast")), d("success", "skipped", "RUN")},
		{"PR-labeled-skip-queue-restarts-full-sweep", with(pr("labeled", "full-sweep-enabled", "skip_queue"), label("skip_queue")), d("success", "skipped", "RUN")},
		{"PR-unlabeled-skip-queue-restarts-numeric-sweep", with(pr("unlabeled", "full-sweep-enabled"), label("skip_queue")), d("success", "skipped", "RUN")},
		{"PR-labeled-patchwork-restarts-full-sweep", with(pr("labeled", "full-sweep-enabled", "ci-patchwork"), label("ci-patchwork")), d("success", "skipped", "RUN")},
		{"PR-unlabeled-patchwork-restarts-full-sweep", with(pr("unlabeled", "full-sweep-enabled"), label("ci-patchwork")), d("success", "skipped", "RUN")},
		{"PR-labeled-with-unrelated-label", with(pr("labeled", "full-sweep-enabled"), label("documentation")), d("skipped", "skipped", "SKIP")},
		{"PR-unlabeled-removed-sweep-label", with(pr("unlabeled"), label("full-sweep-enabled")), d("success", "skipped", "SKIP")},
		{"PR-draft", with(pr("synchronize", "full-sweep-enabled"), func(sc *scenario) { sc.draft = true }), d("skipped", "skipped", "SKIP")},
		{"PR-ready-for-review", pr("ready_for_review", "full-sweep-enabled"), d("success", "skipped", "RUN")},
		{"PR-sync-skip-sweep-tag", with(pr("synchronize", "full-sweep-enabled"), func(sc *scenario) { sc.msg = "fix: docs [skip-sweep]" }),
			d("success", "success", "SKIP")},
		{"push-additions-no-skip", scenario{event: "push", msg: "feat: add model"}, d("skipped", "skipped", "RUN")},
		{"push-skip-sweep-tag-ignored", scenario{event: "push", msg: "fix: x [skip-sweep]"}, d("skipped", "skipped", "RUN")},
	}
}

// allScenarios is the suite's _all_scenarios: its cross product of the
// input axes.
func allScenarios() []scenario {
	labelSets := [][]string{
		{}, {"sweep-enabled"}, {"full-sweep-enabled"}, {"non-canary-full-sweep-enabled"}, {"full-sweep-fail-fast"},
		{"full-sweep-fail-fast-no-canary"}, {"all-evals"}, {"evals-only"}, {"agentx-fast"}, {"all-evals", "evals-only"},
		{"documentation"}, {"sweep-enabled", "full-sweep-enabled"}, {"full-sweep-enabled", "full-sweep-fail-fast"},
		{"sweep-enabled", "all-evals"}, {"full-sweep-enabled", "all-evals"}, {"sweep-enabled", "evals-only"},
		{"full-sweep-enabled", "evals-only"}, {"sweep-enabled", "agentx-fast"}, {"full-sweep-enabled", "agentx-fast"},
		{"sweep-enabled", "all-evals", "evals-only"}, {"full-sweep-enabled", "all-evals", "evals-only"}, {"skip_queue"},
		{"full-sweep-enabled", "skip_queue"},
	}
	labelNames := []string{"full-sweep-enabled", "sweep-enabled", "all-evals", "evals-only", "agentx-fast", "skip_queue",
		"ci-patchwork", "engine-patch", "ci-patchwork-waived", "ci-checklist-complete", "documentation", ""}
	var out []scenario
	for _, a := range []string{"ready_for_review", "synchronize", "labeled", "unlabeled"} {
		for _, draft := range []bool{false, true} {
			for _, labels := range labelSets {
				for _, ln := range labelNames {
					for _, r := range []bool{false, true} {
						for _, chk := range []string{"success", "failure"} {
							for _, msg := range []string{"feat: add model", "fix: thing [skip-sweep]"} {
								out = append(out, scenario{event: "pull_request", action: a, draft: draft, labels: labels, labelName: ln,
									reuseAuth: r, check: chk, msg: msg})
							}
						}
					}
				}
			}
		}
	}
	for _, msg := range []string{"feat: add model", "fix: thing [skip-sweep]"} {
		out = append(out, scenario{event: "push", msg: msg})
	}
	return out
}

// The expression engine: the subset of GitHub Actions expressions the
// gating conditions use (&& || ! == != contains() always() success()
// cancelled(), parentheses, strings, context paths), with GitHub's
// truthiness.

var exprToken = regexp.MustCompile(`^(?:\s+|'[^']*'|==|!=|&&|\|\||[!(),]|[A-Za-z0-9_.*\-]+)`)

func evalExpr(expr string, ctx map[string]any) (bool, error) {
	var toks []string
	for s := expr; s != ""; {
		m := exprToken.FindString(s)
		if m == "" {
			return false, fmt.Errorf("bad character %q", s[0])
		}
		if strings.TrimSpace(m) != "" {
			toks = append(toks, m)
		}
		s = s[len(m):]
	}
	p := &exprParser{toks: toks, ctx: ctx}
	v, err := p.or()
	if err == nil && p.i != len(p.toks) {
		err = fmt.Errorf("trailing tokens %v", p.toks[p.i:])
	}
	return truthy(v), err
}

type exprParser struct {
	toks []string
	i    int
	ctx  map[string]any
}

func (p *exprParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *exprParser) next() string { t := p.peek(); p.i++; return t }

func (p *exprParser) or() (any, error) {
	v, err := p.and()
	for err == nil && p.peek() == "||" {
		p.next()
		var r any
		r, err = p.and()
		v = truthy(v) || truthy(r)
	}
	return v, err
}

func (p *exprParser) and() (any, error) {
	v, err := p.eq()
	for err == nil && p.peek() == "&&" {
		p.next()
		var r any
		r, err = p.eq()
		v = truthy(v) && truthy(r)
	}
	return v, err
}

func (p *exprParser) eq() (any, error) {
	v, err := p.unary()
	if err != nil || (p.peek() != "==" && p.peek() != "!=") {
		return v, err
	}
	op := p.next()
	r, err := p.unary()
	same := false
	switch v.(type) {
	case string, bool, nil:
		switch r.(type) {
		case string, bool, nil:
			same = v == r
		}
	}
	if op == "==" {
		return same, err
	}
	return !same, err
}

func (p *exprParser) unary() (any, error) {
	if p.peek() == "!" {
		p.next()
		v, err := p.unary()
		return !truthy(v), err
	}
	return p.primary()
}

func (p *exprParser) primary() (any, error) {
	t := p.next()
	switch {
	case t == "(":
		v, err := p.or()
		if p.next() != ")" {
			return nil, fmt.Errorf("no closing parenthesis")
		}
		return v, err
	case strings.HasPrefix(t, "'"):
		return strings.Trim(t, "'"), nil
	case t == "true" || t == "false":
		return t == "true", nil
	case t == "" || strings.ContainsAny(t, "!(),=&|"):
		return nil, fmt.Errorf("unexpected %q", t)
	}
	if p.peek() != "(" {
		return p.ctx[t], nil
	}
	p.next()
	var args []any
	for p.peek() != ")" {
		v, err := p.or()
		if err != nil {
			return nil, err
		}
		args = append(args, v)
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	switch t {
	case "always", "success":
		return true, nil
	case "cancelled", "failure":
		return false, nil
	case "contains":
		if len(args) != 2 {
			return nil, fmt.Errorf("contains takes two arguments")
		}
		switch h := args[0].(type) {
		case []string:
			return slices.Contains(h, fmt.Sprint(args[1])), nil
		case string:
			return strings.Contains(h, fmt.Sprint(args[1])), nil
		}
		return false, nil
	}
	return nil, fmt.Errorf("unsupported function %s()", t)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil:
		return false
	case string:
		return x != ""
	case []string:
		return len(x) > 0
	}
	return true
}

// The engine agrees with the suite's own self-consistency checks.
func TestGatingExpressionEngine(t *testing.T) {
	for _, c := range []struct {
		expr string
		ctx  map[string]any
		want bool
	}{
		{"always()", nil, true}, {"!false", nil, true}, {"'a' == 'a'", nil, true}, {"'a' != 'b'", nil, true},
		{"x != 'true'", map[string]any{"x": ""}, true}, {"x != 'true'", map[string]any{"x": "true"}, false},
		{"a && b", map[string]any{"a": "true", "b": ""}, false}, {"a || b", map[string]any{"a": "", "b": "true"}, true},
		{"contains(L, 'z')", map[string]any{"L": []string{"z"}}, true}, {"contains(L, 'z')", map[string]any{"L": []string{"q"}}, false},
		{"contains(M, '[skip-sweep]')", map[string]any{"M": "x [skip-sweep]"}, true}, {"!d", map[string]any{"d": true}, false},
		{"(a || b) && c", map[string]any{"a": "", "b": "true", "c": "true"}, true}, {"!cancelled() && x == 'y'", map[string]any{"x": "y"}, true},
	} {
		if got, err := evalExpr(c.expr, c.ctx); err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
}
