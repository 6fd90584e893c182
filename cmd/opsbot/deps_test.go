package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The production binary links no test machinery and no load generator:
// the fake GitHub it shares with the tests (for `opsbot demo`) is plain
// net/http, and the load generator is cmd/opsbot-bench. The Kubernetes API
// types are for the test of deploy/kubernetes only.
func TestBinaryLinksNoTestMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") {
			t.Errorf("./cmd/opsbot links %s", pkg)
		}
		switch pkg {
		case "net/http/httptest", "testing", "github.com/SemiAnalysisAI/opsbot/loadgen":
			t.Errorf("./cmd/opsbot links %s", pkg)
		}
	}
}
