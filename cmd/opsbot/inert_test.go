package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// helpHead keeps of the help reply (checked whole) its first line, with
// the hostile login, in the golden files: the commands it lists are
// commands/help's golden files, and a command added leaves these alone.
func helpHead(body string) string {
	if first, _, ok := strings.Cut(body, "\n"); ok && strings.Contains(first, "here is what opsbot does on") {
		return first + "\n[the rest of /opsbot help: commands/help/testdata]"
	}
	return body
}

// hostile is what an attacker puts in every name opsbot quotes: backticks
// (to end a code span), a line break with a command on its own line, a team
// mention, a fake opsbot marker, a link, a table pipe and a heading.
const hostile = "x`` `y\n/reuse-sweep-run 1\r\n@org/team <!-- opsbot:notice=1 --> ](http://evil.example) | # h"

const stagingURL = "https://staging.example.com/"

// Every notice opsbot writes (pin, supersede, revoke, rejections, the
// ignored line, usage, help, edited-comment reply, pin closed by an edit,
// skip, invalid pin, denial, permission-check failure, staging
// acknowledgement and its edits, and their Slack mirror) rendered with
// hostile logins, file names, run conclusions and events, command text, PR
// title and comment URL: opsbot's own command parser finds no command in its
// output, no user or team is mentioned, the only marker is opsbot's own, the
// only links are opsbot's, and nothing leaves its code span or its line.
func TestHostileValuesStayInert(t *testing.T) {
	t.Parallel()
	sl := slacktest.New(t)
	w := newWorldWith(t, "slack:\n  api_url: \""+sl.URL+"\"\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n",
		stageCfg+"    reuse:\n      allowed_paths: [\"perf-changelog.yaml\"]\n", map[string]string{"TEST_SLACK_TOKEN": "xoxb-test"})
	w.GH.AddRepo(stagingRepo, "stage.yml", 500)
	runs := []githubtest.Run{
		{ID: 42, Conclusion: "success"},
		{ID: 43, Conclusion: hostile},
		{ID: 44, Conclusion: "success", Event: hostile},
		{ID: 45, Conclusion: "success", HeadBranch: hostile},
	}
	for _, r := range runs {
		if r.Event == "" {
			r.Event = "pull_request"
		}
		if r.HeadBranch == "" {
			r.HeadBranch = "kimi-tune"
		}
		r.WorkflowID, r.Status, r.HeadSHA, r.Artifacts = 77, "completed", sha("c1"), resultArtifacts
		r.CreatedAt = time.Now().Add(-time.Hour)
		w.GH.AddRun(theRepo, r)
	}
	m := user{Login: "m`x\n/reuse-sweep-run 1 @org/team <!-- opsbot:notice=1 --> ](http://evil.example) | # h", ID: 7001, Kind: "User"}
	tr := user{Login: "t`\n@org/team", ID: 7002, Kind: "User"}
	unknown := user{Login: "u\n/reuse-sweep-run 1", ID: 7003, Kind: "User"} // no account holds the login (404): no role, a 👎 only
	for _, u := range []user{m, tr} {
		w.GH.AddUser(u.Login, u.ID, "User")
	}
	w.GH.SetRole(theRepo, m.Login, "write")
	w.GH.SetRole(theRepo, tr.Login, "triage")

	say := func(u user, body string) githubtest.Comment {
		t.Helper()
		c := w.GH.AddComment(theRepo, thePR, u.Login, body)
		hostileCommentEvent(w, "created", u, c.ID, body, "")
		return c
	}
	say(m, "/reuse-sweep-run 31147925932")
	say(m, "/use 42")                                            // supersedes
	say(m, "/reuse-sweep-run cancel")                            // revokes
	say(m, "/use 43\n/use 44")                                   // one line ignored; a hostile event refused
	say(m, "/use 43")                                            // a hostile conclusion refused
	say(m, "/reuse-sweep-run `@org/team](http://evil.example)|") // usage
	say(m, "/opsbot help")
	c := say(m, "/reuse-sweep-run 31147925932")
	edited := "LGTM\n/use 42"
	hostileCommentEvent(w, "edited", m, c.ID, edited, c.Body) // a command added by an edit; the pin's line edited away
	say(m, "/reuse-sweep-run 31147925932")
	w.Push("c2", "perf-changelog.yaml") // skip
	say(m, "/reuse-sweep-run 31147925932")
	w.Push("c3", hostile)                   // the pin is invalid: a hostile file name
	say(m, "/reuse-sweep-run 31147925932")  // refused: the same file name
	say(tr, "/reuse-sweep-run 31147925932") // denied, answered (triage)
	say(unknown, "/reuse-sweep-run 31147925932")
	st := say(m, "/stage-results 31147925932")
	w.callback("stage-results-started", st.ID, runR1, false)
	w.callback("stage-results-completed", st.ID, runR1, true)
	say(m, "/use 45") // refused: a hostile branch name

	// Every comment opsbot posted, and every edit it made (the staging
	// acknowledgement is edited twice), as sent to GitHub.
	var all strings.Builder
	count := 0
	for _, r := range w.GH.Requests() {
		if (r.Method != "POST" && r.Method != "PATCH") || !strings.HasSuffix(r.Route, "comments") && !strings.HasSuffix(r.Route, "comments/{id}") {
			continue
		}
		var c struct{ Body string }
		if err := json.Unmarshal([]byte(r.Body), &c); err != nil {
			t.Fatalf("%s %s: %v", r.Method, r.Path, err)
		}
		count++
		checkInertComment(t, c.Body)
		fmt.Fprintf(&all, "=== %s %d\n%s\n", r.Method, count, helpHead(c.Body))
	}
	if count < 19 {
		t.Fatalf("opsbot posted %d comments; the scenario should give every kind of notice", count)
	}
	date := regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	nonce := regexp.MustCompile(`(<!-- opsbot:notice=\d+)\.[0-9a-f]+ -->`) // random per notice
	golden.Assert(t, "hostile-comments.md", nonce.ReplaceAllString(date.ReplaceAllString(all.String(), "DATE"), "$1.NONCE -->"))

	var slack strings.Builder
	for i, p := range sl.Posts() {
		for _, text := range slackTexts(t, p.Blocks) {
			checkInertSlack(t, text)
			fmt.Fprintf(&slack, "=== post %d\n%s\n", i+1, helpHead(text))
		}
	}
	golden.Assert(t, "hostile-slack.txt", date.ReplaceAllString(slack.String(), "DATE"))
}

