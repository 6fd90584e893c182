// Package docs checks that the documentation stays true: the workflows it
// shows are the linted files under docs/examples, character for character.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
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

// Every action is pinned by commit SHA, and no ${{ }} expression is
// interpolated into a run: script (it would be shell injection); values
// reach scripts through env:.
func TestExamplesPinActionsAndKeepExpressionsOutOfScripts(t *testing.T) {
	examples, _ := filepath.Glob("examples/*.yml")
	for _, e := range examples {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Jobs map[string]struct {
				Steps []map[string]any `yaml:"steps"`
			} `yaml:"jobs"`
		}
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
