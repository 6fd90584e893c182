package commands_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
)

type (
	Command = commands.Command
	Options = commands.Options
)

const (
	Reuse         = reuse.Name
	Stage         = stage.Name
	Help          = help.Name
	UsageReuse    = reuse.Usage
	UsageUse      = reuse.UsageUse
	UsageStage    = stage.Usage
	UsageHelp     = help.Usage
	UsageLimit    = commands.UsageLimit
	MaxPerComment = commands.MaxPerComment
)

var opt = Options{Repo: repo}

// Parse reads body with opsbot's commands.
func Parse(body string, opt Options) []Command { return parser.Parse(body, opt) }

// c is shorthand for an expected command.
func c(line int, name string, run int64) Command { return Command{Line: line, Name: name, RunID: run} }
func cancel(line int) Command                    { return Command{Line: line, Name: Reuse, Cancel: true} }
func usage(line int, name, text string) Command  { return Command{Line: line, Name: name, Error: text} }

var parseCases = []struct {
	name string
	body string
	want []Command
}{
	// Accepted.
	{"pinned", "/reuse-sweep-run 31147925932", []Command{c(1, Reuse, 31147925932)}},
	{"bare", "/reuse-sweep-run", []Command{c(1, Reuse, 0)}},
	{"use alias", "/use 42", []Command{c(1, Reuse, 42)}},
	{"cancel", "/reuse-sweep-run cancel", []Command{cancel(1)}},
	{"cancel any case", "/Reuse-Sweep-Run CANCEL", []Command{cancel(1)}},
	{"stage pinned", "/stage-results 30337121602", []Command{c(1, Stage, 30337121602)}},
	{"stage bare", "/stage-results", []Command{c(1, Stage, 0)}},
	{"help", "/opsbot help", []Command{c(1, Help, 0)}},
	{"help any case", "/OPSBOT Help", []Command{c(1, Help, 0)}},
	{"name case-insensitive", "/REUSE-SWEEP-RUN 7", []Command{c(1, Reuse, 7)}},
	{"three spaces indent", "   /use 7", []Command{c(1, Reuse, 7)}},
	{"tabs between args", "/use\t7\t", []Command{c(1, Reuse, 7)}},
	{"trailing spaces", "/reuse-sweep-run 7   ", []Command{c(1, Reuse, 7)}},
	{"after text", "LGTM, the later commits only touch the changelog.\n\n/reuse-sweep-run 31147925932\n",
		[]Command{c(3, Reuse, 31147925932)}},
	{"run URL", "/use https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932", []Command{c(1, Reuse, 31147925932)}},
	{"run URL other case", "/use https://GitHub.com/semianalysisai/inferencex/actions/runs/5", []Command{c(1, Reuse, 5)}},
	{"run URL attempt", "/reuse-sweep-run https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932/attempts/2",
		[]Command{c(1, Reuse, 31147925932)}},
	{"run URL job", "/stage-results https://github.com/SemiAnalysisAI/InferenceX/actions/runs/9/job/123", []Command{c(1, Stage, 9)}},
	{"max int64", "/use 9223372036854775807", []Command{c(1, Reuse, 9223372036854775807)}},
	{"leading zeros", "/use 007", []Command{c(1, Reuse, 7)}},
	{"CRLF", "hello\r\n/use 5\r\n/opsbot help\r\n", []Command{c(2, Reuse, 5), c(3, Help, 0)}},
	// A lone CR ends a line, as CommonMark and GitHub read it.
	{"a lone CR before a command", "LGTM\r/use 5", []Command{c(2, Reuse, 5)}},
	{"a fence opened after a lone CR", "a\r```\n/use 1\n```", nil},
	{"BOM", "\ufeff/use 5", []Command{c(1, Reuse, 5)}},
	{"several in order", "/stage-results 1\n/use 2\n/opsbot help\n/reuse-sweep-run cancel",
		[]Command{c(1, Stage, 1), c(2, Reuse, 2), c(3, Help, 0), cancel(4)}},
	{"after closed fence", "```\n/use 1\n```\n/use 2", []Command{c(4, Reuse, 2)}},
	{"after closed tilde fence", "~~~sh\n/use 1\n~~~\n/use 2", []Command{c(4, Reuse, 2)}},
	{"after closed HTML comment", "<!--\n/use 1\n-->\n/use 2", []Command{c(4, Reuse, 2)}},
	{"after quote", "> /use 1\n\n/use 2", []Command{c(3, Reuse, 2)}},
	// CommonMark's block structure (goldmark, GFM), as GitHub renders it.
	{"after an HTML block and a blank line", "<details>\n\n/use 1\n\n</details>", []Command{c(3, Reuse, 1)}},
	{"after an inline HTML comment over lines", "x <!--\n/use 1\n-->\n/use 2", []Command{c(4, Reuse, 2)}},
	{"an unclosed inline comment ends with its paragraph", "x <!-- never closed\n\n/use 2", []Command{c(3, Reuse, 2)}},
	{"setext heading", "/use 1\n---", []Command{c(1, Reuse, 1)}},

	// Ignored: never commands.
	{"empty", "", nil},
	{"no slash", "looks good to me", nil},
	{"mid sentence", "please run /reuse-sweep-run 1 when ready", nil},
	{"fenced backticks", "```\n/reuse-sweep-run 1\n```", nil},
	{"fenced with info", "```bash\n/use 1\n```", nil},
	{"fenced tildes", "~~~\n/use 1\n~~~", nil},
	{"fence longer close", "````\n/use 1\n```\n/use 2\n````", nil},
	{"unclosed fence", "text\n```\n/use 1\n/use 2", nil},
	{"indented fence", "  ```\n/use 1\n  ```", nil},
	{"indented four spaces", "    /use 1", nil},
	{"indented tab", "\t/use 1", nil},
	{"quote", "> /use 1", nil},
	{"nested quote", "> > /use 1", nil},
	{"indented quote", "  > /use 1", nil},
	{"HTML comment one line", "<!-- /use 1 -->", nil},
	{"HTML comment multi line", "<!--\n/use 1\n/opsbot help\n-->", nil},
	{"HTML comment unclosed", "<!--\n/use 1", nil},
	{"HTML comment after command", "/use 1 <!-- note -->", nil},
	{"inline code", "`/use 1`", nil},
	{"inline code fence-like", "```/use 1```", nil},
	{"list item", "- /use 1", nil},
	{"numbered list", "1. /use 1", nil},
	{"lookalike suffix", "/reuse-sweep-runs 1", nil},
	{"lookalike stage", "/stage-results-now", nil},
	{"lookalike use", "/user 1", nil},
	{"lookalike opsbot", "/opsbots help", nil},
	{"path", "/usr/bin/env", nil},
	{"slash only", "/", nil},
	{"argument on next line", "/use\n1", []Command{usage(1, Reuse, UsageUse)}},
	{"emphasis", "**/use 1**", nil},
	{"lazy continuation of a quote", "> quoted\n/reuse-sweep-run 31147925932", nil},
	{"lazy continuation of a nested quote", "> > quoted\n/use 1", nil},
	{"lazy continuation of a list item", "- item\n/use 1", nil},
	{"HTML pre block", "<pre>\n/use 1\n</pre>", nil},
	{"HTML details block", "<details>\n<summary>notes</summary>\n/use 1\n</details>", nil},
	{"HTML div block", "<div>\n/opsbot help\n</div>", nil},
	{"table cell", "| a |\n|---|\n| b |\n/use 1", nil},

	// Rejected: usage errors.
	{"trailing words", "/reuse-sweep-run 12 please", []Command{usage(1, Reuse, UsageReuse)}},
	{"letters", "/reuse-sweep-run abc", []Command{usage(1, Reuse, UsageReuse)}},
	{"bare use", "/use", []Command{usage(1, Reuse, UsageUse)}},
	{"use cancel", "/use cancel", []Command{usage(1, Reuse, UsageUse)}},
	{"zero", "/use 0", []Command{usage(1, Reuse, UsageUse)}},
	{"negative", "/use -5", []Command{usage(1, Reuse, UsageUse)}},
	{"plus sign", "/use +5", []Command{usage(1, Reuse, UsageUse)}},
	{"overflow", "/use 9223372036854775808", []Command{usage(1, Reuse, UsageUse)}},
	{"twenty digits", "/use 12345678901234567890", []Command{usage(1, Reuse, UsageUse)}},
	{"non-ASCII digits", "/use ３１１４", []Command{usage(1, Reuse, UsageUse)}},
	{"Arabic-Indic digits", "/stage-results ٣٤", []Command{usage(1, Stage, UsageStage)}},
	{"non-breaking space", "/use\u00a05", []Command{usage(1, Reuse, UsageUse)}},
	{"trailing period", "/use 5.", []Command{usage(1, Reuse, UsageUse)}},
	{"other repository URL", "/use https://github.com/someone/else/actions/runs/5", []Command{usage(1, Reuse, UsageUse)}},
	{"http URL", "/use http://github.com/SemiAnalysisAI/InferenceX/actions/runs/5", []Command{usage(1, Reuse, UsageUse)}},
	{"other host URL", "/use https://evil.example/SemiAnalysisAI/InferenceX/actions/runs/5", []Command{usage(1, Reuse, UsageUse)}},
	{"URL not a run", "/use https://github.com/SemiAnalysisAI/InferenceX/pull/5", []Command{usage(1, Reuse, UsageUse)}},
	{"URL bad tail", "/use https://github.com/SemiAnalysisAI/InferenceX/actions/runs/5/logs", []Command{usage(1, Reuse, UsageUse)}},
	{"URL query", "/use https://github.com/SemiAnalysisAI/InferenceX/actions/runs/5?pr=1", []Command{usage(1, Reuse, UsageUse)}},
	{"cancel extra", "/reuse-sweep-run cancel now", []Command{usage(1, Reuse, UsageReuse)}},
	{"stage two runs", "/stage-results 1 2", []Command{usage(1, Stage, UsageStage)}},
	{"opsbot bare", "/opsbot", []Command{usage(1, Help, UsageHelp)}},
	{"opsbot other", "/opsbot please", []Command{usage(1, Help, UsageHelp)}},
	{"usage error then good", "/use x\n/use 3", []Command{usage(1, Reuse, UsageUse), c(2, Reuse, 3)}},
}

