package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
)

// The webhook events the README tells a maintainer to subscribe to are the
// ones opsbot's registered commands and kinds use (app.Events, which the
// App manifest and `opsbot github events` list too), by their names in
// GitHub's webhook settings and in its order: a kind that routes a new
// event changes the README's list, and no other. docs/credentials.md names
// none itself: it sends the reader to `opsbot github events`.
func TestWebhookEventListsAreTheRegistrys(t *testing.T) {
	evs, err := app.Events()
	if err != nil {
		t.Fatal(err)
	}
	var names, used []string
	for _, e := range evs {
		if e.Label == "" || e.Why == "" {
			t.Fatalf("opsbot uses the event %s without its name in GitHub's settings or its why: %+v", e.Name, e)
		}
		names, used = append(names, e.Label), append(used, e.Name)
	}
	if strings.Join(used, ",") != strings.Join(app.UsedEvents(), ",") {
		t.Fatalf("app.Events %v and app.UsedEvents %v differ", used, app.UsedEvents())
	}
	bold := regexp.MustCompile(`\*\*([A-Za-z ]+)\*\*`)
	readme := readDoc(t, "../README.md")
	_, after, ok := strings.Cut(readme, "which are these events:")
	if !ok {
		t.Fatal("the README's webhook step lost its list of events (\"which are these events:\")")
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
	para, _, _ := strings.Cut(after, "## ")
	if !strings.Contains(para, "`opsbot github events`") {
		t.Error("docs/credentials.md's webhook events do not send the reader to `opsbot github events`")
	}
	for _, e := range evs {
		if strings.Contains(para, "`"+e.Name+"`") || strings.Contains(para, "**"+e.Label+"**") {
			t.Errorf("docs/credentials.md lists the event %s by hand: a list there goes stale when a kind routes a new one", e.Name)
		}
	}
}
