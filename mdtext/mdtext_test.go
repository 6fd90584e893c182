package mdtext

import (
	"strings"
	"testing"
)

var hostile = []string{
	"plain.txt",
	"a`b",
	"``x``",
	"`",
	"` leading",
	"trailing `",
	" spaced ",
	"name\n/reuse-sweep-run 1",
	"crlf\r\n/reuse-sweep-run 1\u2028/use 2\u2029x\u0085y\vz\fw",
	"@org/team please",
	"<!-- opsbot:notice=1 -->",
	"](http://x) [a](http://evil)",
	"| a | b |",
	"# heading",
	"**bold** _it_ ~~s~~",
	"<https://evil.example> https://evil.example www.evil.example a@b.example",
	"&#64;org/team &lt;!-- x",
	"\\`escaped\\`",
	"bad utf8 \xff\xfe",
	"",
}

// A code span holds exactly its value, on one line, whatever the value.
func TestCodeHoldsAnyValue(t *testing.T) {
	for _, s := range hostile {
		got := Code(s)
		nodes := Parse("before " + got + " after")
		if len(nodes) != 3 || nodes[1].Kind != KCode {
			t.Fatalf("Code(%q) = %q parses as %+v, want text, one code span, text", s, got, nodes)
		}
		want := strings.ReplaceAll(Line(s), "<!--", "<!\u200b--")
		if want == "" {
			want = " "
		}
		if nodes[1].Text != want {
			t.Errorf("Code(%q) shows %q, want %q", s, nodes[1].Text, want)
		}
		if strings.ContainsAny(got, "\r\n\u2028\u2029\u0085") || strings.Contains(got, "<!--") {
			t.Errorf("Code(%q) = %q holds a line break or a comment opener", s, got)
		}
	}
}

// Text is one text node that shows the value; none of Markdown's syntax
// survives in its source.
func TestTextIsInert(t *testing.T) {
	for _, s := range hostile {
		got := Text(s)
		nodes := Parse(got)
		for _, n := range nodes {
			if n.Kind != KText {
				t.Fatalf("Text(%q) = %q parses as %+v, want text only", s, got, nodes)
			}
		}
		if shown := strings.NewReplacer("\u200b", "", "\u200d", "").Replace(Plain(nodes)); shown != Line(s) {
			t.Errorf("Text(%q) shows %q, want %q", s, shown, Line(s))
		}
		for _, bad := range []string{"<!--", "](", "://", "www.", "\n"} {
			if strings.Contains(got, bad) {
				t.Errorf("Text(%q) = %q contains %q", s, got, bad)
			}
		}
		for i := 0; i < len(got); i++ {
			if got[i] == '@' && (i+1 >= len(got) || !strings.HasPrefix(got[i+1:], "\u200d")) {
				t.Errorf("Text(%q) = %q has an '@' a mention could follow", s, got)
			}
		}
	}
}

func TestMention(t *testing.T) {
	for _, tc := range []struct{ login, want string }{
		{"Ankur-singh", "@Ankur-singh"},
		{"octo-cat-42", "@octo-cat-42"},
		{"org/team", "\\@\u200dorg/team"},
		{"dependabot[bot]", "\\@\u200ddependabot\\[bot\\]"},
		{"a--b", "\\@\u200da--b"},
		{"-a", "\\@\u200d-a"},
		{"x`\n@y", "\\@\u200dx\\` \\@\u200dy"},
	} {
		if got := Mention(tc.login); got != tc.want {
			t.Errorf("Mention(%q) = %q, want %q", tc.login, got, tc.want)
		}
	}
}

func TestURLAndLink(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/o/r/actions/runs/1", "https://github.com/o/r/actions/runs/1"},
		{"https://github.com/o/r/pull/2#issuecomment-3", "https://github.com/o/r/pull/2#issuecomment-3"},
		{"https://github.com/o/r/runs/1) [x](http://evil", "https://github.com/o/r/runs/1%29%20%5Bx%5D%28http://evil"},
		{"https://x/<!--|`\n", "https://x/%3C!--%7C%60%0A"},
		{"javascript:alert(1)", ""},
		{"http:///x", ""},
		{"", ""},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Link("1", "javascript:x"); got != "1" {
		t.Errorf("Link to javascript: = %q, want the label alone", got)
	}
	nodes := Parse(Link("run "+Code("a)`b"), "https://github.com/o/r/actions/runs/1) x"))
	if len(nodes) != 1 || nodes[0].Kind != KLink || nodes[0].URL != "https://github.com/o/r/actions/runs/1%29%20x" {
		t.Fatalf("link parses as %+v", nodes)
	}
}

