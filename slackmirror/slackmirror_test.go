package slackmirror_test

import (
	"strings"
	"testing"

	_ "github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/slackmirror"
	"github.com/SemiAnalysisAI/opsbot/state"
)

const repo = "SemiAnalysisAI/InferenceX"

var web notices.Web

func TestHostileTextIsEscaped(t *testing.T) {
	hostile := "@maintainer I did not run `/use <!channel>`: <@U123> said <https://evil.example|click> & *bold* _it_ ~s~ <!here>"
	got := slackmirror.FromMarkdown(hostile)
	for _, bad := range []string{"<!channel>", "<@U123>", "<https://evil.example|click>", "<!here>", "*bold*", "_it_", "~s~", " & "} {
		if strings.Contains(got, bad) {
			t.Errorf("escaped text still holds %q: %s", bad, got)
		}
	}
	for _, want := range []string{"&lt;!channel&gt;", "&lt;@U123&gt;", "&amp;"} {
		if !strings.Contains(got, want) {
			t.Errorf("escaped text lacks %q: %s", want, got)
		}
	}
	// opsbot's own links and bold survive.
	own := slackmirror.FromMarkdown("**Sweep skipped** for [run 1](https://github.com/o/r/actions/runs/1)")
	if own != "*Sweep skipped* for <https://github.com/o/r/actions/runs/1|run 1>" {
		t.Fatalf("own formatting: %q", own)
	}
	if e := slackmirror.Escape("<!channel> *x*"); strings.Contains(e, "<!channel>") || strings.Contains(e, "*x*") {
		t.Fatalf("Escape = %q", e)
	}
}

// A name that looks like a Markdown link, inside a code span or escaped as
// text, stays text in Slack: the mirror reads Markdown with the escaper's
// own reader instead of matching link shapes anywhere.
func TestEscapedValuesStayTextInSlack(t *testing.T) {
	for _, v := range []string{"[click](https://evil.example)", "x` [click](https://evil.example) `y", "a\n<!channel>\n*b*", "pipe | in <url|label>"} {
		for name, md := range map[string]string{
			"code": "I did not pin run 1: the commits touch " + mdtext.Code(v) + ".",
			"text": "I cannot stage: " + mdtext.Text(v) + ".",
			"link": mdtext.Link("run "+mdtext.Code(v), "https://github.com/o/r/actions/runs/1"),
		} {
			got := slackmirror.FromMarkdown(md)
			for _, bad := range []string{"<https://evil", "<!channel>", "\n", "*b*"} {
				if strings.Contains(got, bad) && (bad != "*b*" || name == "text") { // Slack formats nothing inside code
					t.Errorf("%s %q: Slack text %q holds %q", name, v, got, bad)
				}
			}
			if strings.Count(got, "<") > strings.Count(md, "](") {
				t.Errorf("%s %q: Slack text %q has more links than opsbot wrote", name, v, got)
			}
		}
	}
	if got := slackmirror.ContextLine(notices.Links{PR: "https://github.com/o/r/pull/1|fake label>"}); strings.Count(got, "|") != 1 {
		t.Errorf("context line %q: a URL can add a label", got)
	}
	if got := slackmirror.ParentText(web, &state.PRInfo{Repo: repo, PR: 1, Title: "fix\n*@channel* <!here>"}); strings.ContainsAny(got, "\n") ||
		strings.Contains(got, "<!here>") {
		t.Errorf("parent %q: the title broke out", got)
	}
}

// Slack links bare domains and "www." in any case: Escape breaks each with
// a zero-width space, and leaves version numbers alone.
func TestEscapeBreaksBareDomains(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"WWW.evil.example", "WWW.\u200bevil.\u200bexample"},
		{"wWw.x", "wWw.\u200bx"},
		{"see evil.com now", "see evil.\u200bcom now"},
		{"kimik2.5 at 1.25x.", "kimik2.5 at 1.25x."},
	} {
		if got := slackmirror.Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
