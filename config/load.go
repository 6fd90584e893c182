package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problems is every problem found in a configuration, each with its path.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("%d problem(s) in the configuration:\n  %s", len(p), strings.Join(p, "\n  "))
}

// Load reads and validates the file at path: the file alone. What it
// names on this machine (state_path's directory, the TLS pair) is checked
// by CheckPaths once the flags and the environment have overridden the
// file (serve's and config check's preflight), so an override can correct
// a path the file gives for another host. The error, if any, is a
// Problems listing everything wrong, or a read error.
func Load(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading config %q: %w", file, err)
	}
	// A relative state path is relative to the working directory, as the
	// README's commands expect; nothing to rewrite.
	return Parse(data)
}

// LoadFileOnly is Load: the file alone, as CI lints a configuration
// written for another host.
func LoadFileOnly(file string) (*Config, error) { return Load(file) }

// Parse decodes and validates a configuration held in memory (not its
// paths on this machine: CheckPaths).
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{fmt.Sprintf("not valid YAML: %v", err)}
	}
	if len(root.Content) == 0 {
		return nil, Problems{"the file is empty: start from opsbot.example.yaml"}
	}
	var probs Problems
	checkKeys(root.Content[0], reflect.TypeOf(Config{}), "", &probs)
	placeholders(root.Content[0], "", &probs)

	var cfg Config
	var typeErrs []string
	if err := root.Decode(&cfg); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, Problems{err.Error()}
		}
		typeErrs = te.Errors
	}
	for i := range cfg.Repos {
		typeErrs = append(typeErrs, cfg.Repos[i].typeErrs...)
		cfg.Repos[i].typeErrs = nil
	}
	if len(typeErrs) > 0 {
		paths := map[int][]keyAt{}
		keyPaths(root.Content[0], "", paths)
		for _, e := range typeErrs {
			probs = append(probs, withKeyPath(e, paths))
		}
	}
	cfg.applyDefaults()
	probs = append(probs, cfg.validate()...)
	if len(probs) > 0 {
		return nil, probs
	}
	return &cfg, nil
}

// PlaceholderAppID is the App id the starter configurations hold until
// the App's own is put in: no opsbot runs as it.
const PlaceholderAppID = 1

// placeholderRE is a placeholder the docs and starter configurations
// write for a value of the reader's own (YOUR-HOST, YOUR-ORG).
var placeholderRE = regexp.MustCompile(`YOUR-[A-Z][A-Z-]*`)

// placeholders adds a problem for each value that still holds a
// placeholder: a configuration copied from the docs passes no check until
// the reader's own values are in it.
func placeholders(n *yaml.Node, path string, probs *Problems) {
	switch n.Kind {
	case yaml.ScalarNode:
		if m := placeholderRE.FindString(n.Value); m != "" {
			*probs = append(*probs, fmt.Sprintf("%s: %q holds the placeholder %s: put your own value in its place", path, n.Value, m))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			placeholders(n.Content[i+1], p, probs)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			placeholders(v, fmt.Sprintf("%s[%d]", path, i), probs)
		}
	}
}

// keyAt is a value in the YAML document and the key path that names it
// (workers, repos[0].reuse.min_role).
type keyAt struct {
	path string
	node *yaml.Node
}

// keyPaths lists, for each line of the YAML document, the values on it
// with their key paths.
func keyPaths(n *yaml.Node, path string, out map[int][]keyAt) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			out[v.Line] = append(out[v.Line], keyAt{p, v})
			keyPaths(v, p, out)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			out[v.Line] = append(out[v.Line], keyAt{p, v})
			keyPaths(v, p, out)
		}
	}
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

