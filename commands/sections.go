package commands

import "strings"

// A comment is read in sections: a section starts at a line before which
// the Markdown parser has nothing open that the line could belong to, so
// its blocks are the same whether the parser reads the section alone or
// the whole comment. Only the sections that hold a line starting with '/'
// (after at most three spaces) are handed to the parser: a long comment
// with one command in its last paragraph costs that paragraph, not the
// comment.
//
// A section starts at line i when line i is not blank and not indented,
// the line before it is blank or an ATX heading (# ...), and no block that
// a blank line does not end may be open: a fenced code block, or an HTML
// block of CommonMark's kinds 1 to 5 (<pre>, <script>, <style>,
// <textarea>; <!-- -->; <? ?>; <!X >; <![CDATA[ ]]>), or, after a
// heading, an HTML block of kinds 6 and 7. Then every container (a quote,
// a list item) is closed by line i (a line that is not indented continues
// no list item after a blank line or a heading, and nothing lazily
// continues a heading or a blank line), and so is every paragraph, table
// and indented code block.
//
// Which fences and HTML blocks are open is told by a linear scan that never
// misses one that is open at the top level, where it would hide a line
// from a section: it counts as possibly open every line that could open
// one inside a container too (it does not model containers), closes one
// only with the line that would close it at the top level, and, when a
// line closes one that was only possibly open (a fence, or an HTML block,
// whose closing line is the block's own), takes that line as a possible
// opener as well, never a certain one. A fence is known to be open for certain only
// when its opening line is not indented and nothing else may be open
// (then no container or paragraph can hold it); then its content opens
// nothing until its closing line. A comment whose fences are inside lists keeps
// such a fence "possibly open" and is then read in fewer sections, never
// wrongly. FuzzBoundedParse holds the result to goldmark's reading of the
// whole comment.

// section is a part of a comment: its text (whole lines, each with its
// newline) and the number of lines before it.
type section struct {
	text   string
	before int
}

// commandSections are the sections of body that hold a line that may be a
// command, in order.
func commandSections(body string) []section { return sectionsOf(body, false) }

// sectionsOf are body's sections: those that hold a line that may be a
// command, or (all, for tests) every one.
func sectionsOf(body string, all bool) []section {
	var out []section
	var t blockTracker
	start, startLine, line := 0, 0, 0
	candidate := false
	prevResets := false // the line before may end every block but those the tracker knows
	for pos := 0; pos < len(body); line++ {
		end := strings.IndexByte(body[pos:], '\n')
		next := len(body)
		if end >= 0 {
			end += pos
			next = end + 1
		} else {
			end = len(body)
		}
		text := body[pos:end]
		if line > 0 && prevResets && text != "" && text[0] != ' ' && text[0] != '\t' && t.closed() {
			if candidate || all {
				out = append(out, section{text: body[start:pos], before: startLine})
			}
			start, startLine, candidate = pos, line, false
		}
		pos = next
		if text != "" && plainStart[text[0]] && t.fence == nil && len(t.maybeH) == 0 {
			// Most lines: text that opens, closes and ends nothing the
			// tracker follows, and no command.
			prevResets = false
			continue
		}
		if s, ok := trimIndent(text); ok && s != "" && s[0] == '/' {
			candidate = true
		}
		blank := strings.Trim(text, " \t") == ""
		heading := isATXHeading(text)
		t.line(text, blank)
		prevResets = blank || (heading && !t.html67)
	}
	if candidate || (all && start < len(body)) {
		out = append(out, section{text: body[start:], before: startLine})
	}
	return out
}

// plainStart are the first bytes of a line that is not blank, starts no
// command, and neither opens nor closes a fence, an HTML block or a
// heading whatever follows: for such a line the tracker has nothing to do
// while no fence and no HTML block of kinds 1 to 5 may be open.
var plainStart = func() (t [256]bool) {
	for c := range 256 {
		switch c {
		case ' ', '\t', '/', '`', '~', '<', '#', '\n', '\r', '\v', '\f':
		default:
			t[c] = true
		}
	}
	return
}()

// isATXHeading reports whether line is an ATX heading: at most three
// spaces, one to six '#', then a blank or the line's end.
func isATXHeading(line string) bool {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	n := 0
	for i+n < len(line) && line[i+n] == '#' {
		n++
	}
	if n < 1 || n > 6 {
		return false
	}
	return i+n == len(line) || line[i+n] == ' ' || line[i+n] == '\t'
}

// fenceOpen is a fenced code block: its character and how many of it.
type fenceOpen struct {
	c byte
	n int
}

