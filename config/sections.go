package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Section is the part of a repository's configuration that one command
// owns (repos[].merge), declared beside its handler: its own type, what
// the file may leave out (Defaults) and what is wrong (Check). A section
// whose type is the command's own (New set) is decoded, key-checked and
// defaulted by the configuration generically: no file of this package
// names it. Every Access in it (its min_role, allow_users, allow_teams) is
// defaulted and checked as every section's is, by construction: an unknown
// role is a problem at load, wherever the Access is.
type Section struct {
	// Key is the section's key under repos[].
	Key string
	// Owner is the command that owns the section (its module's name: the
	// wiring sets it). One key has one owner.
	Owner string
	// New returns a new value of the section's own type: a pointer to a
	// struct, which the section's YAML decodes into (Typed makes it). Nil
	// for a section whose type is a field of Repo.
	New      func() any
	Defaults func(r *Repo)
	// Check reports each problem as the key under the section (such as
	// "method") and what is wrong with it.
	Check func(r *Repo) []SectionProblem
}

// SectionProblem is one thing wrong in a section.
type SectionProblem struct {
	Key, Message string
}

// Typed is a command's own section of type T (a struct, whose fields carry
// yaml tags as Repo's do): Section gives what the configuration registers,
// Of reads a repository's value.
type Typed[T any] struct {
	Key      string
	Defaults func(s *T)
	Check    func(r *Repo, s *T) []SectionProblem
}

// Section is t as the configuration registers it.
func (t Typed[T]) Section() Section {
	s := Section{Key: t.Key, New: func() any { return new(T) }}
	if t.Defaults != nil {
		s.Defaults = func(r *Repo) { t.Defaults(t.Of(r)) }
	}
	if t.Check != nil {
		s.Check = func(r *Repo) []SectionProblem { return t.Check(r, t.Of(r)) }
	}
	return s
}

// Of is r's section: as the file gave it, with its defaults. A
// repository read by a loader that did not register the section (or built
// in code) gets its defaults alone, a new value each call: a loaded
// configuration is never written to after the load.
func (t Typed[T]) Of(r *Repo) *T {
	if got, ok := r.own[t.Key]; ok {
		v, ok := got.(*T)
		if !ok { // RegisterSection refuses two types under one key
			panic(fmt.Sprintf("config: section %s holds a %T, not a %T", t.Key, got, v))
		}
		return v
	}
	v := new(T)
	if t.Defaults != nil {
		t.Defaults(v)
	}
	defaultAccesses(reflect.ValueOf(v).Elem())
	return v
}

var (
	sectionsMu sync.Mutex
	sections   []Section
)

// RegisterSection adds a command's section: its defaults are applied and
// its checks made whenever a configuration is read. The server's wiring
// registers its commands' sections before it reads one; a test's second
// wiring registers the same sections again, which changes nothing.
//
// It panics on a section the configuration could not hold to its rules: a
// key that is a field of Repo, or another section's (of another type, or
// another owner: one of them would read its defaults whatever the file
// says, or never run its checks), or a type
// whose keys or access rules the load could not see (see sectionType).
func RegisterSection(s Section) {
	if s.Key == "" {
		panic("config: a section needs a key")
	}
	if s.New != nil {
		if _, field := structKeys(repoType)[s.Key]; field {
			panic(fmt.Sprintf("config: section %s: the key is a field of a repository's configuration", s.Key))
		}
		if err := sectionType(reflect.TypeOf(s.New()), s.Key); err != nil {
			panic("config: section " + err.Error())
		}
	}
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	for _, have := range sections {
		if have.Key != s.Key {
			continue
		}
		if (have.New == nil) != (s.New == nil) || (s.New != nil && reflect.TypeOf(have.New()) != reflect.TypeOf(s.New())) {
			panic(fmt.Sprintf("config: section %s is registered twice, with two types", s.Key))
		}
		if have.Owner != s.Owner {
			// The second's defaults and checks would never run.
			panic(fmt.Sprintf("config: section %s is registered by %q and by %q: one key has one owner", s.Key, have.Owner, s.Owner))
		}
		return // registered already, by its owner: a second wiring
	}
	sections = append(sections, s)
}

// sectionType holds a section's type (a pointer to a struct) to what the
// load sees: every field the file may set carries a yaml tag (a field
// without one could never be set: checkKeys refuses its key), an inline
// field is a struct, and an Access is reached through struct fields alone
// (one behind a pointer, a list or a map would be neither defaulted nor
// checked: its typo'd role would load, and deny everyone at run time).
func sectionType(t reflect.Type, path string) error {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%s: New must return a pointer to a struct, not %s", path, t)
	}
	return structFields(t.Elem(), path)
}