// withKeyPath names the key of a YAML type error ("line 3: cannot
// unmarshal …" becomes "workers (line 3): …"): of the values on its line,
// the one the error quotes (the value, or a mapping or a list), else every
// one that could be it.
func withKeyPath(e string, paths map[int][]keyAt) string {
	m := lineRE.FindStringSubmatch(e)
	if m == nil {
		return e
	}
	n, _ := strconv.Atoi(m[1])
	at := paths[n]
	if len(at) == 0 {
		return e
	}
	rest := strings.TrimPrefix(e, m[0])
	var named []string
	if u := unmarshalRE.FindStringSubmatch(rest); u != nil {
		for _, k := range at {
			switch {
			case u[2] != "" && k.node.Kind == yaml.ScalarNode && k.node.Value == u[2],
				u[2] == "" && u[1] == "map" && k.node.Kind == yaml.MappingNode,
				u[2] == "" && u[1] == "seq" && k.node.Kind == yaml.SequenceNode,
				u[2] == "" && u[1] == "null" && k.node.Kind == yaml.ScalarNode && k.node.Tag == "!!null":
				named = append(named, k.path)
			}
		}
	}
	if len(named) == 0 {
		for _, k := range at {
			if k.node.Kind == yaml.ScalarNode {
				named = append(named, k.path)
			}
		}
	}
	if len(named) == 0 {
		named = []string{at[0].path}
	}
	return fmt.Sprintf("%s (line %d): %s", strings.Join(named, " or "), n, plainTypeError(rest))
}

var unmarshalRE = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// plainTypeError says a YAML type error in the file's words, not Go's
// ("cannot unmarshal !!int `5` into time.Duration" becomes "must be a
// duration such as 168h or 30m, not 5").
func plainTypeError(e string) string {
	m := unmarshalRE.FindStringSubmatch(e)
	if m == nil {
		return e
	}
	got := "`" + m[2] + "`"
	if m[2] == "" {
		got = map[string]string{"map": "a mapping", "seq": "a list", "null": "empty"}[m[1]]
		if got == "" {
			got = "!!" + m[1]
		}
	}
	return fmt.Sprintf("must be %s, not %s", describeType(m[3]), got)
}

// describeType names a Go type (as the YAML decoder prints it) as the
// file writes a value of it.
func describeType(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case t == "time.Duration":
		return "a duration such as 168h or 30m"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "text"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "a list of " + plural(describeType(t[2:]))
	case strings.HasPrefix(t, "map["):
		return "a mapping (key: value lines)"
	default:
		return "a mapping (key: value lines)"
	}
}

func plural(d string) string {
	switch d {
	case "text":
		return "texts"
	case "a whole number":
		return "whole numbers"
	}
	return "items, each " + d
}

// checkKeys walks a mapping node against a struct type, reporting every key
// the type does not have with its full path and, when one is close, a hint.
func checkKeys(n *yaml.Node, t reflect.Type, at string, probs *Problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// An alias (*name) is checked as the value it names, here, against
	// this key's type: an anchor set under another key is no pass.
	for depth := 0; n.Kind == yaml.AliasNode && n.Alias != nil && depth < 16; depth++ {
		n = n.Alias
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			p := k
			if at != "" {
				p = at + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				msg := fmt.Sprintf("%s: unknown key (line %d)", p, n.Content[i].Line)
				if s := closest(k, fields); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				*probs = append(*probs, msg)
				continue
			}
			checkKeys(v, ft, p, probs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", at, i), probs)
		}
	}
}

var repoType = reflect.TypeOf(Repo{})

// yamlFields are the keys a struct type takes, by their yaml tags; a
// repository's also are the registered sections of the commands' own types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := structKeys(t)
	if t == repoType {
		for _, s := range registered() {
			if s.New != nil {
				out[s.Key] = reflect.TypeOf(s.New())
			}
		}
	}
	return out
}

// structKeys are the keys a struct type's own fields take, by their yaml
// tags.
func structKeys(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, v := range structKeys(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func closest(k string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	return Closest(k, names)
}

// Closest is the word of names that word is a slip of (at most two edits
// away; the nearest, the first in sorted order at a tie), or "".
func Closest(word string, names []string) string {
	names = slices.Clone(names)
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(word, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
