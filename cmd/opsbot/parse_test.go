package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, stdin, want string
	}{
		{"example", "Verified.\n\n/reuse-sweep-run 31147925932\n\n/reuse-sweep-run\n/reuse-sweep-run cancel\n/stage-results 30337121602\n/opsbot help\n/use\n",
			`[{"line":3,"command":"reuse-sweep-run","run_id":31147925932},{"line":5,"command":"reuse-sweep-run"},` +
				`{"line":6,"command":"reuse-sweep-run","cancel":true},{"line":7,"command":"stage-results","run_id":30337121602},` +
				`{"line":8,"command":"help"},{"line":9,"command":"reuse-sweep-run","error":"usage: /use <run-id or run URL>"}]` + "\n"},
		{"none", "thanks!\n", "[]\n"},
		{"signoff fixture", fixtures.Comment(t, "signoff-mentions-commands-inline.md"), "[]\n"},
		{"run URL", "/use https://github.com/SemiAnalysisAI/InferenceX/actions/runs/31147925932/attempts/2",
			`[{"line":1,"command":"reuse-sweep-run","run_id":31147925932}]` + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"parse", "--repo", "SemiAnalysisAI/InferenceX"}, func(string) string { return "" },
				strings.NewReader(c.stdin), &out, &errb)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, errb.String())
			}
			if out.String() != c.want {
				t.Fatalf("stdout:\n got %s\nwant %s", out.String(), c.want)
			}
		})
	}
}

func TestParseCommandNeedsRepo(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"parse"}, func(string) string { return "" }, strings.NewReader("/use 1"), &out, &errb)
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errb.String(), "--repo OWNER/REPO is required") {
		t.Fatalf("parse without --repo: %v, stderr %q", err, errb.String())
	}
}

func TestUnknownCommandAndHelp(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"frobnicate"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown: %v %q", err, errb.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"help"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"serve", "parse", "config", "healthcheck"} {
		if !strings.Contains(out.String(), sub) {
			t.Errorf("help lacks %s", sub)
		}
	}
	errb.Reset()
	out.Reset()
	if err := run(t.Context(), []string{"parse", "--help"}, func(string) string { return "" }, strings.NewReader(""), &out, &errb); err != nil {
		t.Fatalf("parse --help: %v", err)
	}
	if !strings.Contains(out.String(), "Examples:") || errb.Len() != 0 {
		t.Errorf("parse --help has no examples on stdout: %q (stderr %q)", out.String(), errb.String())
	}
}
