// Package commands reads opsbot's slash commands out of PR comments and
// decides what each one does. It does no I/O: reads and writes go through
// small interfaces its callers provide.
package commands

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// MaxPerComment is how many commands one comment may run.
const MaxPerComment = 10

// UsageLimit is the usage text of the command lines past MaxPerComment.
const UsageLimit = "usage: at most 10 commands per comment; post the rest in a new comment"

// Command is one command line of a comment, or a usage error on that line.
type Command struct {
	Line    int    `json:"line"`             // 1-based line of the comment
	Name    string `json:"command"`          // canonical (Spec.Name): reuse-sweep-run, stage-results, help
	RunID   int64  `json:"run_id,omitempty"` // the run named, if any (RunArgument)
	Cancel  bool   `json:"cancel,omitempty"` // the argument was the word cancel
	Error   string `json:"error,omitempty"`  // usage text when the arguments are wrong
	Reason  string `json:"-"`                // what was wrong, for the reply
	Verb    string `json:"-"`                // as typed, lower-cased: /use, /reuse-sweep-run, ...
	Text    string `json:"-"`                // the line as written, trimmed
	Attempt int    `json:"-"`                // from a run URL's /attempts/N, else 0
	// Args are the arguments as written, for a command whose reader keeps
	// them (none of opsbot's own: they read a run or a word).
	Args []string `json:"args,omitempty"`
}

// Options say where a comment was written, so run URLs can be checked.
type Options struct {
	Repo string // OWNER/REPO the comment belongs to
	Host string // web host of run URLs; default github.com
}

// Parse returns the commands of a comment body in order (the registered
// verbs, each with its own argument reader). A command is a
// line GitHub renders as a line of its own outside quotes, code and HTML:
// the block structure is CommonMark's with GitHub's extensions (goldmark),
// and only the lines of top-level paragraphs (and setext headings) are read,
// so lines inside fenced or indented code, block quotes (lazy continuation
// lines too), list items, tables, HTML blocks (<pre>, <details>, ...) and
// HTML comments are never commands. On those lines opsbot's own grammar
// applies: the command starts the line (after at most three spaces), and a
// command name in the middle of a line is text. A line that starts with a
// known command but has bad arguments is a Command with Error set. After
// MaxPerComment commands, the rest become one usage error.
func (r *Registry) Parse(body string, opt Options) []Command {
	if !MayHoldCommand(body) {
		return nil // most comments: no line starts with '/', nothing to parse
	}
	body = Newlines(body)
	if TooDeep(body) {
		return nil // nested past MaxNesting: no command is read in it (goldmark's cost grows with depth × lines)
	}
	parsing <- struct{}{}
	defer func() { <-parsing }()
	return r.parseLines(paragraphLines(strings.TrimPrefix(body, "\ufeff")), opt)
}

// parsing bounds how many comments goldmark reads at once. Its cost is
// CPU alone, so more at once than there are cores finishes none sooner,
// and a comment of many short lines briefly takes hundreds of times its
// size (20 MB for 64 KiB, goldmark's nodes and segments a line): 64
// workers reading such comments at once would take over a gigabyte.
var parsing = make(chan struct{}, runtime.GOMAXPROCS(0))

// Newlines makes every line ending of body a "\n": a CRLF, and a lone CR,
// which CommonMark (and GitHub) read as a line ending but goldmark does not
// (a fence opened after one would otherwise hide nothing from opsbot, and
// a command after one would be missed).
func Newlines(body string) string {
	if strings.IndexByte(body, '\r') < 0 {
		return body
	}
	return strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\r", "\n")
}

// MaxNesting bounds how deeply a comment opsbot reads may nest quotes and
// lists. A Markdown parser walks every open container on every line (and
// goldmark keeps a record per open container per blank line), so a
// comment nested thousands deep, from anyone, would cost seconds and
// gigabytes; nobody nests a comment holding a command this deep.
const MaxNesting = 24

// TooDeep reports whether some line of body may nest deeper than
// MaxNesting: its quote and list markers (each '>', each '-', '+' or '*'
// or number followed by '.' or ')' that a blank follows), counted from the
// line's start across the blanks between them, plus half its leading
// indent (a list level continues at an indent of at least two columns).
// It over-counts (a thematic break, a deeply indented line in a fence),
// never under-counts, and reads the body once.
func TooDeep(body string) bool {
	for rest := body; rest != ""; {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if lineDepth(line) > MaxNesting {
			return true
		}
	}
	return false
}