func TestParseTable(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Parse(tc.body, opt)
			assertCommands(t, got, tc.want)
		})
	}
}

func assertCommands(t *testing.T, got, want []Command) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d commands %s, want %d %s", len(got), js(got), len(want), js(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Line != w.Line || g.Name != w.Name || g.RunID != w.RunID || g.Cancel != w.Cancel || g.Error != w.Error {
			t.Errorf("command %d = %s, want %s", i, js(g), js(w))
		}
		if g.Error != "" && g.Reason == "" {
			t.Errorf("command %d: usage error without a reason", i)
		}
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestParseFixtureComments(t *testing.T) {
	want := map[string][]Command{
		"bare-reuse.md":                       {c(1, Reuse, 0)},
		"pinned-reuse.md":                     {c(1, Reuse, 31147925932)},
		"pinned-reuse-after-text.md":          {c(3, Reuse, 31147925932)},
		"stage-results-pinned.md":             {c(1, Stage, 30337121602)},
		"signoff-mentions-commands-inline.md": nil,
		"verdict-quotes-command-midline.md":   nil,
		"welcome-comment.md":                  nil,
		"staged-reply-from-bot.md":            nil,
	}
	files := fixtures.CommentFiles(t)
	if len(files) != len(want) {
		t.Errorf("fixture comments %v; the table knows %d", files, len(want))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			w, ok := want[f]
			if !ok {
				t.Fatalf("no expectation for %s", f)
			}
			assertCommands(t, Parse(fixtures.Comment(t, f), opt), w)
		})
	}
}

