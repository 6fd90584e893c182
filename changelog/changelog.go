// Package changelog is the benchmark repository's rule for its append-only
// changelog (perf-changelog.yaml): what a PR may change in it, and how its
// entries are merged with main's when both sides appended, byte for byte
// as the repository's own helper does (utils/prepare_perf_changelog_merge.py
// and utils/validate_perf_changelog.py). Everything here fails closed: a
// file, a change or a merge the rule does not describe is an error, never
// a guess. It reads and writes bytes only: no GitHub, no state.
package changelog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Error is a file, a change or a merge the rule refuses, saying why.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func refuse(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// Rule is the rule for one repository: its PRs' canonical links are
// https://github.com/<Repo>/pull/<number>.
type Rule struct {
	Repo string
}

func (r Rule) prefix() string { return "https://github.com/" + r.Repo + "/pull/" }

// link is a PR's canonical link.
func (r Rule) link(pr int) string { return r.prefix() + strconv.Itoa(pr) }

// canonical reports whether link is a canonical PR link of the repository.
func (r Rule) canonical(link string) bool {
	n, ok := strings.CutPrefix(link, r.prefix())
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// placeholder reports whether link is a placeholder a PR's new entry may
// carry until it is merged.
func (r Rule) placeholder(link string) bool { return link == "XXX" || link == r.prefix()+"XXX" }

// Entry is one entry of the changelog, as the YAML parse reads it.
type Entry map[string]any

func (e Entry) link() string {
	s, _ := e["pr-link"].(string)
	return s
}

// withoutLink is e without its pr-link.
func (e Entry) withoutLink() map[string]any {
	out := make(map[string]any, len(e))
	for k, v := range e {
		if k != "pr-link" {
			out[k] = v
		}
	}
	return out
}

// signature is e's identity apart from its link: its fields as JSON with
// sorted keys.
func (e Entry) signature() string {
	b, err := json.Marshal(e.withoutLink())
	if err != nil {
		return "unreadable: " + err.Error() // never equal to a readable entry's
	}
	return string(b)
}

var entryStart = regexp.MustCompile(`(?m)^- config-keys:[^\r\n]*\n`)

// Parse checks the file's own rules and reads its entries: it ends with a
// newline and holds no CR, tab or NUL; it is UTF-8 YAML (no mapping key
// twice) whose root is a list, one entry per line that starts
// "- config-keys:", each a valid entry.
func Parse(raw []byte, label string) ([]Entry, error) {
	switch {
	case !bytes.HasSuffix(raw, []byte("\n")):
		return nil, refuse("%s does not end with a newline", label)
	case bytes.IndexByte(raw, '\r') >= 0:
		return nil, refuse("%s contains CR characters", label)
	case bytes.IndexByte(raw, '\t') >= 0:
		return nil, refuse("%s contains tabs", label)
	case bytes.IndexByte(raw, 0) >= 0:
		return nil, refuse("%s contains NUL bytes", label)
	case !utf8.Valid(raw):
		return nil, refuse("%s is not UTF-8", label)
	}
	// One document, as the helper's yaml.load reads: a second is refused.
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var root, more yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, refuse("%s is not valid YAML: %v", label, err)
	}
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, refuse("%s is not one YAML document", label)
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.SequenceNode {
		return nil, refuse("%s root must be a YAML list", label)
	}
	// No anchor, alias or merge key: an entry means what its own lines
	// say, whatever comes before or after it (an alias to an anchor main
	// redefines would change an appended entry's meaning in the merge).
	if why := plainYAML(root.Content[0]); why != "" {
		return nil, refuse("%s %s", label, why)
	}
	items := root.Content[0].Content
	starts := 0
	for _, line := range splitLines(string(raw)) {
		if strings.HasPrefix(line, "- config-keys:") {
			starts++
		}
	}
	if starts != len(items) {
		return nil, refuse("%s has %d top-level config entries but YAML parsed %d entries", label, starts, len(items))
	}
	entries := make([]Entry, 0, len(items))
	for i, n := range items {
		if n.Kind != yaml.MappingNode {
			return nil, refuse("%s entry %d is not a mapping", label, i+1)
		}
		var e map[string]any
		if err := n.Decode(&e); err != nil {
			return nil, refuse("%s entry %d is not valid YAML: %v", label, i+1, err)
		}
		if err := validEntry(e); err != nil {
			return nil, refuse("%s entry %d fails ChangelogEntry validation: %v", label, i+1, err)
		}
		entries = append(entries, Entry(e))
	}
	return entries, nil
}

// plainYAML says where n uses an anchor, an alias or a merge key ("":
// nowhere).
func plainYAML(n *yaml.Node) string {
	switch {
	case n.Anchor != "":
		return fmt.Sprintf("uses a YAML anchor (&%s, line %d): entries must stand alone", n.Anchor, n.Line)
	case n.Kind == yaml.AliasNode:
		return fmt.Sprintf("uses a YAML alias (line %d): entries must stand alone", n.Line)
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0 {
				return fmt.Sprintf("uses a YAML merge key (<<, line %d): entries must stand alone", k.Line)
			}
		}
	}
	for _, c := range n.Content {
		if why := plainYAML(c); why != "" {
			return why
		}
	}
	return ""
}

