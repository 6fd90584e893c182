// Package mdtext writes text that comes from GitHub or from a commenter (file
// names, logins, branch and run names, reasons, URLs) into the GitHub
// Markdown opsbot posts, so that it shows as written and never becomes
// anything else: no mention, link, HTML (or hidden comment), table, heading,
// formatting or line of its own. It also reads that Markdown back (Parse),
// so the Slack mirror can convert it without guessing.
//
// It is a leaf: it imports only the standard library, so every package that
// writes a notice (commands, notices, runs, stage, slackmirror) can use it.
package mdtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	zwj  = "\u200d" // after '@': GitHub's mention filter sees no login
	zwsp = "\u200b" // breaks "<!--", "://" and "www." without changing what a reader sees
)

// Line makes s one line of valid UTF-8: every line break (CR, LF, NEL, the
// Unicode line and paragraph separators) and every other control character
// becomes a space. Use it for plain-text sinks (commit statuses); Code and
// Text call it.
func Line(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsFunc(s, isBreak) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isBreak(r) {
			return ' '
		}
		return r
	}, s)
}

func isBreak(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// Code renders s as one inline code span, which GitHub shows verbatim: no
// mention, link or formatting happens inside it. The fence is one backtick
// longer than the longest run of backticks in s, padded with spaces when s
// starts or ends with a backtick or a space (CommonMark strips one space on
// each side), so s cannot close the span early. Line breaks become spaces,
// and "<!--" gets a zero-width space so the raw comment never holds a
// string that looks like opsbot's hidden marker.
//
// A code span inside a table cell must also go through Cell.
func Code(s string) string {
	s = strings.ReplaceAll(Line(s), "<!--", "<!"+zwsp+"--")
	if s == "" {
		return "` `"
	}
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	pad := ""
	if first, last := s[0], s[len(s)-1]; first == '`' || first == ' ' || last == '`' || last == ' ' {
		pad = " "
	}
	return fence + pad + s + pad + fence
}

// escaped are the ASCII characters Text puts a backslash before: every one
// that can start or end Markdown syntax in the middle of a line (emphasis,
// code, links, images, autolinks, HTML, entities, tables, strikethrough,
// mentions and references).
const escaped = "\\`*_[]()<>#|!~&@:+"

// Text renders s as plain Markdown text on one line: Markdown's punctuation
// is backslash-escaped, '@' and '#' are followed by a zero-width joiner (no
// mention of a user or a team, no "#123" reference), "://" and "www." (in
// any case) get a zero-width space (no bare autolink), GitHub's other
// autolinks are broken by a zero-width joiner ("GH-123" inside, a bare
// commit SHA of 7 to 40 hex digits, alone or in "owner/repo@sha", after its
// first digit), and line breaks become spaces. A run of digits alone (a run
// id) is left whole: it holds no letter a SHA's shortest prefixes almost
// always do.
func Text(s string) string {
	s = Line(s)
	breaks := autolinkBreaks(s)
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if len(breaks) > 0 && breaks[0] == i {
			b.WriteString(zwj)
			breaks = breaks[1:]
		}
		switch {
		case c == ':' && strings.HasPrefix(s[i+1:], "//"):
			b.WriteString(`\:` + zwsp)
		case c == '.' && i >= 3 && strings.EqualFold(s[i-3:i], "www"):
			b.WriteString(zwsp + ".")
		case (c == '-' || c == '=') && strings.TrimLeft(s[:i], " \t") == "":
			// At the start of a line "---" is a rule and "===" or "---" the
			// underline of a heading, "- x" a list item: never let a value be.
			b.WriteByte('\\')
			b.WriteByte(c)
		case strings.IndexByte(escaped, c) >= 0:
			b.WriteByte('\\')
			b.WriteByte(c)
			if c == '@' || c == '#' {
				b.WriteString(zwj)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// autolinkBreaks are the byte offsets of s before which Text puts a
// zero-width joiner, in order: inside "GH-" followed by digits (before the
// hyphen), and after the first character of a word of 7 to 40 hex digits
// holding a letter and a digit (GitHub links it to the commit it names).
func autolinkBreaks(s string) []int {
	var at []int
	word := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
	}
	for i := 0; i < len(s); {
		if i > 0 && word(s[i-1]) || !word(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && word(s[j]) {
			j++
		}
		w := s[i:j]
		if len(w) >= 2 && strings.EqualFold(w, "gh") && j+1 < len(s) && s[j] == '-' && '0' <= s[j+1] && s[j+1] <= '9' {
			at = append(at, i+1) // "G‍H-123" is no reference; the hyphen is in the next word
		}
		if n := len(w); n >= 7 && n <= 40 && isHex(w) && strings.ContainsAny(w, "0123456789") &&
			strings.ContainsAny(w, "abcdefABCDEF") {
			at = append(at, i+1)
		}
		i = j
	}
	return at
}

func isHex(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Mention is "@login" when login is a GitHub user login (letters, digits
// and single hyphens, at most 39 characters), which GitHub turns into a
// mention of that user. Anything else (a team "org/team", a bot's
// "name[bot]", text with spaces or backticks) is rendered as Text and
// mentions no one.
func Mention(login string) string {
	if validLogin(login) {
		return "@" + login
	}
	return Text("@" + login)
}

func validLogin(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' && s[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// URL returns u fit for a Markdown link destination and a Slack link: an
// http or https URL with every byte outside a conservative set
// percent-encoded (spaces, parentheses, brackets, angle brackets, pipes,
// backticks, backslashes, quotes, control and non-ASCII bytes). It returns
// "" when u is not an http(s) URL with a host.
func URL(u string) string {
	lower := strings.ToLower(u)
	rest, ok := strings.CutPrefix(lower, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(lower, "http://")
	}
	if !ok || rest == "" || rest[0] == '/' {
		return ""
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		c := u[i]
		if urlSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func urlSafe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#@!$&'*+,;=%", c) >= 0
}

// Link is a Markdown link with label, Markdown that opsbot wrote (escape
// anything else in it with Text or Code), to url made safe by URL. When url
// is not an http(s) URL, the label alone is returned.
func Link(label, url string) string {
	u := URL(url)
	if u == "" {
		return label
	}
	return "[" + label + "](" + u + ")"
}

// Cell makes inline Markdown (from Text, Code or opsbot's own) safe in a
// GitHub table cell: a pipe that would end the cell is backslash-escaped.
// GitHub removes that backslash before it reads the cell, code spans
// included, so a code span still shows its text.
func Cell(md string) string {
	if strings.IndexByte(md, '|') < 0 {
		return md
	}
	var b strings.Builder
	slashes := 0
	for i := 0; i < len(md); i++ {
		c := md[i]
		if c == '|' && slashes%2 == 0 {
			b.WriteByte('\\')
		}
		if c == '\\' {
			slashes++
		} else {
			slashes = 0
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Clip shortens s to at most n bytes on a rune boundary, with "…" when it
// cut something.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ShortSHA is a commit's short form, as GitHub shows it: its first 7 bytes
// (cut on a rune boundary, so text that is no SHA stays valid UTF-8), or all
// of it when it is shorter. It writes no Markdown: wrap it in Code.
func ShortSHA(sha string) string {
	if len(sha) <= 7 {
		return sha
	}
	n := 7
	for n > 0 && !utf8.RuneStart(sha[n]) {
		n--
	}
	return sha[:n]
}

// List is items (already Markdown) joined with ", ".
func List(items []string) string { return strings.Join(items, ", ") }

// CodeList renders each of xs as a code span, joined with ", ".
func CodeList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = Code(x)
	}
	return List(q)
}
