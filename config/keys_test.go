package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// configKeys are every key the configuration takes, as paths
// (github.app.id, repos[].stage.dispatch.repo), from Config's yaml tags;
// the value says whether the key is a leaf (a value, not a section).
func configKeys() map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type, at string)
	walk = func(t reflect.Type, at string) {
		for name, ft := range yamlFields(t) {
			p := name
			if at != "" {
				p = at + "." + name
			}
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct:
				out[p] = false
				walk(ft, p)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				out[p] = false
				walk(ft.Elem(), p+"[]")
			default:
				out[p] = true
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}

// commentedKeyRE is a key line commented out in the example ("  # app:",
// "    # slack_channel: ..."): an optional key, shown with an example value.
var commentedKeyRE = regexp.MustCompile(`^(\s*)#\s?(\s*[a-z][a-z0-9_]*:(\s.*)?)$`)

// exampleKeys are the key paths opsbot.example.yaml shows, commented-out
// keys included.
func exampleKeys(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "opsbot.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if m := commentedKeyRE.FindStringSubmatch(l); m != nil {
			lines[i] = m[1] + m[2]
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(strings.Join(lines, "\n")), &root); err != nil {
		t.Fatalf("opsbot.example.yaml with its commented keys shown: %v", err)
	}
	out := map[string]bool{}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, at)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if at != "" {
					p = at + "." + p
				}
				out[p] = true
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if c.Kind == yaml.MappingNode {
					walk(c, at+"[]")
				}
			}
		}
	}
	walk(&root, "")
	return out
}

// The example says it lists every key: it does, and nothing else.
func TestExampleListsEveryKey(t *testing.T) {
	keys, shown := configKeys(), exampleKeys(t)
	for _, k := range sortedKeys(keys) {
		if !shown[k] {
			t.Errorf("opsbot.example.yaml lacks %s: add it, with its default or an example (commented out when optional)", k)
		}
	}
	for _, k := range sortedKeys(shown) {
		if _, ok := keys[k]; !ok && !underMap(k) {
			t.Errorf("opsbot.example.yaml shows %s, which is no key of the configuration", k)
		}
	}
}

// underMap reports whether key k is an entry of a map-valued setting (its
// keys are the user's, such as gpus_per_runner's label globs).
func underMap(k string) bool {
	var maps []string
	var walk func(t reflect.Type, at string)
	walk = func(t reflect.Type, at string) {
		for name, ft := range yamlFields(t) {
			p := strings.TrimPrefix(at+"."+name, ".")
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Map:
				maps = append(maps, p+".")
			case ft.Kind() == reflect.Struct:
				walk(ft, p)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), p+"[]")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	for _, m := range maps {
		if strings.HasPrefix(k, m) {
			return true
		}
	}
	return false
}

var (
	docTokenRE = regexp.MustCompile("`([^`]+)`")
	docPathRE  = regexp.MustCompile(`^[a-z0-9_]+(\[\])?(\.[a-z0-9_]+(\[\])?)*(\.\*)?$`)
)

// docRow is one row of docs/configuration.md's reference table: the key
// paths its first column names and every path-like token in the row, each
// ".sibling" shorthand (`github.content_rate.per_minute`, `.per_hour`)
// expanded from the path before it.
type docRow struct {
	text  string
	first []string // the paths of the first column
	short []string // the paths written as .sibling shorthand, anywhere in the row
	all   []string
}

func docRows(t *testing.T) []docRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		r := docRow{text: line}
		anchor := ""
		for ci, cell := range cells {
			for _, m := range docTokenRE.FindAllStringSubmatch(cell, -1) {
				tok := m[1]
				if strings.HasPrefix(tok, ".") && anchor != "" && docPathRE.MatchString(tok[1:]) {
					tok = anchor[:strings.LastIndex(anchor, ".")] + tok
					r.short = append(r.short, tok)
				}
				if !docPathRE.MatchString(tok) {
					continue
				}
				if strings.Contains(tok, ".") || strings.Contains(tok, "[]") {
					anchor = tok
				}
				r.all = append(r.all, tok)
				if ci == 0 {
					r.first = append(r.first, tok)
				}
			}
		}
		rows = append(rows, r)
	}
	if len(rows) < 20 {
		t.Fatalf("docs/configuration.md: found %d rows of the reference table", len(rows))
	}
	return rows
}

// documented reports whether a row documents the key: it names it in its
// first column (or as .sibling shorthand anywhere), or names a section it
// is in (also as SECTION.*) and the rest of its path as a word
// (`repos[].reuse` ... `allow_users`).
func (r docRow) documented(key string) bool {
	for _, tok := range append(r.first, r.short...) {
		if tok == key {
			return true
		}
	}
	for _, tok := range r.all {
		// A section named as SECTION.* documents a key of it only when the row
		// names the rest of its path too: a new key in it needs its own words.
		tok = strings.TrimSuffix(tok, ".*")
		if rest, ok := strings.CutPrefix(key, tok+"."); ok {
			if regexp.MustCompile(`(^|[^a-z_.\[])` + regexp.QuoteMeta(rest) + `($|[^a-z_])`).MatchString(r.text) {
				return true
			}
		}
	}
	return false
}

// docs/configuration.md is the full reference: its table documents every
// key, and names no key the configuration does not have.
func TestConfigurationReferenceDocumentsEveryKey(t *testing.T) {
	keys, rows := configKeys(), docRows(t)
	for _, k := range sortedKeys(keys) {
		if !keys[k] {
			continue // a section: its keys are checked
		}
		found := false
		for _, r := range rows {
			found = found || r.documented(k)
		}
		if !found {
			t.Errorf("docs/configuration.md documents no %s: add a row for it to the table", k)
		}
	}
	for _, r := range rows {
		for _, tok := range r.first {
			if _, ok := keys[strings.TrimSuffix(tok, ".*")]; !ok {
				t.Errorf("docs/configuration.md has a row for %s, which is no key of the configuration", tok)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
