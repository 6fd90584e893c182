package commands_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Commands decide; the store keeps. No package under commands/ links the
// store (bbolt) or the outbox: a command reads and writes through
// state/record's interfaces, and its tests can run on a fake of them.
func TestCommandsLinkNoStore(t *testing.T) {
	pkgs, err := exec.Command("go", "list", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, pkgs)
	}
	if len(strings.Fields(string(pkgs))) < 4 {
		t.Fatalf("go list ./... found %q: want commands and its command packages", pkgs)
	}
	for _, p := range strings.Fields(string(pkgs)) {
		out, err := exec.Command("go", "list", "-deps", p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/SemiAnalysisAI/opsbot/state" || dep == "github.com/SemiAnalysisAI/opsbot/outbox" || strings.HasPrefix(dep, "github.com/SemiAnalysisAI/opsbot/outbox/") ||
				dep == "go.etcd.io/bbolt" || strings.HasPrefix(dep, "go.etcd.io/bbolt/") {
				t.Errorf("%s links %s: commands must not depend on the store or the outbox", p, dep)
			}
		}
	}
}
