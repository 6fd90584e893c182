package commands

// This file is goldmark's text.Reader (github.com/yuin/goldmark/text,
// v1.8.7, MIT License, Copyright (c) 2019 Yusuke Inuzuka) with one change:
// LineOffset, the column of the reading position, is counted on from the
// last column it gave on the same line instead of from the line's start.
// goldmark's block parser asks for it at every container marker, so on a
// line of n markers (">>>>…", "> - > - …") goldmark's own reader counts
// n²/2 columns: 64 KiB of them took seconds. With this one a line costs
// its length. Every other method is goldmark's, so the block structure,
// and with it what is a command, is the same (FuzzBoundedParse checks it
// against goldmark's reader).

import (
	"bytes"
	"io"
	"regexp"
	"unicode/utf8"

	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

type columnReader struct {
	source       []byte
	sourceLength int
	line         int
	peekedLine   []byte
	pos          text.Segment
	head         int
	lineOffset   int // goldmark's cache of LineOffset: -1 when to be counted
	// The last column counted: the column of byte at on the line that
	// starts at atHead (before padding).
	atHead, at, atCol int
}

var _ text.Reader = (*columnReader)(nil)

func newColumnReader(source []byte) *columnReader {
	r := &columnReader{source: source, sourceLength: len(source), atHead: -1}
	r.ResetPosition()
	return r
}

func (r *columnReader) ResetPosition() {
	r.line = -1
	r.head = 0
	r.lineOffset = -1
	r.AdvanceLine()
}

func (r *columnReader) Source() []byte { return r.source }

func (r *columnReader) Value(seg text.Segment) []byte { return seg.Value(r.source) }

func (r *columnReader) Peek() byte {
	if r.pos.Start >= 0 && r.pos.Start < r.sourceLength {
		if r.pos.Padding != 0 {
			return ' '
		}
		return r.source[r.pos.Start]
	}
	return text.EOF
}

func (r *columnReader) PeekLine() ([]byte, text.Segment) {
	if r.pos.Start >= 0 && r.pos.Start < r.sourceLength {
		if r.peekedLine == nil {
			r.peekedLine = r.pos.Value(r.Source())
		}
		return r.peekedLine, r.pos
	}
	return nil, r.pos
}

func (r *columnReader) ReadRune() (rune, int, error) {
	line, _ := r.PeekLine()
	if line == nil {
		return 0, 0, io.EOF
	}
	rn, size := utf8.DecodeRune(line)
	if rn == utf8.RuneError {
		return 0, 0, io.EOF
	}
	r.Advance(size)
	return rn, size, nil
}

// LineOffset is the column of the position on its line (tabs to the next
// multiple of 4), less its padding: goldmark's value, counted on from the
// last one asked for on the same line when the position has moved forward.
func (r *columnReader) LineOffset() int {
	if r.lineOffset >= 0 {
		return r.lineOffset
	}
	if r.atHead != r.head || r.pos.Start < r.at {
		r.atHead, r.at, r.atCol = r.head, r.head, 0
	}
	v := r.atCol
	for i := r.at; i < r.pos.Start; i++ {
		if r.source[i] == '\t' {
			v += util.TabWidth(v)
		} else {
			v++
		}
	}
	if r.pos.Start > r.at {
		r.at, r.atCol = r.pos.Start, v
	}
	r.lineOffset = v - r.pos.Padding
	return r.lineOffset
}

func (r *columnReader) PrecendingCharacter() rune {
	if r.pos.Start <= 0 {
		if r.pos.Padding != 0 {
			return ' '
		}
		return '\n'
	}
	i := r.pos.Start - 1
	for ; i >= 0; i-- {
		if utf8.RuneStart(r.source[i]) {
			break
		}
	}
	rn, _ := utf8.DecodeRune(r.source[i:])
	return rn
}

func (r *columnReader) Advance(n int) {
	r.lineOffset = -1
	if n < len(r.peekedLine) && r.pos.Padding == 0 {
		r.pos.Start += n
		r.peekedLine = nil
		return
	}
	r.peekedLine = nil
	l := r.sourceLength
	for ; n > 0 && r.pos.Start < l; n-- {
		if r.pos.Padding != 0 {
			r.pos.Padding--
			continue
		}
		if r.source[r.pos.Start] == '\n' {
			r.AdvanceLine()
			continue
		}
		r.pos.Start++
	}
}

func (r *columnReader) AdvanceAndSetPadding(n, padding int) {
	r.Advance(n)
	if padding > r.pos.Padding {
		r.SetPadding(padding)
	}
}

func (r *columnReader) AdvanceToEOL() {
	if r.pos.Start >= r.sourceLength {
		return
	}
	r.lineOffset = -1
	i := -1
	if r.peekedLine != nil {
		r.pos.Start += len(r.peekedLine) - r.pos.Padding - 1
		if r.source[r.pos.Start] == '\n' {
			i = 0
		}
	}
	if i == -1 {
		i = bytes.IndexByte(r.source[r.pos.Start:], '\n')
	}
	r.peekedLine = nil
	if i != -1 {
		r.pos.Start += i
	} else {
		r.pos.Start = r.sourceLength
	}
	r.pos.Padding = 0
}

func (r *columnReader) AdvanceLine() {
	r.lineOffset = -1
	r.peekedLine = nil
	r.pos.Start = r.pos.Stop
	r.head = r.pos.Start
	if r.pos.Start < 0 || r.pos.Start >= r.sourceLength {
		return
	}
	r.pos.Stop = r.sourceLength
	i := 0
	if r.source[r.pos.Start] != '\n' {
		i = bytes.IndexByte(r.source[r.pos.Start:], '\n')
	}
	if i != -1 {
		r.pos.Stop = r.pos.Start + i + 1
	}
	r.line++
	r.pos.Padding = 0
}

func (r *columnReader) Position() (int, text.Segment) { return r.line, r.pos }

func (r *columnReader) SetPosition(line int, pos text.Segment) {
	r.lineOffset = -1
	r.line = line
	r.pos = pos
}

func (r *columnReader) SetPadding(v int) { r.pos.Padding = v }

func (r *columnReader) SkipSpaces() (text.Segment, int, bool) {
	chars := 0
	for {
		line, segment := r.PeekLine()
		if line == nil {
			return segment, chars, false
		}
		for i, c := range line {
			if util.IsSpace(c) {
				chars++
				r.Advance(1)
				continue
			}
			return segment.WithStart(segment.Start + i + 1), chars, true
		}
	}
}

func (r *columnReader) SkipBlankLines() (text.Segment, int, bool) {
	lines := 0
	for {
		line, seg := r.PeekLine()
		if line == nil {
			return seg, lines, false
		}
		if util.IsBlank(line) {
			lines++
			r.AdvanceLine()
		} else {
			return seg, lines, true
		}
	}
}

func (r *columnReader) Match(reg *regexp.Regexp) bool {
	oldline, oldseg := r.Position()
	match := reg.FindReaderSubmatchIndex(r)
	r.SetPosition(oldline, oldseg)
	if match == nil {
		return false
	}
	r.Advance(match[1] - match[0])
	return true
}

func (r *columnReader) FindSubMatch(reg *regexp.Regexp) [][]byte {
	oldLine, oldSeg := r.Position()
	match := reg.FindReaderSubmatchIndex(r)
	r.SetPosition(oldLine, oldSeg)
	if match == nil {
		return nil
	}
	var bb bytes.Buffer
	bb.Grow(match[1] - match[0])
	for i := 0; i < match[1]; {
		rn, size, _ := r.ReadRune()
		i += size
		bb.WriteRune(rn)
	}
	bs := bb.Bytes()
	var result [][]byte
	for i := 0; i < len(match); i += 2 {
		if match[i] < 0 {
			result = append(result, []byte{})
			continue
		}
		result = append(result, bs[match[i]:match[i+1]])
	}
	r.SetPosition(oldLine, oldSeg)
	r.Advance(match[1] - match[0])
	return result
}

// FindClosure is for inline parsers, which the command parser has none
// of; it is goldmark's, from the same position.
func (r *columnReader) FindClosure(opener, closer byte, options text.FindClosureOptions) (*text.Segments, bool) {
	g := text.NewReader(r.source)
	g.SetPosition(r.line, r.pos)
	return g.FindClosure(opener, closer, options)
}
