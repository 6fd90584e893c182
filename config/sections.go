package config

import "sync"

// Section is the part of a repository's configuration that one command
// owns (repos[].merge), declared beside its handler: Defaults fills in
// what the file left out, Check says what is wrong. The section's type is
// a field of Repo (YAML needs it there); its meaning is the command's.
type Section struct {
	// Key is the section's key under repos[], for the problems' paths.
	Key      string
	Defaults func(r *Repo)
	// Check reports each problem as the key under the section (such as
	// "method") and what is wrong with it.
	Check func(r *Repo) []SectionProblem
}

// SectionProblem is one thing wrong in a section.
type SectionProblem struct {
	Key, Message string
}

var (
	sectionsMu sync.Mutex
	sections   []Section
)

// RegisterSection adds a command's section: its defaults are applied and
// its checks made whenever a configuration is read. The server's wiring
// registers its commands' sections before it reads one.
func RegisterSection(s Section) {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	for _, have := range sections {
		if have.Key == s.Key {
			return // registered already (a test's second wiring)
		}
	}
	sections = append(sections, s)
}

func registered() []Section {
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	return append([]Section(nil), sections...)
}