func structFields(t reflect.Type, path string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		at := path + "." + name
		switch {
		case !f.IsExported() || name == "-":
			if holdsAccess(f.Type, map[reflect.Type]bool{}) {
				return fmt.Errorf("%s.%s: an access rule the file cannot set", path, f.Name)
			}
			continue
		case opts == "inline":
			if f.Type.Kind() != reflect.Struct {
				return fmt.Errorf("%s.%s: an inline field must be a struct, not %s", path, f.Name, f.Type)
			}
			at = path
		case name == "":
			return fmt.Errorf("%s.%s: needs a yaml tag (the file's key for it)", path, f.Name)
		}
		if f.Type == accessType {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.ConvertibleTo(accessType) {
			return fmt.Errorf("%s: %s has an access rule's fields but is not config.Access, so its role would be neither defaulted nor checked; use config.Access", at, f.Type)
		}
		if f.Type.Kind() == reflect.Struct {
			if err := structFields(f.Type, at); err != nil {
				return err
			}
			continue
		}
		if holdsAccess(f.Type, map[reflect.Type]bool{}) {
			return fmt.Errorf("%s: an access rule behind a %s is neither defaulted nor checked at load; make it a struct field", at, f.Type.Kind())
		}
	}
	return nil
}

// holdsAccess reports whether a value of t can hold an Access.
func holdsAccess(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == accessType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsAccess(t.Elem(), seen)
	case reflect.Map:
		return holdsAccess(t.Key(), seen) || holdsAccess(t.Elem(), seen)
	case reflect.Interface:
		return false
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if holdsAccess(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

func registered() []Section {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	return append([]Section(nil), sections...)
}

// ownSection is the registered section of its own type under key, if any.
func ownSection(key string) (Section, bool) {
	for _, s := range registered() {
		if s.Key == key && s.New != nil {
			return s, true
		}
	}
	return Section{}, false
}

// UnmarshalYAML decodes a repository: its own fields, then each
// registered section of its own type (checkKeys reports keys neither
// knows). Type errors of both are kept in the repository for Parse to
// report, every one at once, with their key paths.
func (r *Repo) UnmarshalYAML(n *yaml.Node) error {
	type plain Repo // without this method
	collect := func(err error) error {
		if te, ok := err.(*yaml.TypeError); ok {
			r.typeErrs = append(r.typeErrs, te.Errors...)
			return nil
		}
		return err
	}
	if err := collect(n.Decode((*plain)(r))); err != nil {
		return err
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			sec, ok := ownSection(n.Content[i].Value)
			if !ok {
				continue
			}
			v := sec.New()
			if err := collect(n.Content[i+1].Decode(v)); err != nil {
				return err
			}
			if r.own == nil {
				r.own = map[string]any{}
			}
			r.own[sec.Key] = v
		}
	}
	return nil
}

// Own is the value of the repository's section key of its own type (nil:
// none registered under key).
func (r *Repo) Own(key string) any { return r.own[key] }

// accessAt is one Access in a repository's configuration and its key path.
type accessAt struct {
	path string
	a    *Access
}

var accessType = reflect.TypeOf(Access{})

// accesses are every Access in r: in its own fields and in its sections
// of their own type, with their key paths under prefix (repos[0]), in a
// stable order. Each section that says who may run a command has one.
func (r *Repo) accesses(prefix string) []accessAt {
	var out []accessAt
	walkAccesses(reflect.ValueOf(r).Elem(), prefix, &out)
	keys := make([]string, 0, len(r.own))
	for k := range r.own {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		walkAccesses(reflect.ValueOf(r.own[k]).Elem(), prefix+"."+k, &out)
	}
	return out
}

func walkAccesses(v reflect.Value, path string, out *[]accessAt) {
	if v.Kind() != reflect.Struct {
		return
	}
	if v.Type() == accessType {
		*out = append(*out, accessAt{path: path, a: v.Addr().Interface().(*Access)})
		return
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline":
			walkAccesses(v.Field(i), path, out)
		case name != "" && name != "-":
			walkAccesses(v.Field(i), path+"."+name, out)
		}
	}
}

// defaultAccesses gives every Access in v without a role the default one.
func defaultAccesses(v reflect.Value) {
	var found []accessAt
	walkAccesses(v, "", &found)
	for _, at := range found {
		if at.a.MinRole == "" {
			at.a.MinRole = DefaultMinRole
		}
	}
}

// AccessKeys are the keys under repos[] of every section that says who
// may run a command (has an Access), its own fields' and the registered
// sections' alike: what a test of every section's access rule walks.
func AccessKeys() []string {
	var r Repo
	for _, s := range registered() {
		if s.New != nil {
			if r.own == nil {
				r.own = map[string]any{}
			}
			r.own[s.Key] = s.New()
		}
	}
	var out []string
	for _, at := range r.accesses("") {
		out = append(out, strings.TrimPrefix(at.path, "."))
	}
	return out
}

// describeRole is how a problem names a role that is not one.
func describeRole(role string) string {
	return fmt.Sprintf("%q is not a role (none, read, triage, write, maintain, admin)", role)
}