// splitLines splits s as Python's str.splitlines does (the helper counts
// entries so): at \n, \r\n, \r, \v, \f, \x1c, \x1d, \x1e, \x85, U+2028 and
// U+2029.
func splitLines(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			if r == '\n' && i > 0 && s[i-1] == '\r' {
				start = i + 1
				continue
			}
			out = append(out, s[start:i])
			start = i + utf8.RuneLen(r)
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// validEntry holds an entry to the repository's ChangelogEntry model,
// strictly (a boolean is a YAML boolean, a text a YAML string): extra keys
// are refused; config-keys and description are lists of one text or more;
// pr-link a text; evals-only, all-evals and append-only booleans;
// eval-min-prefill-ep a whole number of 1 or more (or null); scenario-type
// a list of one or more of fixed-seq-len and agentic-coding (or null); and
// append-only never with an eval selection.
func validEntry(e map[string]any) error {
	texts := func(key string, required bool) error {
		v, ok := e[key]
		if !ok {
			if required {
				return fmt.Errorf("%s: field required", key)
			}
			return nil
		}
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return fmt.Errorf("%s: must be a list of at least one text", key)
		}
		for _, x := range list {
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s: must be a list of texts, not %v", key, x)
			}
		}
		return nil
	}
	flag := func(key string) (bool, error) {
		v, ok := e[key]
		if !ok {
			return false, nil
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s: must be true or false, not %v", key, v)
		}
		return b, nil
	}
	for k := range e {
		switch k {
		case "config-keys", "description", "pr-link", "evals-only", "all-evals", "append-only", "eval-min-prefill-ep", "scenario-type":
		default:
			return fmt.Errorf("%s: extra inputs are not permitted", k)
		}
	}
	if err := texts("config-keys", true); err != nil {
		return err
	}
	if err := texts("description", true); err != nil {
		return err
	}
	if v, ok := e["pr-link"]; !ok {
		return errors.New("pr-link: field required")
	} else if _, ok := v.(string); !ok {
		return fmt.Errorf("pr-link: must be a text, not %v", v)
	}
	evalsOnly, err := flag("evals-only")
	if err != nil {
		return err
	}
	allEvals, err := flag("all-evals")
	if err != nil {
		return err
	}
	appendOnly, err := flag("append-only")
	if err != nil {
		return err
	}
	minEP := false
	if v, ok := e["eval-min-prefill-ep"]; ok && v != nil {
		n, ok := v.(int)
		if !ok || n < 1 {
			return fmt.Errorf("eval-min-prefill-ep: must be a whole number of 1 or more, not %v", v)
		}
		minEP = true
	}
	if v, ok := e["scenario-type"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return errors.New("scenario-type: must be a list of at least one scenario type")
		}
		for _, x := range list {
			if x != "fixed-seq-len" && x != "agentic-coding" {
				return fmt.Errorf("scenario-type: %v is not fixed-seq-len or agentic-coding", x)
			}
		}
	}
	if appendOnly && (evalsOnly || allEvals || minEP) {
		return errors.New("append-only cannot be combined with eval selection fields")
	}
	return nil
}

