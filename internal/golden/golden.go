// Package golden compares texts people read with files under testdata/,
// and rewrites those files when tests run with -update:
//
//	go test ./... -update
//
// Every test package imports it, so the flag is defined in every test binary.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/ with the current output")

// Assert compares got with testdata/NAME, or writes it there under -update.
func Assert(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v (run go test -update to create it)", path, err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (run go test -update and review the diff)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
