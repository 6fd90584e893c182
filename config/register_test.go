package config_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/config"
)

// TestMain registers the commands' own sections, as the program does
// before it reads a configuration: the example configuration and the
// reference show them.
func TestMain(m *testing.M) {
	app.RegisterSections()
	os.Exit(m.Run())
}

type sectionWithRole struct {
	config.Access `yaml:",inline"`
}
type otherSection struct {
	Method string `yaml:"method"`
}
type behindPointer struct {
	Who *config.Access `yaml:"who"`
}
type inList struct {
	Rules []struct {
		Access config.Access `yaml:"access"`
	} `yaml:"rules"`
}
type inMap struct {
	Who map[string]config.Access `yaml:"who"`
}
type untagged struct {
	Access config.Access
}
type inlineMap struct {
	Extra map[string]string `yaml:",inline"`
}
type who config.Access
type namedAccess struct {
	Approvers who `yaml:"approvers"`
}

// A section the load could not hold to its rules is refused when opsbot
// starts: one that shares a key (one of the two would read its defaults,
// its role among them, whatever the file says), and one whose access rule
// the load could not default and check (a typo'd role would load).
func TestRegisterSectionRefusesWhatTheLoadCouldNotCheck(t *testing.T) {
	config.RegisterSection(config.Typed[sectionWithRole]{Key: "zz_first"}.Section())
	config.RegisterSection(config.Typed[sectionWithRole]{Key: "zz_first"}.Section()) // a second wiring: the same
	for _, c := range []struct {
		name string
		s    config.Section
		want string
	}{
		{"a key with another type", config.Typed[otherSection]{Key: "zz_first"}.Section(), "registered twice, with two types"},
		{"a repository's own key", config.Typed[otherSection]{Key: "reuse"}.Section(), "a field of a repository's configuration"},
		{"an access rule behind a pointer", config.Typed[behindPointer]{Key: "zz_p"}.Section(), "zz_p.who: an access rule behind a ptr"},
		{"access rules in a list", config.Typed[inList]{Key: "zz_l"}.Section(), "zz_l.rules: an access rule behind a slice"},
		{"access rules in a map", config.Typed[inMap]{Key: "zz_m"}.Section(), "zz_m.who: an access rule behind a map"},
		{"a field without a yaml tag", config.Typed[untagged]{Key: "zz_u"}.Section(), "zz_u.Access: needs a yaml tag"},
		{"an inline map", config.Typed[inlineMap]{Key: "zz_i"}.Section(), "an inline field must be a struct"},
		{"another owner, the same type", owned(config.Typed[sectionWithRole]{Key: "zz_first"}.Section(), "another-command"), `registered by "" and by "another-command"`},
		{"an access rule under another name", config.Typed[namedAccess]{Key: "zz_n"}.Section(), "zz_n.approvers: config_test.who has an access rule's fields but is not config.Access"},
	} {
		func() {
			defer func() {
				got := fmt.Sprint(recover())
				if !strings.Contains(got, c.want) {
					t.Errorf("%s: RegisterSection panicked with %q, want %q", c.name, got, c.want)
				}
			}()
			config.RegisterSection(c.s)
		}()
	}
	rc := mustParse(t, "repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/s.yml\n    zz_first: {min_role: admin}\n")
	if got := (config.Typed[sectionWithRole]{Key: "zz_first"}).Of(rc).MinRole; got != "admin" {
		t.Errorf("the registered section reads min_role %q, want the file's admin", got)
	}
}

func owned(s config.Section, owner string) config.Section {
	s.Owner = owner
	return s
}

func mustParse(t *testing.T, y string) *config.Repo {
	t.Helper()
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Repos[0]
}
