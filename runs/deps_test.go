package runs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Run validation is pure: it reads GitHub through ghclient and links
// neither the store (bbolt) nor the outbox, whose GitHub sender lives in
// outbox/ghsend. A tool that only validates runs can be built without them.
func TestRunValidationLinksNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/SemiAnalysisAI/opsbot/state" || pkg == "github.com/SemiAnalysisAI/opsbot/outbox" || strings.HasPrefix(pkg, "github.com/SemiAnalysisAI/opsbot/outbox/") ||
			pkg == "go.etcd.io/bbolt" || strings.HasPrefix(pkg, "go.etcd.io/bbolt/") {
			t.Errorf("./runs links %s: run validation must not depend on the store or the outbox", pkg)
		}
	}
}