// blockTracker knows which fences and HTML blocks (kinds 1 to 5) may be
// open at the top level after the lines it was given.
type blockTracker struct {
	fence  *fenceOpen // certainly open at the top level
	maybeF []fenceOpen
	maybeH []int // kinds of HTML block (1 to 5) possibly open; never certain: goldmark's openings are told apart by regexps
	// html67 says a line starting with '<' came since the last blank line:
	// an HTML block of kind 6 or 7 (ended by a blank line) may be open.
	html67 bool
}

// closed reports whether no fence and no HTML block of kinds 1 to 5 may be
// open.
func (t *blockTracker) closed() bool {
	return t.fence == nil && len(t.maybeF) == 0 && len(t.maybeH) == 0
}

func (t *blockTracker) line(line string, blank bool) {
	lead := 0
	for lead < len(line) && (line[lead] == ' ' || line[lead] == '\t') {
		lead++
	}
	content := line[lead:]
	closerIndent := lead <= 3 && !strings.Contains(line[:lead], "\t")
	if t.fence != nil {
		if closerIndent && closesFence(content, *t.fence) {
			t.fence = nil
		}
		return // a fence's content opens nothing
	}
	closedMaybe := false
	if closerIndent {
		kept := t.maybeF[:0]
		for _, f := range t.maybeF {
			if closesFence(content, f) {
				closedMaybe = true
				continue
			}
			kept = append(kept, f)
		}
		t.maybeF = kept
	}
	if len(t.maybeH) > 0 {
		kept := t.maybeH[:0]
		for _, k := range t.maybeH {
			if endsHTML(k, line) {
				closedMaybe = true // the closing line may be the HTML block's own: it opens nothing for certain
				continue
			}
			kept = append(kept, k)
		}
		t.maybeH = kept
	}
	sure := lead == 0 && !closedMaybe && t.closed() && !t.html67
	if f, ok := opensFence(content); ok {
		if sure {
			t.fence = &f
		} else {
			t.maybeF = append(t.maybeF, f)
		}
	} else if k := opensHTML(content); k != 0 {
		// goldmark ends it on its first line when that line holds its end.
		if !endsHTML(k, content[1:]) {
			t.maybeH = append(t.maybeH, k)
		}
	}
	switch {
	case blank:
		t.html67 = false
	case content != "" && content[0] == '<':
		t.html67 = true
	}
}

// opensFence reads a fence's opening: three or more '`' or '~' (a '`'
// fence's info string holds no '`').
func opensFence(content string) (fenceOpen, bool) {
	if len(content) < 3 || (content[0] != '`' && content[0] != '~') {
		return fenceOpen{}, false
	}
	c := content[0]
	n := 0
	for n < len(content) && content[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(content[n:], '`') >= 0) {
		return fenceOpen{}, false
	}
	return fenceOpen{c, n}, true
}

// closesFence reports whether content (after at most three spaces) closes
// f: at least as many of its character, then only blanks.
func closesFence(content string, f fenceOpen) bool {
	n := 0
	for n < len(content) && content[n] == f.c {
		n++
	}
	return n >= f.n && strings.Trim(content[n:], " \t") == ""
}

// endsHTML reports whether line holds the end of an HTML block of kind k
// (1 to 5): kind 1 ends at </pre>, </script>, </style> or </textarea> (in
// any case), kinds 2 to 5 at -->, ?>, > and ]]>.
func endsHTML(k int, line string) bool {
	switch k {
	case 1:
		l := strings.ToLower(line)
		return strings.Contains(l, "</pre>") || strings.Contains(l, "</script>") || strings.Contains(l, "</style>") ||
			strings.Contains(l, "</textarea>")
	case 2:
		return strings.Contains(line, "-->")
	case 3:
		return strings.Contains(line, "?>")
	case 4:
		return strings.Contains(line, ">")
	case 5:
		return strings.Contains(line, "]]>")
	}
	return false
}

// opensHTML is the kind (1 to 5) of HTML block content may open, or 0. It
// takes more for an opening than CommonMark does (kind 1 whatever follows
// its tag name), never less.
func opensHTML(content string) int {
	if len(content) < 2 || content[0] != '<' {
		return 0
	}
	l := strings.ToLower(content)
	switch {
	case strings.HasPrefix(l, "<![cdata["):
		return 5
	case strings.HasPrefix(l, "<!--"):
		return 2
	case strings.HasPrefix(l, "<?"):
		return 3
	case len(l) > 2 && l[1] == '!' && (l[2] >= 'a' && l[2] <= 'z'):
		return 4
	case strings.HasPrefix(l, "<pre"), strings.HasPrefix(l, "<script"), strings.HasPrefix(l, "<style"), strings.HasPrefix(l, "<textarea"):
		return 1
	}
	return 0
}