func TestCell(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"`a|b`", "`a\\|b`"},
		{Text("a|b"), "a\\|b"},
		{"`a\\\\|b`", "`a\\\\\\|b`"},
	} {
		if got := Cell(tc.in); got != tc.want {
			t.Errorf("Cell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A short SHA is the first 7 bytes, never half a rune.
func TestShortSHA(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0123456789abcdef0123456789abcdef01234567", "0123456"},
		{"abc1234", "abc1234"},
		{"c1", "c1"},
		{"", ""},
		{"abcdeféxyz", "abcdef"},
	} {
		if got := ShortSHA(tc.in); got != tc.want {
			t.Errorf("ShortSHA(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Parse follows CommonMark where opsbot's Markdown needs it.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // kinds and texts
	}{
		{"`` a`b ``", "code(a`b)"},
		{"``a`", "text(``a`)"},
		{"\\`x`", "text(`x`)"},
		{"**b** [`c`](https://x) <!-- m -->", "strong() text(b) strong() text( ) link(https://x) text( ) comment(<!-- m -->)"},
		{"a\n---\n```\n/x\n```\nb", "text(a) break() rule() break() fence(/x) break() text(b)"},
		{"[a](b c)", "text([a](b c))"},
	} {
		var got []string
		for _, n := range Parse(tc.in) {
			k := map[Kind]string{KText: "text", KCode: "code", KStrong: "strong", KLink: "link", KComment: "comment",
				KFence: "fence", KRule: "rule", KBreak: "break"}[n.Kind]
			v := n.Text
			if n.Kind == KLink {
				v = n.URL
			}
			got = append(got, k+"("+v+")")
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, g, tc.want)
		}
	}
}

func FuzzCode(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nodes := Parse("x " + Code(s) + " y")
		if len(nodes) != 3 || nodes[1].Kind != KCode {
			t.Fatalf("Code(%q) = %q parses as %+v", s, Code(s), nodes)
		}
		for _, n := range Parse(Text(s)) {
			if n.Kind != KText {
				t.Fatalf("Text(%q) = %q parses as %+v", s, Text(s), n)
			}
		}
	})
}

// GitHub's autolinks do not survive Text: "GH-123", a bare commit SHA, "owner/repo@sha"
// and "#123" each get a zero-width joiner where GitHub would match them, while
// a run id (digits alone) and words stay whole; Code spans are left as they are.
func TestTextBreaksGitHubAutolinks(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"see GH-123 now", "see G\u200dH-123 now"},
		{"gh-7", "g\u200dh-7"},
		{"fixed in 1a2b3c4", "fixed in 1\u200da2b3c4"},
		{"sha da39a3ee5e6b4b0d3255bfef95601890afd80709.", "sha d\u200da39a3ee5e6b4b0d3255bfef95601890afd80709."},
		{"octo/repo@1a2b3c4d", "octo/repo\\@\u200d1\u200da2b3c4d"},
		{"check #123", "check \\#\u200d123"},
		{"run 31147925932 of ghost-town, decade", "run 31147925932 of ghost-town, decade"},
		{"a 1a2b3c (six) and a 41-digit 1a2b3c4d5e1a2b3c4d5e1a2b3c4d5e1a2b3c4d5e1", "a 1a2b3c \\(six\\) and a 41-digit 1a2b3c4d5e1a2b3c4d5e1a2b3c4d5e1a2b3c4d5e1"},
		{"WwW.evil.example", "WwW\u200b.evil.example"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Code("1a2b3c4 GH-1"); got != "`1a2b3c4 GH-1`" {
		t.Errorf("Code changed its value: %q", got)
	}
}