// lineDepth is TooDeep's bound of one line's nesting.
func lineDepth(line string) int {
	depth, col, indent, leading := 0, 0, 0, true
	for i := 0; i < len(line); {
		switch c := line[i]; {
		case c == ' ':
			col++
			i++
			if leading {
				indent++
			}
			continue
		case c == '\t':
			col += 4 - col%4
			i++
			if leading {
				indent = col
			}
			continue
		case c == '>':
			depth++
			i++
		case (c == '-' || c == '+' || c == '*') && (i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t'):
			depth++
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j < len(line) && (line[j] == '.' || line[j] == ')') && (j+1 == len(line) || line[j+1] == ' ' || line[j+1] == '\t') {
				depth++
				i = j + 1
				break
			}
			return depth + indent/2
		default:
			return depth + indent/2
		}
		leading = false
		col++
		if depth+indent/2 > MaxNesting {
			return depth + indent/2
		}
	}
	return depth + indent/2
}

// ParserVersion names what Parse does. A stored parse of another version
// is read again (events: the worker, and the inbox upgrade at start), so a
// delivery that waited through an upgrade runs what this build reads in
// it. Raise it with any change that can change a comment's commands.
//
//	1: goldmark's blocks read with a linear-time column count (no inlines)
//	2: a lone CR ends a line; a comment nested past MaxNesting holds none
const ParserVersion = 2

// MayHoldCommand reports whether some line of body starts with '/' after
// at most three spaces: only then can Parse find a command in it. It reads
// the body once and allocates nothing.
func MayHoldCommand(body string) bool {
	if strings.IndexByte(body, '/') < 0 {
		return false
	}
	return mayHoldCommand(strings.TrimPrefix(Newlines(body), "\ufeff"))
}

// parseLines reads the command lines among the top-level paragraph lines.
func (r *Registry) parseLines(lines []sourceLine, opt Options) []Command {
	p := lineParser{reg: r, opt: opt}
	for _, l := range lines {
		if l.blockN != p.block {
			p.block, p.inComment = l.blockN, false // an inline HTML comment ends with its paragraph
		}
		p.line(l.n, l.text)
	}
	return p.out
}

// mayHoldCommand reports whether some line of body starts with '/' after
// at most three spaces: only then can it hold a command.
func mayHoldCommand(body string) bool {
	for rest := body; ; {
		s, ok := trimIndent(rest)
		if ok && s != "" && s[0] == '/' {
			return true
		}
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
}

type sourceLine struct {
	n      int    // 1-based line number
	text   string // the whole line as written
	blockN int    // which block it belongs to (HTML comments do not span blocks)
}

// blocks is the Markdown parser commands are read with: goldmark's block
// structure with GitHub's (GFM's tables are the one extension that
// changes it), and no inline parsers. Which lines belong to top-level
// paragraphs is decided by the blocks alone; inlines (links, emphasis,
// code spans) never move a line in or out of one, and goldmark's link
// parser is quadratic in runs of "[a](".
var blocks = parser.NewParser(
	parser.WithBlockParsers(parser.DefaultBlockParsers()...),
	parser.WithParagraphTransformers(append(parser.DefaultParagraphTransformers(),
		util.Prioritized(extension.NewTableParagraphTransformer(), 200))...),
)

// markdown is the whole of goldmark with GitHub's extensions: the parser
// commands were read with before blocks, kept as the reference the tests
// hold blocks to.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// paragraphLines are the source lines of the top-level paragraphs and
// headings of body that may hold a command, in order, each whole as
// written (its indent included, for the grammar to judge). Only the
// sections of body that hold a line starting with '/' are parsed
// (commandSections); each costs its length: the block parser without
// inlines, reading with columnReader.
func paragraphLines(body string) []sourceLine {
	var out []sourceLine
	seen := 0 // blocks of the sections before: a block number is the comment's
	for _, sec := range commandSections(body) {
		lines := topLevelLines(sec.text, parseBlocks(sec.text))
		last := 0
		for i := range lines {
			lines[i].n += sec.before
			last = lines[i].blockN
			lines[i].blockN += seen
		}
		seen += last
		if out == nil {
			out = lines
		} else {
			out = append(out, lines...)
		}
	}
	return out
}

// parseBlocks is body's block structure (goldmark's blocks, no inlines).
func parseBlocks(body string) ast.Node { return blocks.Parse(newColumnReader([]byte(body))) }

// paragraphLinesFull is paragraphLines with the whole of goldmark and its
// own reader (quadratic on some bodies): the reference for tests.
func paragraphLinesFull(body string) []sourceLine {
	return topLevelLines(body, markdown.Parser().Parse(text.NewReader([]byte(body))))
}

// topLevelLines are the lines of doc's top-level paragraphs and headings,
// each a slice of body (nothing is copied per line).
func topLevelLines(body string, doc ast.Node) []sourceLine {
	starts := lineStarts(body)
	var out []sourceLine
	block := 0
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch n.Kind() {
		case ast.KindParagraph, ast.KindHeading:
		default:
			continue
		}
		block++
		lines := n.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			ln := sort.SearchInts(starts, seg.Start+1) - 1 // the line holding the segment's start
			from := starts[ln]
			if strings.TrimLeft(body[from:seg.Start], " \t") != "" {
				continue // the segment does not begin its line (a container's marker precedes it)
			}
			to := len(body)
			if ln+1 < len(starts) {
				to = starts[ln+1] - 1
			}
			out = append(out, sourceLine{n: ln + 1, text: body[from:to], blockN: block})
		}
	}
	return out
}