// compare checks head's entries against base's: append-only, an existing
// entry changed only by a correction of its pr-link to a canonical link,
// corrections and additions never together, and each addition's link a
// placeholder or the PR's own (pr 0: a push to main, whose new links must
// be canonical). It returns the additions and the count of corrections.
func (r Rule) compare(base, head []Entry, pr int) ([]Entry, int, error) {
	if len(head) < len(base) {
		return nil, 0, refuse("perf-changelog.yaml entries were deleted")
	}
	corrections := 0
	for i, b := range base {
		h := head[i]
		if reflect.DeepEqual(map[string]any(b), map[string]any(h)) {
			continue
		}
		if !reflect.DeepEqual(b.withoutLink(), h.withoutLink()) {
			return nil, 0, refuse("entry %d changed; existing entries are immutable except for pr-link-only corrections", i+1)
		}
		if b.link() == h.link() {
			return nil, 0, refuse("entry %d was reformatted without a semantic change", i+1)
		}
		if !r.canonical(h.link()) {
			return nil, 0, refuse("entry %d pr-link correction is not canonical: %q", i+1, h.link())
		}
		corrections++
	}
	additions := head[len(base):]
	if corrections > 0 && len(additions) > 0 {
		return nil, 0, refuse("do not mix historical pr-link corrections with new changelog entries")
	}
	for _, e := range additions {
		link := e.link()
		switch {
		case pr == 0 && !r.canonical(link):
			return nil, 0, refuse("new main-branch entry has invalid pr-link: %q", link)
		case pr != 0 && !r.placeholder(link) && link != r.link(pr):
			return nil, 0, refuse("new PR entry must use %q or an XXX placeholder; found %q", r.link(pr), link)
		}
	}
	return additions, corrections, nil
}

// checkBytes holds the bytes of a change to what compare found: with
// additions, head is base byte for byte, then one empty line, then the
// entries, one empty line apart, and one final newline; with corrections
// only, the same lines but for that many pr-link lines; with neither,
// head is base.
func checkBytes(base, head []byte, additions, corrections int) error {
	if additions > 0 {
		if !bytes.HasPrefix(head, base) {
			return refuse("appended entries changed historical perf-changelog.yaml bytes; restore the base file byte-for-byte and append at the end")
		}
		want := "\n- config-keys:"
		if bytes.HasSuffix(base, []byte("\n\n")) {
			want = "- config-keys:"
		}
		if !bytes.HasPrefix(head[len(base):], []byte(want)) {
			return refuse("new changelog entries must be separated from history by one empty line and appended at the end")
		}
		starts := entryStart.FindAllIndex(head, -1)
		if len(starts) < additions {
			return refuse("could not find the appended changelog entries")
		}
		for _, s := range starts[len(starts)-additions:][1:] {
			prefix := head[:s[0]]
			if !bytes.HasSuffix(prefix, []byte("\n\n")) || bytes.HasSuffix(prefix, []byte("\n\n\n")) {
				return refuse("appended changelog entries must have exactly one empty separator line")
			}
		}
		if bytes.HasSuffix(head, []byte("\n\n")) {
			return refuse("the final appended changelog entry must end with one newline")
		}
		return nil
	}
	if corrections > 0 {
		bl, hl := lines(base), lines(head)
		if len(bl) != len(hl) {
			return refuse("pr-link corrections may not add or delete lines")
		}
		changed := 0
		for i := range bl {
			if bl[i] == hl[i] {
				continue
			}
			changed++
			if !strings.HasPrefix(bl[i], "  pr-link:") || !strings.HasPrefix(hl[i], "  pr-link:") ||
				!strings.HasSuffix(bl[i], "\n") || !strings.HasSuffix(hl[i], "\n") {
				return refuse("historical bytes changed outside a pr-link line at line %d", i+1)
			}
		}
		if changed != corrections {
			return refuse("expected %d changed pr-link line(s), found %d", corrections, changed)
		}
		return nil
	}
	if !bytes.Equal(base, head) {
		return refuse("changelog diff has no appended entry or pr-link correction; historical whitespace and formatting are immutable")
	}
	return nil
}