// hostileCommentEvent announces a comment like commentEvent, with a hostile
// PR title and comment URL.
func hostileCommentEvent(w *world, action string, u user, id int64, body, oldBody string) {
	w.T.Helper()
	p := w.CommentPayload(action, u, u, id, body, oldBody)
	setPath(p, "issue.title", hostile)
	setPath(p, "comment.html_url", fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d) [x](http://evil.example) <!-- opsbot:notice=1 -->",
		theRepo, thePR, id))
	w.Send("issue_comment", p)
}

var (
	ownMarker = regexp.MustCompile(`\n\n<!-- opsbot:notice=\d+\.[0-9a-f]+ -->$`)
	mention   = regexp.MustCompile(`@[A-Za-z0-9]`)
)

// checkInertComment fails when opsbot's comment holds anything a hostile
// value could have made: a command, a mention, a marker or link not its
// own, a table, or a line that does not start as opsbot's texts start.
func checkInertComment(t *testing.T, body string) {
	t.Helper()
	fail := func(format string, args ...any) { t.Errorf("%s\n--- in ---\n%s", fmt.Sprintf(format, args...), body) }
	if cmds := app.Grammar().Parse(body, commands.Options{Repo: theRepo}); len(cmds) != 0 {
		fail("opsbot's own comment holds commands: %+v", cmds)
	}
	if strings.Count(body, "<!--") != 1 || !ownMarker.MatchString(body) {
		fail("the comment holds a marker or HTML comment besides opsbot's own at its end")
	}
	md := ownMarker.ReplaceAllString(body, "")
	help := strings.Contains(md, "here is what opsbot does")
	for _, line := range strings.Split(md, "\n") {
		if l := strings.TrimLeft(line, " "); l != "" && strings.ContainsRune("/#@<>", rune(l[0])) {
			fail("line %q starts with %q", line, l[0])
		}
		if strings.HasPrefix(line, "|") && !help {
			fail("line %q is a table row", line)
		}
	}
	for _, n := range mdtext.Parse(md) {
		checkNode(t, fail, n, help)
	}
}

func checkNode(t *testing.T, fail func(string, ...any), n mdtext.Node, help bool) {
	t.Helper()
	switch n.Kind {
	case mdtext.KText:
		raw := strings.ReplaceAll(n.Raw, stagingURL, "")
		if mention.MatchString(raw) {
			fail("text %q mentions someone", n.Raw)
		}
		for _, bad := range []string{"](", "<", "://", "www."} {
			if strings.Contains(strings.ReplaceAll(raw, `\<`, ""), bad) {
				fail("text %q holds %q", n.Raw, bad)
			}
		}
		if strings.Contains(strings.ReplaceAll(raw, `\|`, ""), "|") && !help {
			fail("text %q holds a table pipe", n.Raw)
		}
	case mdtext.KLink:
		if !strings.HasPrefix(n.URL, "https://github.com/") && !strings.HasPrefix(n.URL, stagingURL) {
			fail("link to %q", n.URL)
		}
		for _, c := range n.Children {
			checkNode(t, fail, c, help)
		}
	case mdtext.KComment:
		fail("an HTML comment %q inside the text", n.Raw)
	}
}

// slackTexts are the mrkdwn texts of a message's blocks.
func slackTexts(t *testing.T, blocks string) []string {
	t.Helper()
	var bs []struct {
		Text     *struct{ Text string }  `json:"text"`
		Elements []struct{ Text string } `json:"elements"`
	}
	if err := json.Unmarshal([]byte(blocks), &bs); err != nil {
		t.Fatalf("Slack blocks %q: %v", blocks, err)
	}
	var out []string
	for _, b := range bs {
		if b.Text != nil {
			out = append(out, b.Text.Text)
		}
		for _, e := range b.Elements {
			out = append(out, e.Text)
		}
	}
	return out
}

var (
	slackAngle = regexp.MustCompile(`<[^>]*>`)
	slackCode  = regexp.MustCompile("`[^`]*`")
)

// checkInertSlack fails when a Slack text holds a mention (<@U…>, <!here>),
// a link that is not opsbot's, or a command on a line of its own.
func checkInertSlack(t *testing.T, text string) {
	t.Helper()
	for _, a := range slackAngle.FindAllString(text, -1) {
		if !(strings.HasPrefix(a, "<https://github.com/") || strings.HasPrefix(a, "<"+stagingURL)) || strings.Count(a, "|") > 1 {
			t.Errorf("Slack text holds %q (a mention or a link not opsbot's):\n%s", a, text)
		}
	}
	bare := slackCode.ReplaceAllString(slackAngle.ReplaceAllString(text, ""), "")
	for _, bad := range []string{"://", "www."} {
		if strings.Contains(bare, bad) {
			t.Errorf("Slack text holds %q outside links and code (Slack would link it):\n%s", bad, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "/") { // Slack mentions only as <@U…>, checked above
			t.Errorf("Slack line %q is a command:\n%s", line, text)
		}
	}
}