// lineStarts is the offset of each line's first byte.
func lineStarts(body string) []int {
	starts := make([]int, 1, strings.Count(body, "\n")+1)
	for i := 0; ; {
		j := strings.IndexByte(body[i:], '\n')
		if j < 0 {
			return starts
		}
		i += j + 1
		starts = append(starts, i)
	}
}

type lineParser struct {
	reg       *Registry
	opt       Options
	out       []Command
	inComment bool
	block     int
	extra     int
}

func (p *lineParser) line(n int, line string) {
	line = strings.TrimSuffix(line, "\r")
	if p.inComment || strings.Contains(line, "<!--") {
		// An HTML comment inline in a paragraph, over several of its lines.
		p.inComment = commentOpenAfter(line, p.inComment)
		return
	}
	s, ok := trimIndent(line)
	if !ok || s == "" || s[0] != '/' {
		return
	}
	c, ok := p.reg.parseLine(n, s, p.opt)
	if !ok {
		return
	}
	if len(p.out) < MaxPerComment {
		p.out = append(p.out, c)
		return
	}
	if p.extra == 0 {
		p.out = append(p.out, Command{Line: n, Name: c.Name, Verb: c.Verb, Text: c.Text, Error: UsageLimit,
			Reason: "this comment has more than 10 commands"})
	}
	p.extra++
}

// trimIndent removes up to three leading spaces. A tab or a fourth space
// makes the line indented code: ok is false.
func trimIndent(line string) (string, bool) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ':
			if i == 3 {
				return "", false
			}
		case '\t':
			return "", false
		default:
			return line[i:], true
		}
	}
	return "", true
}

// commentOpenAfter reports whether an HTML comment is still open at the end
// of line, given whether one was open at its start.
func commentOpenAfter(line string, open bool) bool {
	for {
		if open {
			i := strings.Index(line, "-->")
			if i < 0 {
				return true
			}
			line, open = line[i+3:], false
			continue
		}
		i := strings.Index(line, "<!--")
		if i < 0 {
			return false
		}
		line, open = line[i+4:], true
	}
}

// parseLine reads a line that starts with '/'. ok is false when the first
// word is not a registered verb (a path, a lookalike such as
// /reuse-sweep-runs).
func (r *Registry) parseLine(n int, s string, opt Options) (Command, bool) {
	text := strings.TrimRight(s, " \t")
	word, args := text, ""
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		word, args = text[:i], text[i+1:]
	}
	v, ok := r.lookup(word)
	if !ok {
		return r.unicodeSpaced(n, text)
	}
	c := Command{Line: n, Name: v.spec.Name, Verb: v.verb.Word, Text: text}
	if reason := v.verb.Args(&c, splitArgs(args), opt); reason != "" {
		c.RunID, c.Attempt, c.Cancel, c.Args = 0, 0, false, nil
		c.Error, c.Reason = v.verb.Usage, reason
	}
	return c, true
}

