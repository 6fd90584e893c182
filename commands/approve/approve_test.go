package approve

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
)

func TestConfigSectionRefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		workflow string
		timeout  time.Duration
		want     string // "" for no problem
	}{
		{"", DefaultRunTimeout, ""},
		{".github/workflows/e2e-tests.yml", DefaultRunTimeout, ""},
		{".github/workflows/e2e.yaml", time.Hour, ""},
		{"e2e-tests.yml", DefaultRunTimeout, "is not a workflow file"},
		{".github/workflows/sub/e2e.yml", DefaultRunTimeout, "is not a workflow file"},
		{".github/workflows/.yml", DefaultRunTimeout, "is not a workflow file"},
		{".github/workflows/run-sweep.yml", DefaultRunTimeout, "is the sweep workflow"},
		{".github/workflows/e2e.yml", time.Minute, "out of range"},
		{".github/workflows/e2e.yml", 30 * 24 * time.Hour, "out of range"},
	} {
		r := &config.Repo{SweepWorkflow: ".github/workflows/run-sweep.yml", External: config.External{Workflow: tc.workflow, RunTimeout: tc.timeout}}
		var got []string
		for _, p := range ConfigSection.Check(r) {
			got = append(got, p.Key+": "+p.Message)
		}
		joined := strings.Join(got, "; ")
		if (tc.want == "") != (len(got) == 0) || !strings.Contains(joined, tc.want) {
			t.Errorf("workflow %q timeout %v: problems %q; want %q", tc.workflow, tc.timeout, joined, tc.want)
		}
	}
}

func TestHeadArgument(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		sha    string
		cancel bool
		bad    string
	}{
		{[]string{"ABCDEF0"}, "abcdef0", false, ""},
		{[]string{strings.Repeat("a", 40)}, strings.Repeat("a", 40), false, ""},
		{[]string{"cancel"}, "", true, ""},
		{[]string{"abcdef"}, "", false, "not a commit SHA"},
		{[]string{strings.Repeat("a", 41)}, "", false, "not a commit SHA"},
		{[]string{"abcdefg"}, "", false, "not a commit SHA"},
		{nil, "", false, "takes one argument"},
		{[]string{"abcdef0", "x"}, "", false, "takes one argument"},
	} {
		c := commands.Command{Verb: "/approve-sweep"}
		reason := headOrCancel(&c, tc.args, commands.Options{})
		got := ""
		if len(c.Args) == 1 {
			got = c.Args[0]
		}
		if (tc.bad == "") != (reason == "") || !strings.Contains(reason, tc.bad) || got != tc.sha || c.Cancel != tc.cancel {
			t.Errorf("%q: sha %q cancel %v reason %q; want %q %v %q", tc.args, got, c.Cancel, reason, tc.sha, tc.cancel, tc.bad)
		}
	}
}
