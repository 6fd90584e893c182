package mdtext

import "strings"

// Kind is what a Node is.
type Kind int

// The kinds of Node.
const (
	KText    Kind = iota // Text is literal text (escapes resolved); Raw is its source
	KCode                // an inline code span; Text is its content
	KStrong              // "**": opens or closes strong emphasis
	KLink                // a link: Children are its label, URL its destination
	KComment             // an HTML comment (opsbot's marker); Text is the source
	KFence               // a fenced code block; Text is its content
	KRule                // a line "---"
	KBreak               // the end of a line
)

// Node is a piece of the Markdown opsbot writes.
type Node struct {
	Kind     Kind
	Text     string
	Raw      string
	URL      string
	Children []Node
}

// Parse reads the Markdown opsbot writes (its templates, and values put in
// with Text, Code, Mention and Link) into nodes: fenced code blocks, "---"
// rules, and within lines backslash escapes, code spans (CommonMark's
// backtick-run rule), "**", links and HTML comments. It is what the Slack
// mirror converts, and what tests read to check that nothing a user wrote
// escaped its code span or line.
func Parse(md string) []Node {
	var out []Node
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if i > 0 {
			out = append(out, Node{Kind: KBreak})
		}
		if n := fenceLen(line); n > 0 {
			var body []string
			j := i + 1
			for ; j < len(lines); j++ {
				l := strings.TrimSuffix(lines[j], "\r")
				if m := fenceLen(l); m >= n && strings.TrimLeft(strings.TrimSpace(l), "`~") == "" {
					break
				}
				body = append(body, l)
			}
			out = append(out, Node{Kind: KFence, Text: strings.Join(body, "\n"), Raw: line})
			i = j
			continue
		}
		if strings.TrimSpace(line) == "---" {
			out = append(out, Node{Kind: KRule, Raw: line})
			continue
		}
		out = append(out, inline(line)...)
	}
	return out
}

// fenceLen is the length of the fence line opens (``` or ~~~, up to three
// spaces in), or 0.
func fenceLen(line string) int {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 || len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return 0
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 || (s[0] == '`' && strings.IndexByte(s[n:], '`') >= 0) {
		return 0
	}
	return n
}

func isPunct(c byte) bool {
	return c < 0x80 && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0
}

// inline reads one line.
func inline(s string) []Node {
	var out []Node
	var text, raw strings.Builder
	flush := func() {
		if raw.Len() > 0 {
			out = append(out, Node{Kind: KText, Text: text.String(), Raw: raw.String()})
			text.Reset()
			raw.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isPunct(s[i+1]):
			text.WriteByte(s[i+1])
			raw.WriteString(s[i : i+2])
			i += 2
		case c == '`':
			n := run(s, i, '`')
			if end := closing(s, i+n, n); end >= 0 {
				flush()
				body := s[i+n : end]
				if len(body) >= 2 && body[0] == ' ' && body[len(body)-1] == ' ' && strings.Trim(body, " ") != "" {
					body = body[1 : len(body)-1]
				}
				out = append(out, Node{Kind: KCode, Text: body, Raw: s[i : end+n]})
				i = end + n
				continue
			}
			text.WriteString(s[i : i+n])
			raw.WriteString(s[i : i+n])
			i += n
		case strings.HasPrefix(s[i:], "<!--"):
			end := strings.Index(s[i+4:], "-->")
			if end < 0 {
				text.WriteByte(c)
				raw.WriteByte(c)
				i++
				continue
			}
			flush()
			j := i + 4 + end + 3
			out = append(out, Node{Kind: KComment, Text: s[i:j], Raw: s[i:j]})
			i = j
		case strings.HasPrefix(s[i:], "**"):
			flush()
			out = append(out, Node{Kind: KStrong, Raw: "**"})
			i += 2
		case c == '[':
			if end, url, next, ok := link(s, i); ok {
				flush()
				out = append(out, Node{Kind: KLink, Children: inline(s[i+1 : end]), URL: url, Raw: s[i:next]})
				i = next
				continue
			}
			text.WriteByte(c)
			raw.WriteByte(c)
			i++
		default:
			text.WriteByte(c)
			raw.WriteByte(c)
			i++
		}
	}
	flush()
	return out
}

// run is the length of the run of c at s[i:].
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closing finds, from j, a run of exactly n backticks (CommonMark: the code
// span's closing fence), or -1.
func closing(s string, j, n int) int {
	for j < len(s) {
		k := strings.IndexByte(s[j:], '`')
		if k < 0 {
			return -1
		}
		j += k
		m := run(s, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

// link reads "[label](url)" at s[i]: the index of the label's "]", the
// destination, and the index after ")". Escapes and code spans in the label
// are skipped; the destination has no spaces or parentheses (URL encodes
// them).
func link(s string, i int) (end int, url string, next int, ok bool) {
	depth := 0
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if j+1 < len(s) && isPunct(s[j+1]) {
				j++
			}
		case '`':
			n := run(s, j, '`')
			if e := closing(s, j+n, n); e >= 0 {
				j = e + n - 1
			} else {
				j += n - 1
			}
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
				continue
			}
			if !strings.HasPrefix(s[j+1:], "(") {
				return 0, "", 0, false
			}
			k := strings.IndexAny(s[j+2:], ") \t<")
			if k < 0 || s[j+2+k] != ')' {
				return 0, "", 0, false
			}
			return j, s[j+2 : j+2+k], j + 2 + k + 1, true
		}
	}
	return 0, "", 0, false
}

// Plain is the text a reader sees in nodes, without formatting: code spans'
// contents, links' labels, escapes resolved; comments dropped.
func Plain(nodes []Node) string {
	var b strings.Builder
	for _, n := range nodes {
		switch n.Kind {
		case KText, KCode:
			b.WriteString(n.Text)
		case KLink:
			b.WriteString(Plain(n.Children))
		case KFence:
			b.WriteString(n.Text)
		case KBreak:
			b.WriteByte('\n')
		}
	}
	return b.String()
}