// splitArgs splits on spaces and tabs only: any other character, Unicode
// spaces included, belongs to an argument.
func splitArgs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
}

// RunOrCancel reads the arguments of a command that takes a run, the word
// cancel, or nothing (a bare command: the newest run): at most one.
func RunOrCancel(c *Command, args []string, opt Options) string {
	switch {
	case len(args) > 1:
		return fmt.Sprintf("%s takes one argument, got %d", c.Verb, len(args))
	case len(args) == 0:
		return ""
	case strings.EqualFold(args[0], "cancel"):
		c.Cancel = true
		return ""
	}
	var reason string
	c.RunID, c.Attempt, reason = RunArgument(args[0], opt)
	return reason
}

// RunArgument reads a run id or a run URL of the repository the comment
// belongs to (opt), for a command's argument reader. reason says what is
// wrong, or is empty.
func RunArgument(arg string, opt Options) (id int64, attempt int, reason string) {
	if arg[0] >= '0' && arg[0] <= '9' || !strings.Contains(arg, "://") {
		id, reason := parseRunID(arg)
		return id, 0, reason
	}
	host := opt.Host
	if host == "" {
		host = "github.com"
	}
	rest, ok := strings.CutPrefix(arg, "https://")
	if !ok {
		return 0, 0, fmt.Sprintf("%s is not an https run URL", Code(arg))
	}
	h, rest, _ := strings.Cut(rest, "/")
	if !strings.EqualFold(h, host) {
		return 0, 0, fmt.Sprintf("%s is not a run URL on %s", Code(arg), host)
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 5 || parts[2] != "actions" || parts[3] != "runs" {
		return 0, 0, fmt.Sprintf("%s is not a run URL (https://%s/OWNER/REPO/actions/runs/ID)", Code(arg), host)
	}
	if opt.Repo == "" || !strings.EqualFold(parts[0]+"/"+parts[1], opt.Repo) {
		return 0, 0, fmt.Sprintf("%s is a run of another repository, not of %s", Code(arg), opt.Repo)
	}
	id, reason = parseRunID(parts[4])
	if reason != "" {
		return 0, 0, reason
	}
	switch tail := parts[5:]; {
	case len(tail) == 0:
	case len(tail) == 2 && (tail[0] == "attempts" || tail[0] == "job"):
		n, r := parseRunID(tail[1])
		if r != "" {
			return 0, 0, fmt.Sprintf("%s: bad %s number", Code(arg), tail[0])
		}
		if tail[0] == "attempts" {
			if n > 1<<20 {
				return 0, 0, fmt.Sprintf("%s: bad attempts number", Code(arg))
			}
			attempt = int(n)
		}
	default:
		return 0, 0, fmt.Sprintf("%s is not a run URL (only /attempts/N or /job/N may follow the run id)", Code(arg))
	}
	return id, attempt, ""
}

func parseRunID(s string) (int64, string) {
	if len(s) == 0 || len(s) > 19 {
		return 0, fmt.Sprintf("%s is not a run id (1 to 19 digits)", Code(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Sprintf("%s is not a run id (digits 0-9 only)", Code(s))
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("%s is too large for a run id", Code(s))
	}
	if id <= 0 {
		return 0, fmt.Sprintf("%s is not a run id (must be above 0)", Code(s))
	}
	return id, ""
}

// unicodeSpaced catches a registered verb followed by a non-ASCII space (a
// no-break space pasted from a web page): a usage error, not silence.
func (r *Registry) unicodeSpaced(n int, text string) (Command, bool) {
	for _, s := range r.specs {
		for i := range s.Verbs {
			v := &s.Verbs[i]
			w := v.Word
			if len(text) <= len(w) || !strings.EqualFold(text[:len(w)], w) {
				continue
			}
			r, _ := utf8.DecodeRuneInString(text[len(w):])
			if r > unicode.MaxASCII && unicode.IsSpace(r) {
				return Command{Line: n, Name: s.Name, Verb: w, Text: text, Error: v.Usage,
					Reason: "separate the command and its argument with a plain space"}, true
			}
		}
	}
	return Command{}, false
}
