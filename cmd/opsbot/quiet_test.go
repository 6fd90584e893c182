package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
)

const triageLog, triageID = "triager", int64(5003)

var triager = user{Login: triageLog, ID: triageID, Kind: "User"}

// quietWorld is a world with Slack and a commenter with the triage role.
func quietWorld(t *testing.T, topExtra string) (*world, *slacktest.Fake) {
	t.Helper()
	sl := slacktest.New(t)
	w := newWorldWith(t, "slack:\n  api_url: \""+sl.URL+"\"\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n"+topExtra, "",
		map[string]string{"TEST_SLACK_TOKEN": "xoxb-test"})
	w.GH.AddUser(triageLog, triageID, "User")
	w.GH.SetRole(theRepo, triageLog, "triage")
	return w, sl
}

// An outsider (role below triage) who types a command gets a 👎 and nothing
// else: no reply on the PR, no Slack message. The audit still has the
// denial. A triage user's denial is still answered, on GitHub and in Slack.
func TestOutsiderDenialIsAReactionOnly(t *testing.T) {
	t.Parallel()
	w, sl := quietWorld(t, "")
	c := w.Comment(reader, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to an outsider's command = %v, want a 👎", r)
	}
	if r := w.Replies(); len(r) != 0 {
		t.Fatalf("opsbot replied to an outsider: %q", r)
	}
	if n := len(sl.Posts()); n != 0 {
		t.Fatalf("%d Slack messages about an outsider's command, want none: %+v", n, sl.Posts())
	}
	recs := w.audit()
	last := recs[len(recs)-1]
	if last["outcome"] != "denied" || last["actor_login"] != readerLog || !strings.Contains(last["reason"].(string), "not answered") {
		t.Fatalf("audit of the outsider's denial = %v", last)
	}

	c = w.Comment(triager, "/reuse-sweep-run 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to a triage user's command = %v", r)
	}
	mustContain(t, "triage denial", w.LastReply(), "@triager I did not run `/reuse-sweep-run 31147925932`", "needs the `write` role")
	posts := sl.Posts()
	if len(posts) != 2 || !strings.Contains(posts[1].Blocks, "I did not run") {
		t.Fatalf("Slack posts = %+v, want the thread parent and the denial", posts)
	}
}

// One user gets at most notices.max_replies_per_user_per_hour replies (20 by
// default) in an hour on a repository; past it opsbot only reacts, says so
// in the audit, and still answers other users.
func TestRepliesToOneUserAreLimited(t *testing.T) {
	t.Parallel()
	w, sl := quietWorld(t, "")
	for i := 1; i <= 20; i++ {
		w.Comment(triager, "/reuse-sweep-run 31147925932")
		if n := len(w.Replies()); n != i {
			t.Fatalf("after %d denials, %d replies", i, n)
		}
	}
	slackBefore := len(sl.Posts())
	c := w.Comment(triager, "/reuse-sweep-run 31147925932")
	if n := len(w.Replies()); n != 20 {
		t.Fatalf("the 21st denial in an hour got a reply (%d replies)", n)
	}
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"-1"}) {
		t.Fatalf("reactions to the 21st = %v, want a 👎", r)
	}
	if n := len(sl.Posts()); n != slackBefore {
		t.Fatalf("the 21st denial went to Slack (%d posts, was %d)", n, slackBefore)
	}
	if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"command reuse-sweep-run denied", "reply suppressed"}) {
		t.Fatalf("audit ends %v, want the denial and the suppressed reply", tr[len(tr)-2:])
	}
	// Other users are answered.
	w.Comment(maintainer, "/opsbot help")
	mustContain(t, "another user's reply", w.LastReply(), "@maintainer here is what opsbot does")
}

// The limit is configurable, and a command past it still works: a pin is
// taken, with a 👍 and no reply.
func TestReplyLimitIsConfigurable(t *testing.T) {
	t.Parallel()
	w, _ := quietWorld(t, "notices:\n  max_replies_per_user_per_hour: 2\n")
	w.Comment(maintainer, "/opsbot help")
	w.Comment(maintainer, "/opsbot help")
	c := w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	if n := len(w.Replies()); n != 2 {
		t.Fatalf("%d replies with a limit of 2", n)
	}
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"+1"}) {
		t.Fatalf("reactions to a pin past the limit = %v, want a 👍", r)
	}
	if tr := w.trail(); !slices.Equal(tr[len(tr)-3:], []string{"command reuse-sweep-run accepted", "pin active", "reply suppressed"}) {
		t.Fatalf("audit ends %v, want the pin taken and its reply suppressed", tr[len(tr)-3:])
	}
}

