package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/config"
)

// Every section that says who may run a command, opsbot's own fields and
// the commands' own sections alike (a section added later included, since
// the walk finds them by their type), refuses a role that is no role at
// load, naming the key: a typo'd min_role never loads as a rank below
// everyone's, which would let a reader run the command.
func TestEverySectionRefusesATypodRole(t *testing.T) {
	t.Parallel()
	keys := config.AccessKeys()
	for _, want := range []string{"reuse", "stage", "merge", "external", "help"} {
		found := false
		for _, k := range keys {
			found = found || k == want
		}
		if !found {
			t.Fatalf("config.AccessKeys() = %v lacks %s", keys, want)
		}
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			yaml := "    " + strings.ReplaceAll(key, ".", ":\n      ") + ":\n" + strings.Repeat("  ", strings.Count(key, ".")+3) + "min_role: wrtie\n"
			path := writeConfig(t, dir, "")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg := strings.Replace(string(raw), "  - name: \"octo-org/octo-repo\"", yaml+"  - name: \"octo-org/octo-repo\"", 1)
			if err := os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = config.LoadFileOnly(filepath.Join(dir, "typo.yaml"))
			if err == nil || !strings.Contains(err.Error(), "repos[0]."+key+".min_role: \"wrtie\" is not a role") {
				t.Fatalf("a config with %s.min_role: wrtie loaded: %v", key, err)
			}
		})
	}
}

// repos[].merge is the merge command's own section: its defaults (only a
// maintainer merges) and its checks come from its package, applied
// wherever a configuration is read.
func TestMergeSectionIsTheCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeConfig(t, dir, "    merge:\n      method: fast-forward\n      checks_timeout: 10s\n      link_repo: \"https://github.com/o/r\"\n")
	out, errOut, err := runCLI(t, nil, "config", "check", "--config", path, "--no-env")
	if err == nil {
		t.Fatal("config check took merge.method fast-forward")
	}
	mustContain(t, "config check", out+errOut, `repos[1].merge.method: "fast-forward" is not a merge method (squash, merge or rebase)`,
		"repos[1].merge.checks_timeout: 10s is out of range", `repos[1].merge.link_repo: "https://github.com/o/r" is not OWNER/REPO`)

	w := newWorld(t, "")
	w.Comment(maintainer, "/merge-with-reuse 31147925932") // write, not maintain
	mustContain(t, "reply", w.LastReply(), "this command needs the `maintain` role on the repository or above")
}
