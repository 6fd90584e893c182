// Package docs checks that the documentation stays true: the workflows it
// shows are the linted files under docs/examples, character for character.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var embedRE = regexp.MustCompile("(?s)<!-- embed: ([^ ]+) -->\n```[a-z]*\n(.*?)```\n<!-- /embed -->")

// markdown returns the repository's Markdown files that may embed examples.
func markdown(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
	}
	return out
}

// Every embedded copy equals its file, and every example is embedded.
func TestEmbeddedExamplesEqualTheirFiles(t *testing.T) {
	examples, err := filepath.Glob("examples/*.yml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples under docs/examples: %v", err)
	}
	embedded := map[string]bool{}
	for doc, text := range markdown(t) {
		for _, m := range embedRE.FindAllStringSubmatch(text, -1) {
			path := strings.TrimPrefix(m[1], "docs/")
			want, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s embeds %s, which cannot be read: %v", doc, m[1], err)
				continue
			}
			if m[2] != string(want) {
				t.Errorf("%s's copy of %s differs from the file: copy the file into the block", doc, m[1])
			}
			embedded[path] = true
		}
		// A workflow shown outside an embed block is one actionlint never sees.
		rest := embedRE.ReplaceAllString(text, "")
		for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(rest, -1) {
			if strings.Contains(block[1], "jobs:") {
				t.Errorf("%s shows a workflow that is not embedded from docs/examples:\n%s", doc, block[1])
			}
		}
	}
	for _, e := range examples {
		if !embedded[e] {
			t.Errorf("%s is embedded in no document", e)
		}
	}
}

var pinnedRE = regexp.MustCompile(`^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$`)

// workflows are every workflow file: the documented examples and the
// repository's own (the release workflow).
func workflows(t *testing.T) []string {
	t.Helper()
	examples, _ := filepath.Glob("examples/*.yml")
	own, _ := filepath.Glob("../.github/workflows/*.yml")
	if len(examples) == 0 || len(own) == 0 {
		t.Fatalf("workflows: %d examples, %d of the repository's own", len(examples), len(own))
	}
	return append(examples, own...)
}

type workflowFile struct {
	Jobs map[string]struct {
		Steps []map[string]any `yaml:"steps"`
	} `yaml:"jobs"`
}

// Every action is pinned by commit SHA, and no ${{ }} expression is
// interpolated into a run: script (it would be shell injection); values
// reach scripts through env:.
func TestExamplesPinActionsAndKeepExpressionsOutOfScripts(t *testing.T) {
	for _, e := range workflows(t) {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		var wf workflowFile
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		for name, job := range wf.Jobs {
			for i, step := range job.Steps {
				if uses, ok := step["uses"].(string); ok && !pinnedRE.MatchString(uses) {
					t.Errorf("%s: job %s step %d uses %q: pin it by commit SHA", e, name, i, uses)
				}
				if run, ok := step["run"].(string); ok && strings.Contains(run, "${{") {
					t.Errorf("%s: job %s step %d interpolates an expression into run: %q", e, name, i, run)
				}
			}
		}
	}
}

// currentMajor is the release line each GitHub action the workflows use is
// on now (Node 24); an older one (Node 20) is refused. Each pin says its
// version in a comment after the SHA.
var currentMajor = map[string]int{"actions/checkout": 7, "actions/upload-artifact": 7, "actions/download-artifact": 8,
	"actions/setup-go": 7, "docker/setup-qemu-action": 4, "docker/setup-buildx-action": 4, "docker/login-action": 4,
	"docker/build-push-action": 7}

var usesRE = regexp.MustCompile(`uses: ([\w.-]+/[\w.-]+)(/[\w./-]+)?@([0-9a-f]{40})(?: # v(\d+)\.\d+\.\d+)?`)