// An outsider whose permission cannot be checked does not make opsbot talk:
// a 404 for the login (a deleted or renamed account) is no role (👎); a
// 403, 429 or 5xx from GitHub gets a 😕, and the audit says the permission
// could not be checked. While the lookup fails, one permission read per
// user per minute is made, whatever the number of comments.
func TestOutsiderWhosePermissionCannotBeCheckedIsNotAnswered(t *testing.T) {
	t.Parallel()
	const perm = "GET /repos/{owner}/{repo}/collaborators/{user}/permission"
	for _, tc := range []struct {
		status   int
		reaction string
		audit    string
	}{
		{404, "-1", "not answered: " + "the commenter's role is below triage"},
		{403, "confused", "permission could not be checked"},
		{429, "confused", "permission could not be checked"},
		{502, "confused", "permission could not be checked"},
	} {
		w, sl := quietWorld(t, "")
		w.GH.Inject(perm, githubtest.Fault{Status: tc.status, Header: map[string]string{"Retry-After": "0"}})
		c := w.Comment(reader, "/reuse-sweep-run 31147925932")
		if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{tc.reaction}) {
			t.Errorf("status %d: reactions %v, want [%s]", tc.status, r, tc.reaction)
		}
		if r := w.Replies(); len(r) > 0 {
			t.Errorf("status %d: an outsider made opsbot post a comment: %q", tc.status, r)
		}
		if n := len(sl.Posts()); n != 0 {
			t.Errorf("status %d: %d Slack messages about an outsider's command", tc.status, n)
		}
		recs := w.audit()
		if last := recs[len(recs)-1]; !strings.Contains(fmt.Sprint(last["reason"]), tc.audit) {
			t.Errorf("status %d: audit %v, want its reason to say %q", tc.status, last, tc.audit)
		}
		if tc.status == 404 {
			continue
		}
		reads := w.GH.Count(perm)
		for i := 0; i < 3; i++ {
			w.Comment(reader, "/reuse-sweep-run 31147925932")
		}
		if n := w.GH.Count(perm) - reads; n != 0 {
			t.Errorf("status %d: 3 more comments within a minute of the failure made %d permission reads, want none", tc.status, n)
		}
	}
}

// Reactions to commenters below triage are limited per user and per
// repository in a rolling hour (notices.max_outsider_reactions_per_*);
// past them the audit alone records the commands.
func TestReactionsToOutsidersAreLimited(t *testing.T) {
	t.Parallel()
	const react = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	w, _ := quietWorld(t, "notices:\n  max_outsider_reactions_per_user_per_hour: 3\n  max_outsider_reactions_per_repo_per_hour: 4\n")
	before := w.GH.Count(react)
	for i := 0; i < 10; i++ {
		w.Comment(reader, "/reuse-sweep-run 31147925932")
	}
	if n := w.GH.Count(react) - before; n != 3 {
		t.Fatalf("10 outsider commands got %d reactions, want 3 (the per-user limit)", n)
	}
	recs := w.audit()
	last := recs[len(recs)-1]
	if last["kind"] != "reaction" || last["outcome"] != "suppressed" || !strings.Contains(fmt.Sprint(last["reason"]), "not reacting") {
		t.Fatalf("audit of a held reaction = %v", last)
	}
	w.GH.AddUser("drive-by", 6001, "User")
	w.GH.AddUser("drive-by-2", 6002, "User")
	w.Comment(user{Login: "drive-by", ID: 6001, Kind: "User"}, "/reuse-sweep-run 31147925932")
	w.Comment(user{Login: "drive-by-2", ID: 6002, Kind: "User"}, "/reuse-sweep-run 31147925932")
	if n := w.GH.Count(react) - before; n != 4 {
		t.Fatalf("with the repository's budget of 4: %d reactions in all, want 4", n)
	}
	// Those with triage or above are not counted: their denials are replies.
	w.Comment(triager, "/reuse-sweep-run 31147925932")
	if n := w.GH.Count(react) - before; n != 5 {
		t.Fatalf("a triage user's denial got no reaction once outsiders spent theirs (%d in all)", n)
	}
}
