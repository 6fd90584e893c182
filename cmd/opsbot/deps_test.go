package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The production binary links no test machinery and no load generator:
// the fake GitHub it shares with the tests (for `opsbot demo`) is plain
// net/http, and the load generator is cmd/opsbot-bench.
func TestBinaryLinksNoTestMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "net/http/httptest", "testing", "github.com/SemiAnalysisAI/opsbot/loadgen":
			t.Errorf("./cmd/opsbot links %s", pkg)
		}
	}
}
