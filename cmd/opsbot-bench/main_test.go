package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/golden"
)

// --help is the usage on stdout, exit 0; the text is a golden file
// (go test ./cmd/opsbot-bench -update rewrites it).
func TestHelp(t *testing.T) {
	var out, errOut strings.Builder
	if err := run(context.Background(), []string{"--help"}, &out, &errOut); err != nil {
		t.Fatalf("--help: %v", err)
	}
	if errOut.Len() != 0 {
		t.Errorf("--help wrote to stderr: %s", errOut.String())
	}
	golden.Assert(t, "help.txt", "$ opsbot-bench --help\n"+out.String())
}

func TestBadFlagExits2(t *testing.T) {
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"--bogus"}, &out, &errOut)
	var code exitCode
	if !errors.As(err, &code) || code != 2 {
		t.Fatalf("err = %v, want exit status 2", err)
	}
	if !strings.Contains(errOut.String(), "-bogus") || !strings.Contains(errOut.String(), "Usage: opsbot-bench") {
		t.Errorf("stderr = %q, want the bad flag and the usage", errOut.String())
	}
}

func TestMissingServerBinarySaysHowToBuildIt(t *testing.T) {
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"--opsbot", t.TempDir() + "/no-such-opsbot", "--scenario", "ingest"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "go build -o opsbot ./cmd/opsbot") {
		t.Fatalf("err = %v, want one that says how to build the server", err)
	}
}
