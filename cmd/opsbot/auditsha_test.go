package main

import (
	"strings"
	"testing"
)

// `opsbot audit --sha` takes the short SHA the table, the page and every PR
// comment show (7 or more hex characters), through the server and from the
// file; a prefix of two commits is an error listing both.
func TestAuditByShortSHA(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2")
	full, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", sha("c2"), "--format", "csv")
	if err != nil || len(strings.Split(strings.TrimSpace(full), "\n")) < 2 {
		t.Fatalf("audit by the full SHA: %v\n%s", err, full)
	}
	short, errOut, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", "c2c2c2c", "--format", "csv")
	if err != nil || short != full {
		t.Fatalf("audit --sha c2c2c2c: %v %s\n%s\nwant what the full SHA gives:\n%s", err, errOut, short, full)
	}
	if upper, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", "C2C2C2C", "--format", "csv"); err != nil || upper != full {
		t.Fatalf("audit --sha C2C2C2C: %v\n%s", err, upper)
	}
	// Another head beginning with the same seven characters.
	w.Push("c2c2c2c9")
	_, _, err = runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", "c2c2c2c")
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), sha("c2")) ||
		!strings.Contains(err.Error(), sha("c2c2c2c9")) {
		t.Fatalf("audit of an ambiguous prefix through the server: %v", err)
	}
	if got, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", "c2c2c2c2", "--format", "csv"); err != nil || got != full {
		t.Fatalf("audit --sha c2c2c2c2: %v\n%s", err, got)
	}
	for _, bad := range []string{"c2c2c2", "c2c2c2g", "HEAD"} {
		_, errOut, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--sha", bad)
		if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errOut, "at least its first 7 hex characters") {
			t.Fatalf("audit --sha %s: %v %s", bad, err, errOut)
		}
	}
	w.Srv.Stop(t)
	offline, _, err := runCLI(t, nil, "audit", "--db", w.Srv.DB, "--sha", "c2c2c2c2", "--format", "csv")
	if err != nil || offline != full {
		t.Fatalf("audit --db --sha c2c2c2c2: %v\n%s", err, offline)
	}
	_, _, err = runCLI(t, nil, "audit", "--db", w.Srv.DB, "--sha", "c2c2c2c")
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), sha("c2c2c2c9")) {
		t.Fatalf("audit of an ambiguous prefix from the file: %v", err)
	}
}