func TestWorkflowsPinCurrentReleases(t *testing.T) {
	for _, e := range workflows(t) {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range usesRE.FindAllStringSubmatch(string(b), -1) {
			action := m[1]
			if action == "SemiAnalysisAI/opsbot" {
				continue // opsbot's own action, at the commit the reader deploys
			}
			want, known := currentMajor[action]
			if !known {
				t.Errorf("%s uses %s, which this test does not know the current release of: add it to currentMajor", e, action)
				continue
			}
			if m[4] == "" {
				t.Errorf("%s: %s@%s says no version in a comment (# vX.Y.Z)", e, action, m[3])
				continue
			}
			if got, _ := strconv.Atoi(m[4]); got < want {
				t.Errorf("%s: %s is pinned at v%d, an old release; pin v%d (its release tag's commit SHA)", e, action, got, want)
			}
		}
	}
}

// A job that runs the repository's scripts (./…) checks the repository out
// first: without it the step fails on the runner, which lint cannot see.
func TestJobsCheckOutBeforeRunningScripts(t *testing.T) {
	script := regexp.MustCompile(`(^|[\s"'(])\./[\w.-]`)
	for _, e := range workflows(t) {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		var wf workflowFile
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		for name, job := range wf.Jobs {
			checkedOut := false
			for i, step := range job.Steps {
				if uses, ok := step["uses"].(string); ok && strings.HasPrefix(uses, "actions/checkout@") {
					checkedOut = true
				}
				if run, ok := step["run"].(string); ok && script.MatchString(run) && !checkedOut {
					t.Errorf("%s: job %s step %d runs %q with no checkout before it", e, name, i, strings.TrimSpace(run))
				}
			}
		}
	}
}

// The migration of the real reuse-sweep-gate job is a diff of under 15 lines.
func TestMigrationDiffIsShort(t *testing.T) {
	text := markdown(t)["github-actions.md"]
	m := regexp.MustCompile("(?s)## Migrating the `reuse-sweep-gate` job.*?```diff\n(.*?)```").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/github-actions.md shows no migration diff")
	}
	if n := strings.Count(m[1], "\n"); n >= 15 {
		t.Errorf("the migration diff is %d lines, want under 15", n)
	}
	if !strings.Contains(m[1], "+      id-token: write") && !strings.Contains(m[1], "id-token: write}") {
		t.Errorf("the migration does not grant id-token: write:\n%s", m[1])
	}
}

// "Adding a command" in architecture.md names what a new command touches:
// every path it names exists, the list of modules is one file whose every
// line that makes a module names one command package, and the example
// command it points at is a package of tests.
func TestAddingACommandStaysTrue(t *testing.T) {
	raw, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "**Adding a command.**")
	end := strings.Index(doc, "**Adding an event.**")
	if start < 0 || end < start {
		t.Fatal(`architecture.md lost its "Adding a command" section`)
	}
	section := doc[start:end]
	for _, path := range []string{"commands/all/all.go", "opsbot.example.yaml", "docs/configuration.md", "README.md", "commands/example"} {
		if !strings.Contains(section, "`"+path+"`") {
			t.Errorf("the section does not name %s", path)
		}
		if _, err := os.Stat(filepath.Join("..", path)); err != nil {
			t.Errorf("the section names %s: %v", path, err)
		}
	}
	list, err := os.ReadFile(filepath.Join("..", "commands", "all", "all.go"))
	if err != nil {
		t.Fatal(err)
	}
	modules := regexp.MustCompile(`(?m)^\t\t([a-z]+)\.Module\(d\),$`).FindAllStringSubmatch(string(list), -1)
	if len(modules) < 5 {
		t.Fatalf("commands/all/all.go lists %d modules, one a line; want opsbot's five at least", len(modules))
	}
	for _, m := range modules {
		if _, err := os.Stat(filepath.Join("..", "commands", m[1])); err != nil {
			t.Errorf("commands/all lists %s.Module, which is no package under commands/: %v", m[1], err)
		}
	}
	example, err := filepath.Glob(filepath.Join("..", "commands", "example", "*.go"))
	if err != nil || len(example) == 0 {
		t.Fatalf("commands/example has no Go files: %v", err)
	}
	for _, f := range example {
		if !strings.HasSuffix(f, "_test.go") {
			t.Errorf("commands/example/%s is not a test file: the example command links into nothing", filepath.Base(f))
		}
	}
}