// lines splits b after each \n, keeping it (the files hold no \r).
func lines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// span is one entry's bytes: from its "- config-keys:" line to its last
// line that is not blank (content), and to the next entry (end).
type span struct{ start, content, end int }

// spans locates each entry's bytes without normalizing them.
func spans(raw []byte, entries []Entry) ([]span, error) {
	idx := entryStart.FindAllIndex(raw, -1)
	if len(idx) != len(entries) {
		return nil, refuse("could not map parsed changelog entries to raw byte spans")
	}
	out := make([]span, len(idx))
	for i, m := range idx {
		end := len(raw)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		ls := lines(raw[m[0]:end])
		for len(ls) > 0 && strings.Trim(ls[len(ls)-1], " \t\r\n") == "" {
			ls = ls[:len(ls)-1]
		}
		n := 0
		for _, l := range ls {
			n += len(l)
		}
		out[i] = span{start: m[0], content: m[0] + n, end: end}
	}
	return out, nil
}

var linkLine = regexp.MustCompile(`(?m)^  pr-link:[^\r\n]*`)

// withLink is block with its one top-level pr-link line set to link.
func withLink(block []byte, link string) ([]byte, error) {
	loc := linkLine.FindIndex(block)
	if loc == nil {
		return nil, refuse("could not locate exactly one pr-link line in a changelog entry")
	}
	out := append([]byte{}, block[:loc[0]]...)
	out = append(out, "  pr-link: "+link...)
	return append(out, block[loc[1]:]...), nil
}

type replacement struct {
	at    span
	block []byte
}

func splice(raw []byte, reps []replacement) []byte {
	out := append([]byte{}, raw...)
	for i := len(reps) - 1; i >= 0; i-- {
		r := reps[i]
		out = append(append(append([]byte{}, out[:r.at.start]...), r.block...), out[r.at.content:]...)
	}
	return out
}

