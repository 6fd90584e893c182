package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/state"
)

// The commands that read a database file (--db PATH) refuse a path with no
// file, naming it, and create nothing there or at --out.
func TestDBCommandsRefuseAMissingFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args func(db, out string) []string
	}{
		{"backup", func(db, out string) []string { return []string{"backup", "--db", db, "--out", out} }},
		{"audit", func(db, _ string) []string { return []string{"audit", "--db", db} }},
		{"audit --dead-letters", func(db, _ string) []string { return []string{"audit", "--db", db, "--dead-letters"} }},
		{"audit --failed-notices", func(db, _ string) []string { return []string{"audit", "--db", db, "--failed-notices"} }},
		{"audit --sha", func(db, _ string) []string { return []string{"audit", "--db", db, "--sha", "c2c2c2c"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db, out := filepath.Join(dir, "opsbot-typo.db"), filepath.Join(dir, "copy.db")
			stdout, _, err := runCLI(t, nil, tc.args(db, out)...)
			if err == nil {
				t.Fatalf("%s of a missing file succeeded:\n%s", tc.name, stdout)
			}
			var code exitCode
			if errors.As(err, &code) {
				t.Fatalf("error = exit status %d, want an error message (exit 1)", code)
			}
			if !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "no database file") {
				t.Fatalf("error = %q, want it to name %s and say there is no database file", err, db)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 0 {
				t.Fatalf("files left in the directory: %v", left)
			}
		})
	}
}

// Reading a database, for the audit or a backup, leaves the file as it was.
func TestDBCommandsOpenReadOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "opsbot.db")
	st, err := state.Open(db, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for i, args := range [][]string{
		{"audit", "--db", db},
		{"audit", "--db", db, "--dead-letters"},
		{"audit", "--db", db, "--failed-notices"},
		{"backup", "--db", db, "--out", filepath.Join(dir, "copy.db")},
	} {
		if _, errOut, err := runCLI(t, nil, args...); err != nil {
			t.Fatalf("%v: %v %s", args, err, errOut)
		}
		after, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("step %d, %v, wrote to the database it read", i, args)
		}
	}
}