func TestAtMostTenCommands(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 13; i++ {
		b.WriteString("/opsbot help\n")
	}
	got := Parse(b.String(), opt)
	if len(got) != 11 {
		t.Fatalf("got %d results, want 10 commands and one usage error", len(got))
	}
	for i := 0; i < 10; i++ {
		if got[i].Error != "" {
			t.Fatalf("command %d: %s", i, got[i].Error)
		}
	}
	if got[10].Error != UsageLimit || got[10].Line != 11 {
		t.Fatalf("11th = %s, want the limit usage error on line 11", js(got[10]))
	}
}

func TestParseJSONShape(t *testing.T) {
	body := "Verified.\n\n/reuse-sweep-run 31147925932\n\n/reuse-sweep-run\n/reuse-sweep-run cancel\n/stage-results 30337121602\n/opsbot help\n/use\n"
	got, err := json.Marshal(Parse(body, opt))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"line":3,"command":"reuse-sweep-run","run_id":31147925932},{"line":5,"command":"reuse-sweep-run"},` +
		`{"line":6,"command":"reuse-sweep-run","cancel":true},{"line":7,"command":"stage-results","run_id":30337121602},` +
		`{"line":8,"command":"help"},{"line":9,"command":"reuse-sweep-run","error":"usage: /use \u003crun-id or run URL\u003e"}]`
	if string(got) != want {
		t.Fatalf("JSON:\n got %s\nwant %s", got, want)
	}
}

func TestTextsGolden(t *testing.T) {
	for _, tc := range []struct{ file, body string }{
		{"usage-use.md", "/use"},
		{"usage-reuse.md", "/reuse-sweep-run 12 please"},
		{"usage-stage.md", "/stage-results abc"},
		{"usage-help.md", "/opsbot"},
		{"usage-other-repo.md", "/use https://github.com/someone/else/actions/runs/5"},
	} {
		cmds := Parse(tc.body, opt)
		if len(cmds) != 1 {
			t.Fatalf("%q: %d commands", tc.body, len(cmds))
		}
		golden.Assert(t, tc.file, commands.UsageReply(parser, "octocat", cmds[0]))
	}
	var many strings.Builder
	for i := 0; i < 11; i++ {
		many.WriteString("/opsbot help\n")
	}
	golden.Assert(t, "usage-limit.md", commands.UsageReply(parser, "octocat", Parse(many.String(), opt)[10]))
	golden.Assert(t, "edited.md", commands.EditedReply("octocat", Parse("fixed a typo\n/use 31147925932\n/opsbot help", opt)))
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.body)
	}
	f.Add("/use 1\n" + strings.Repeat("/opsbot help\n", 12))
	f.Fuzz(func(t *testing.T, body string) {
		got := Parse(body, opt)
		lines := strings.Count(commands.Newlines(body), "\n") + 1 // a lone CR ends a line too
		if !strings.Contains(body, "/") && len(got) != 0 {
			t.Fatalf("no '/' in the body, yet %d commands", len(got))
		}
		if len(got) > MaxPerComment+1 {
			t.Fatalf("%d results, more than %d", len(got), MaxPerComment+1)
		}
		prev := 0
		for _, c := range got {
			if c.Line < 1 || c.Line > lines {
				t.Fatalf("line %d outside the comment's %d lines", c.Line, lines)
			}
			if c.Line <= prev {
				t.Fatalf("line %d after line %d: one outcome per line, in order", c.Line, prev)
			}
			prev = c.Line
			switch c.Name {
			case Reuse, Stage, Help:
			default:
				t.Fatalf("unknown command %q", c.Name)
			}
			if c.Error == "" && c.RunID < 0 {
				t.Fatalf("negative run id %d", c.RunID)
			}
			if c.Error != "" && (c.RunID != 0 || c.Cancel) {
				t.Fatalf("a usage error carries a run or cancel: %s", js(c))
			}
		}
	})
}

func BenchmarkParseLongestFixture(b *testing.B) {
	body := fixtures.Comment(b, "signoff-mentions-commands-inline.md")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(body, opt)
	}
}

func Benchmark64KiBComment(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 64<<10 {
		sb.WriteString("Verified that the /reuse-sweep-run 31147925932 covers it; see https://github.com/o/r/actions/runs/1\n")
		sb.WriteString("> quoted /use 1\n    indented /use 2\n")
	}
	sb.WriteString("/reuse-sweep-run 31147925932\n")
	body := sb.String()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(body, opt)
	}
}

// A comment none of whose lines starts with '/' (after at most three
// spaces), which is most comments, costs no allocation: the Markdown parser
// is not even started.
func TestSkippedLinesDoNotAllocate(t *testing.T) {
	body := strings.Repeat("Verified that /reuse-sweep-run 1 covers it\n> /use 2\n    /use 3\n<!-- /use 4 -->\n```\n x /use 5\n```\n", 200)
	allocs := testing.AllocsPerRun(20, func() { Parse(body, opt) })
	if allocs != 0 {
		t.Fatalf("Parse allocated %.0f times for a body with no command", allocs)
	}
}

// adversarialBodies are 64 KiB comments built to make a Markdown parser do
// quadratic work (goldmark did: seconds each), each with a command line
// after the noise, and the commands a reader finds in them.
func adversarialBodies() []struct {
	name, body string
	want       []Command
} {
	const size = 64 << 10
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	lines := func(f func(i int) string) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			b.WriteString(f(i))
		}
		return b.String()
	}
	growing := lines(func(i int) string { return strings.Repeat(">", i%300) + " a\n" })
	return []struct {
		name, body string
		want       []Command
	}{
		// Nested past MaxNesting: no command is read in the comment at all.
		{"nested quotes on one line", fill(">") + "\n/use 1\n", nil},
		{"spaced nested quotes", fill("> ") + "\n/use 1\n", nil},
		{"nested quotes ending in text", fill("> ") + "x\n/use 1\n\n/use 2\n", nil},
		{"nested quotes growing line by line", growing + "\n/use 3\n", nil},
		{"tabbed nested quotes", fill(">\t") + "\n/use 1\n", nil},
		{"a deep list, then blank lines", "/x\n" + strings.Repeat("- ", 3000) + "a" + strings.Repeat("\n", 6000) + "/use 1\n", nil},
		{"a deep list, then deeply indented lines", strings.Repeat("- ", 30) + "a\n" + lines(func(int) string { return strings.Repeat(" ", 2000) + "b\n" }) + "\n/use 1\n", nil},
		// Nested no deeper than MaxNesting: read as ever.
		{"nested quotes within the bound", lines(func(i int) string { return strings.Repeat("> ", i%commands.MaxNesting) + "a\n" }) + "\n/use 3\n",
			[]Command{c(strings.Count(lines(func(i int) string { return strings.Repeat("> ", i%commands.MaxNesting) + "a\n" }), "\n")+2, Reuse, 3)}},
		{"link openers", fill("[a](") + "\n\n/use 4\n", []Command{c(3, Reuse, 4)}},
		{"brackets", "/use 5\n" + fill("["), []Command{c(1, Reuse, 5)}},
		{"quote and list mix", fill("> - ") + "\n\n/use 6\n", nil},
		{"list and quote mix", fill("- > ") + "\n\n/use 7\n", nil},
		{"emphasis runs", fill("*a_") + "\n\n/use 8\n", []Command{c(3, Reuse, 8)}},
		// No nesting at all, only many short lines: goldmark's cost per line
		// is what these measure.
		{"short lines", fill("a\n") + "\n/use 10\n", []Command{c(size/2+2, Reuse, 10)}},
		{"empty list items", fill("-\n") + "\n/use 11\n", []Command{c(size/2+2, Reuse, 11)}},
		{"empty headings", fill("#\n") + "/use 12\n", []Command{c(size/2+1, Reuse, 12)}},
		{"HTML lines", fill("<a>\n\n") + "/use 13\n", []Command{c(size/5*2+1, Reuse, 13)}},
		// The worst shape for sections: a command line in one paragraph of
		// short lines, so that the section holding it is the whole body.
		{"a command, then short lines", "/use 14\n" + fill("a\n"), []Command{c(1, Reuse, 14)}},
		{"short lines, then a command", fill("a\n") + "/use 15\n", []Command{c(size/2+1, Reuse, 15)}},
	}
}

// plainBody is an ordinary 64 KiB comment: paragraphs of prose.
func plainBody() string {
	var b strings.Builder
	for b.Len() < 64<<10 {
		b.WriteString("Verified on the staging cluster: the later commits only touch the changelog and the docs.\n")
		b.WriteString("The numbers match the previous sweep within noise, see the attached table.\n\n")
	}
	b.WriteString("/use 9\n")
	return b.String()
}

// Adversarial bodies are read like any other: the command after the noise
// is found, the ones inside it are not.
func TestParseAdversarialBodies(t *testing.T) {
	for _, tc := range adversarialBodies() {
		t.Run(tc.name, func(t *testing.T) {
			assertCommands(t, Parse(tc.body, opt), tc.want)
		})
	}
}

// The bounded parser (goldmark's blocks without inlines, with a reader
// that counts columns in linear time) finds the same commands as the whole
// of goldmark with its own reader, on the table, the fixtures and bodies
// shaped like the adversarial ones but small enough for goldmark.
func TestBoundedParseMatchesGoldmark(t *testing.T) {
	bodies := []string{}
	for _, tc := range parseCases {
		bodies = append(bodies, tc.body)
	}
	for _, f := range fixtures.CommentFiles(t) {
		bodies = append(bodies, fixtures.Comment(t, f))
	}
	for _, unit := range []string{">", "> ", "[a](", "[", "> - ", "- > ", "*a_", "\t>", " > 1. ", "<a ", "|", "`", "a\n", "-\n", "#\n", "<a>\n\n"} {
		for _, n := range []int{1, 3, 40, 400} {
			noise := strings.Repeat(unit, n)
			bodies = append(bodies, noise+"\n/use 1\n", "/use 1\n"+noise, noise+"x\n/use 1\n\n/use 2", noise+"\n```\n/use 3\n```\n/use 4")
		}
	}
	for _, body := range bodies {
		assertSame(t, body)
	}
}

