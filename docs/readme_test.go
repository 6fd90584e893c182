package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/metrics"
)

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A newcomer reads the README in ten minutes: it stays short and carries
// the two commands, as the tests and CI run them.
func TestReadmeIsShortAndCarriesTheTwoCommands(t *testing.T) {
	readme := readDoc(t, "../README.md")
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("the README is %d lines; keep it at most 250 and move reference material into docs/", n)
	}
	for _, cmd := range []string{
		"OPSBOT_WEBHOOK_SECRET=change-me-to-a-long-secret go run ./cmd/opsbot serve --config opsbot.example.yaml",
		"go test -race ./...",
	} {
		if !strings.Contains(readme, "```sh\n"+cmd+"\n```") {
			t.Errorf("the README lost the command %q (in a sh block of its own)", cmd)
		}
	}
	if !strings.Contains(readDoc(t, "../.ci/run"), "go test -race") {
		t.Error(".ci/run no longer runs the README's test command")
	}
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE   = regexp.MustCompile("(?s)```.*?```")
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		out[slug(h[1])] = true
	}
	return out
}

// Every link between the README and the docs reaches a file that exists,
// and a heading that exists in it: moving a section breaks no link.
func TestDocLinksReachTheirTargets(t *testing.T) {
	docs, _ := filepath.Glob("*.md")
	files := []string{"../README.md", "../deploy/kubernetes/README.md"}
	for _, d := range docs {
		files = append(files, d)
	}
	for _, f := range files {
		text := readDoc(t, f)
		for _, m := range linkRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s links to %s, which does not exist", f, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(readDoc(t, resolved))[anchor] {
				t.Errorf("%s links to %s, whose heading #%s does not exist", f, target, anchor)
			}
		}
	}
}

// The metrics reference lists every series opsbot can export, each with
// exactly its labels, whether or not it has a value yet.
func TestMetricsTableIsTheRegistry(t *testing.T) {
	m := metrics.New(func() (int, time.Time, int, error) { return 0, time.Time{}, 0, nil },
		func() (int, time.Time, error) { return 0, time.Time{}, nil }, time.Now)
	m.BuildInfo("v", "c")
	series := m.Series()
	text := readDoc(t, "operations.md")
	start := strings.Index(text, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end > 0 {
		section = section[:end]
	}
	documented := map[string]string{}
	for _, row := range strings.Split(section, "\n") {
		if !strings.HasPrefix(row, "| `opsbot_") {
			continue
		}
		first := strings.Split(row, "|")[1]
		for _, g := range regexp.MustCompile("`(opsbot_[a-z_]+)(\\{[a-z_,]*\\})?`").FindAllStringSubmatch(first, -1) {
			documented[g[1]] = strings.Trim(g[2], "{}")
		}
	}
	for name, labels := range series {
		got, ok := documented[name]
		if !ok {
			t.Errorf("docs/operations.md's metrics table does not list %s{%s}", name, strings.Join(labels, ","))
			continue
		}
		if want := strings.Join(labels, ","); got != want {
			t.Errorf("docs/operations.md lists %s{%s}; it is exported with {%s}", name, got, want)
		}
	}
	for name := range documented {
		if _, ok := series[name]; !ok {
			t.Errorf("docs/operations.md lists %s, which opsbot does not export", name)
		}
	}
	if len(series) < 20 {
		t.Fatalf("metrics.Series() found %d series: %v", len(series), series)
	}
}

// The Slack buttons the configuration reference names are the ones the
// commands offer (the other pages point at it).
func TestSlackButtonsNamedAreTheOffered(t *testing.T) {
	var texts []string
	for _, b := range app.Grammar().SlackButtons(1234, func(int64) string { return "" }) {
		texts = append(texts, strings.ReplaceAll(b.Text, "1234", "R"))
	}
	if len(texts) == 0 {
		t.Fatal("no command offers a Slack button")
	}
	for _, doc := range []string{"configuration.md"} {
		text := readDoc(t, doc)
		for _, b := range texts {
			if !strings.Contains(text, "**"+b+"**") {
				t.Errorf("%s does not name the Slack button **%s**", doc, b)
			}
		}
	}
}

// Every test docs/security.md names as the proof of a threat exists.
func TestSecurityNamesTestsThatExist(t *testing.T) {
	var defined strings.Builder
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			defined.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all := defined.String()
	named := regexp.MustCompile("`(Test[A-Za-z0-9_]+)(/[^`]*)?`").FindAllStringSubmatch(readDoc(t, "security.md"), -1)
	if len(named) < 50 {
		t.Fatalf("security.md names %d tests", len(named))
	}
	for _, m := range named {
		if !strings.Contains(all, "func "+m[1]+"(") {
			t.Errorf("security.md names %s, which no test defines", m[1])
		}
	}
}

// The README's first gate is paste-and-pass: its gate job is, line for
// line, the job of docs/examples/first-gate.yml, which CI lints with
// actionlint like every example workflow.
func TestReadmeGateIsTheLintedExample(t *testing.T) {
	readme := readDoc(t, "../README.md")
	m := regexp.MustCompile("(?s)\n   ```yaml\n(   reuse-sweep-gate:\n.*?)   ```\n").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README shows no reuse-sweep-gate job")
	}
	var snippet []string
	for _, l := range strings.Split(strings.TrimRight(m[1], "\n"), "\n") {
		snippet = append(snippet, strings.TrimPrefix(l, "   "))
	}
	example := readDoc(t, "examples/first-gate.yml")
	i := strings.Index(example, "\n  reuse-sweep-gate:\n")
	if i < 0 {
		t.Fatal("docs/examples/first-gate.yml has no reuse-sweep-gate job")
	}
	job, _, _ := strings.Cut(example[i+1:], "\n\n")
	var lines []string
	for _, l := range strings.Split(job, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "  "))
	}
	if got, want := strings.Join(snippet, "\n"), strings.Join(lines, "\n"); got != want {
		t.Fatalf("the README's gate job:\n%s\ndocs/examples/first-gate.yml's:\n%s", got, want)
	}
}
