package commands

import (
	"fmt"
	"strings"
)

// ParseFull is Parse with the whole of goldmark and its own reader: the
// reference the bounded parse is held to.
func (r *Registry) ParseFull(body string, opt Options) []Command {
	body = Newlines(body)
	if !MayHoldCommand(body) || TooDeep(body) {
		return nil
	}
	return r.parseLines(paragraphLinesFull(strings.TrimPrefix(body, "\ufeff")), opt)
}

// SectionsAgree reports whether goldmark reading every section of body
// alone finds the same top-level paragraph and heading lines, grouped in
// the same blocks, as goldmark reading the whole body (its own reader):
// a wrong section boundary shows whether or not a command is near it. It
// says what differs.
func SectionsAgree(body string) (bool, string) {
	body = strings.TrimPrefix(Newlines(body), "\ufeff")
	if TooDeep(body) {
		return true, ""
	}
	var got []sourceLine
	seen := 0
	for _, sec := range sectionsOf(body, true) {
		last := 0
		for _, l := range topLevelLines(sec.text, parseBlocks(sec.text)) {
			l.n += sec.before
			last = l.blockN
			l.blockN += seen
			got = append(got, l)
		}
		seen += last
	}
	want := paragraphLinesFull(body)
	g, w := shape(got), shape(want)
	return g == w, "sections " + g + "\nwhole    " + w
}

// shape writes lines as "n/b": each line's number and its block, blocks
// numbered by first appearance.
func shape(lines []sourceLine) string {
	ids := map[int]int{}
	var b strings.Builder
	for _, l := range lines {
		id, ok := ids[l.blockN]
		if !ok {
			id = len(ids) + 1
			ids[l.blockN] = id
		}
		fmt.Fprintf(&b, "%d/%d ", l.n, id)
	}
	return b.String()
}