func assertSame(t *testing.T, body string) {
	t.Helper()
	got, want := Parse(body, opt), parser.ParseFull(body, opt)
	if js(got) != js(want) {
		t.Fatalf("body %q:\nbounded %s\ngoldmark %s", body, js(got), js(want))
	}
	// Every section, command or not, has the whole body's top-level lines.
	if ok, diff := commands.SectionsAgree(body); !ok {
		t.Fatalf("body %q: the sections' top-level lines differ from the whole body's:\n%s", body, diff)
	}
}

// FuzzBoundedParse holds the bounded parser to the whole of goldmark on
// any body.
func FuzzBoundedParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.body)
	}
	for _, s := range []string{">>>>\n/use 1", "> - > 1. x\n  > /use 2", "\t> >\t- x\n/use 3", "[a]([a](\n/use 4", "   > > \n /use 5\n---",
		"```\n\n/use 1\n```\n\n/use 2", "- a\n\n  ```\n\n```\n\n/use 3\n```", "<div>\n# h\n/use 4", "<!--\n\n/use 5\n-->\n\n/use 6",
		"# h\n/use 7\n|-|\n/use 8", "<pre>\n\n/use 9\n</pre>\n/use 10",
		"<!--\n\n``` -->\n```\n\n/use 1\n", "<!--\n\n``` -->\n<!--\n```\n\n/use 1\n-->\n", "<?\n\n``` ?>\n```\n\n/use 1\n",
		"<pre>\n\n``` </pre>\n```\n\n/use 1\n", "<style\n \t\n``` </pre>\n   ```\n#\t-->\n/use 1 -->\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if len(body) > 4<<10 {
			return // goldmark's own reader is quadratic: keep the reference affordable
		}
		assertSame(t, body)
	})
}

