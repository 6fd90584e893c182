package main

import (
	"strings"
	"testing"
)

// What a new maintainer trips on, small each: a subcommand misspelt is
// named; merge_group deliveries have their own metric label; with dry_run
// set, the log says Slack stays dry because of it, not for want of a token.
func TestSmallThingsANewMaintainerMeets(t *testing.T) {
	t.Parallel()
	_, errOut, err := runCLI(t, nil, "config", "chek", "--config", "opsbot.example.yaml")
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(errOut, `opsbot config: unknown subcommand "chek" (did you mean check?)`) {
		t.Fatalf("config chek: %v\n%s", err, errOut)
	}
	_, errOut, _ = runCLI(t, nil, "github", "app-craete")
	mustContain(t, "github app-craete", errOut, `unknown subcommand "app-craete" (did you mean app-create?)`)

	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml")
	ref := w.GH.MergeGroup(theRepo, thePR, sha("f1"), true)
	w.SendMergeGroup("checks_requested", "", sha("f1"), ref)
	if m := w.Metrics(); m[`opsbot_webhook_deliveries_total{event="merge_group",outcome="stored"}`] != "1" {
		t.Errorf("a merge_group delivery is not counted as merge_group: %v", m[`opsbot_webhook_deliveries_total{event="merge_group",outcome="stored"}`])
	}

	dry := newWorldOpts(t, worldOpts{Top: "dry_run: true\nslack:\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n",
		Env: map[string]string{"TEST_SLACK_TOKEN": "xoxb-test"}})
	mustContain(t, "the log of a dry run with a Slack token", dry.Srv.Stderr.String(),
		"Slack dry-run: messages are logged, not posted, because dry_run is set (its token is there: set dry_run: false to post)")
}