// Resolve merges main's changelog into the PR's when both changed it
// since their merge base: main's bytes are kept whole, then the PR's own
// entries follow, each once (one main already has, apart from its link,
// is dropped), with its link set to the PR's, one empty line before each
// and one final newline; or, for a PR that only corrected links, those
// links are corrected in main's file. The result is checked as a change
// of main's file before it is returned.
func (r Rule) Resolve(base, pr, main []byte, number int) ([]byte, error) {
	be, err := Parse(base, "merge-base perf-changelog.yaml")
	if err != nil {
		return nil, err
	}
	pe, err := Parse(pr, "PR-side perf-changelog.yaml")
	if err != nil {
		return nil, err
	}
	me, err := Parse(main, "main-side perf-changelog.yaml")
	if err != nil {
		return nil, err
	}
	additions, corrections, err := r.compare(be, pe, number)
	if err != nil {
		return nil, err
	}
	if err := checkBytes(base, pr, len(additions), corrections); err != nil {
		return nil, err
	}
	var result []byte
	switch {
	case len(additions) > 0:
		onMain := map[string]bool{}
		for _, e := range me {
			onMain[e.signature()] = true
		}
		ps, err := spans(pr, pe)
		if err != nil {
			return nil, err
		}
		var blocks [][]byte
		var kept []Entry
		for i := len(be); i < len(pe); i++ {
			if onMain[pe[i].signature()] {
				continue
			}
			kept = append(kept, pe[i])
			b, err := withLink(pr[ps[i].start:ps[i].content], r.link(number))
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		}
		if len(blocks) == 0 {
			return nil, refuse("the PR has no changelog contribution remaining after merging main")
		}
		sep := []byte("\n")
		if bytes.HasSuffix(main, []byte("\n\n")) {
			sep = nil
		}
		result = append(append(append([]byte{}, main...), sep...), bytes.Join(blocks, []byte("\n"))...)
		// The entries appended are the PR's, as the PR wrote them, linked
		// to it: nothing in main's bytes changes what they mean.
		re, err := Parse(result, "resolved perf-changelog.yaml")
		if err != nil {
			return nil, err
		}
		if len(re) != len(me)+len(kept) {
			return nil, refuse("the merge holds %d entries, not main's %d and the PR's %d", len(re), len(me), len(kept))
		}
		for i, e := range kept {
			got := re[len(me)+i]
			if !reflect.DeepEqual(got.withoutLink(), e.withoutLink()) || got.link() != r.link(number) {
				return nil, refuse("the PR's entry %d reads differently once merged", len(be)+i+1)
			}
		}
	case corrections > 0:
		ms, err := spans(main, me)
		if err != nil {
			return nil, err
		}
		var reps []replacement
		for i := range be {
			b, p := be[i], pe[i]
			if reflect.DeepEqual(map[string]any(b), map[string]any(p)) {
				continue
			}
			if i >= len(me) {
				return nil, refuse("main is missing corrected entry %d", i+1)
			}
			m := me[i]
			if !reflect.DeepEqual(m.withoutLink(), b.withoutLink()) {
				return nil, refuse("main changed corrected entry %d; resolve manually", i+1)
			}
			if m.link() == p.link() {
				continue
			}
			if m.link() != b.link() {
				return nil, refuse("main has a conflicting pr-link for entry %d", i+1)
			}
			block, err := withLink(main[ms[i].start:ms[i].content], p.link())
			if err != nil {
				return nil, err
			}
			reps = append(reps, replacement{ms[i], block})
		}
		if len(reps) == 0 {
			return nil, refuse("the PR's pr-link corrections are already present on main")
		}
		result = splice(main, reps)
	default:
		return nil, refuse("the PR has no appended entry or pr-link correction to preserve")
	}
	return result, r.check(me, main, result, number, "resolved perf-changelog.yaml")
}

// Canonicalize sets the links of the entries the PR appended (to base)
// that are placeholders to the PR's own; any other link on an appended
// entry, or any change to base's bytes, is refused.
func (r Rule) Canonicalize(base, head []byte, number int) ([]byte, error) {
	be, err := Parse(base, "base perf-changelog.yaml")
	if err != nil {
		return nil, err
	}
	he, err := Parse(head, "PR perf-changelog.yaml")
	if err != nil {
		return nil, err
	}
	additions, corrections, err := r.compare(be, he, number)
	if err != nil {
		return nil, err
	}
	if err := checkBytes(base, head, len(additions), corrections); err != nil {
		return nil, err
	}
	if len(additions) == 0 {
		return head, nil
	}
	hs, err := spans(head, he)
	if err != nil {
		return nil, err
	}
	want := r.link(number)
	var reps []replacement
	for i := len(be); i < len(he); i++ {
		link := he[i].link()
		if link == want {
			continue
		}
		if !r.placeholder(link) {
			return nil, refuse("appended entry %d has unexpected pr-link %q", i+1, link)
		}
		block, err := withLink(head[hs[i].start:hs[i].content], want)
		if err != nil {
			return nil, err
		}
		reps = append(reps, replacement{hs[i], block})
	}
	result := splice(head, reps)
	return result, r.check(be, base, result, number, "prepared perf-changelog.yaml")
}

// check holds a result to the rule as a change of from's file.
func (r Rule) check(fromEntries []Entry, from, result []byte, number int, label string) error {
	re, err := Parse(result, label)
	if err != nil {
		return err
	}
	additions, corrections, err := r.compare(fromEntries, re, number)
	if err != nil {
		return err
	}
	return checkBytes(from, result, len(additions), corrections)
}