// BenchmarkParse64KiB compares ordinary prose with the adversarial bodies
// (docs/BENCHMARKS.md records the numbers).
func BenchmarkParse64KiB(b *testing.B) {
	run := func(name, body string) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				Parse(body, opt)
			}
		})
	}
	run("plain", plainBody())
	for _, tc := range adversarialBodies() {
		run(strings.ReplaceAll(tc.name, " ", "-"), tc.body)
	}
}

// sectionLines are the lines the random bodies of
// TestSectionsMatchGoldmarkOnRandomBodies are made of: every opening and
// closing of the blocks a section must not cut (fences at each indent,
// HTML blocks of each kind, containers, headings, tables, link reference
// definitions, indented code), commands and plain text.
var sectionLines = []string{
	"", "", " ", "\t", "a", "text /use 9", "/use 1", "/use 2", " /use 3", "   /opsbot help", "/stage-results",
	"```", "````", "~~~", "``` go", "```a`b", " ```", "  ```", "   ```", "    ```", "\t```", "- ```", "> ```", "1. ```",
	"<!--", "-->", "<!-- x -->", "  <!--", "<pre>", "</pre>", "<PRE", "<prex", "<script>", "</script>", "<style", "<textarea>",
	"<?", "?>", "<!X", "<!x", ">", "<![CDATA[", "]]>", "<div>", "</div>", "<a>", "<a href=x>", "<b", "x <!--",
	"# h", "#", "  ## h", "####### h", "#x", "- a", "- ", "-", "* b", "1. c", "2) d", "10. e", "> q", ">", "> > q", ">\t- q",
	"  - nested", "    code", "  cont", "---", "===", "***", "| a | b |", "|---|---|", "| 1 | 2 |", "a | b", "-|-",
	"[x]: /u", "[x]:", "'title", "title'", "[y", "]: /v", "\\", "<http://x>",
	// A line that closes an HTML block and starts like a fence: it is the
	// HTML block's, and opens nothing.
	"``` -->", "``` </pre>", "~~~ ?>", "``` ]]>", "``` >", "# -->", "<!-->", "<?>", "<!X>",
	// Bytes no end marker holds.
	"<pre \x00", "<!-- \x00", "\x00", "<? \x00 >",
}

