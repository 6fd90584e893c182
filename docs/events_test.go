package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
)

// webhookNames are GitHub's names for the events in its webhook settings.
var webhookNames = map[string]string{
	"issue_comment": "Issue comments", "pull_request": "Pull requests", "repository_dispatch": "Repository dispatches",
	"check_suite": "Check suites", "check_run": "Check runs", "status": "Statuses", "workflow_run": "Workflow runs",
	"merge_group": "Merge groups", "pull_request_review": "Pull request reviews",
}

// The webhook events the README and docs/credentials.md tell a maintainer
// to subscribe to are the ones opsbot's registered commands and kinds use
// (app.UsedEvents, which the App manifest lists too), in its order: a
// kind that declares a new event changes the lists, not a hard-coded one.
func TestWebhookEventListsAreTheRegistrys(t *testing.T) {
	used := app.UsedEvents()
	var names []string
	for _, e := range used {
		n, ok := webhookNames[e]
		if !ok {
			t.Fatalf("opsbot uses the event %s: give it GitHub's name in webhookNames", e)
		}
		names = append(names, n)
	}
	bold := regexp.MustCompile(`\*\*([A-Za-z ]+)\*\*`)
	readme := readDoc(t, "../README.md")
	_, after, ok := strings.Cut(readme, "and these events:")
	if !ok {
		t.Fatal("the README's webhook step lost its list of events (\"and these events:\")")
	}
	list, _, _ := strings.Cut(strings.Join(strings.Fields(after), " "), "Every other event")
	var got []string
	for _, m := range bold.FindAllStringSubmatch(list, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("the README's webhook events are %q; opsbot uses %q", got, names)
	}

	creds := readDoc(t, "credentials.md")
	_, after, ok = strings.Cut(creds, "### Webhook events")
	if !ok {
		t.Fatal("docs/credentials.md lost its section Webhook events")
	}
	para, _, _ := strings.Cut(strings.Join(strings.Fields(after), " "), "Every other event")
	got = nil
	for _, m := range bold.FindAllStringSubmatch(para, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("docs/credentials.md's webhook events are %q; opsbot uses %q", got, names)
	}
	var codes []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(para, -1) {
		codes = append(codes, m[1])
	}
	if strings.Join(codes, ",") != strings.Join(used, ",") {
		t.Errorf("docs/credentials.md's webhook events are %q; opsbot uses %q", codes, used)
	}
}