// Sections are invisible: on random bodies made of the lines that open and
// close what a section must not cut, the commands read section by section
// are the commands goldmark reads in the whole body.
func TestSectionsMatchGoldmarkOnRandomBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 12))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	if v, err := strconv.Atoi(os.Getenv("OPSBOT_SECTION_BODIES")); err == nil {
		n = v // a longer search, by hand
	}
	for range n {
		var b strings.Builder
		for range 2 + rng.IntN(24) {
			b.WriteString(sectionLines[rng.IntN(len(sectionLines))])
			b.WriteByte('\n')
		}
		assertSame(t, b.String())
	}
}

// A command hidden after a line that closes an HTML block and starts like
// a fence (GitHub shows neither the fence nor the command), or in a <pre>
// block whose first line holds a NUL, is not read: the bodies an
// attacker's search and the fuzzer found against the first sections.
func TestSectionsDoNotTakeAnHTMLBlocksLastLineForAFence(t *testing.T) {
	for _, body := range []string{
		"<!--\n\n``` -->\n```\n\n/use 1\n",
		"<!--\n\n``` -->\n<!--\n```\n\n/use 1\n-->\n",
		"<?\n\n``` ?>\n```\n\n/use 1\n",
		"<pre>\n\n``` </pre>\n```\n\n/use 1\n",
		"  <pre>\n\n``` </pre>\n```\n\n/use 1\n",
		"<style\n \t\n``` </pre>\n   ```\n#\t-->\n/use 1 -->\n",
		// A NUL ended a <pre> block for the first sections (a placeholder end
		// marker): found by FuzzBoundedParse once every section was checked.
		"<pre \x00\n\n/use 1\n", "<pre \x00\n\n/use 1\n</pre>\n",
	} {
		if got := Parse(body, opt); len(got) != 0 {
			t.Errorf("body %q: read %s; goldmark (and GitHub) read no command", body, js(got))
		}
		assertSame(t, body)
	}
}
