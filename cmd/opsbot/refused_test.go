package main

import (
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// A reaction to a comment its author deleted before opsbot's 👎 landed is
// given up at the first 404 (a deleted comment does not come back): one
// request, not five spent from the installation's budget, and it is listed
// among the failed notices.
func TestReactionToADeletedCommentIsGivenUpAtOnce(t *testing.T) {
	w := newWorld(t, "")
	outsider := user{"outsider", 6666, "User"}
	w.gh.AddUser(outsider.login, outsider.id, "User")
	const route = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	w.gh.Inject(route, githubtest.Fault{Status: 404, Body: `{"message":"Not Found"}`})
	w.comment(outsider, "/reuse-sweep-run 31147925932")
	w.settle()
	if n := w.gh.Count(route); n != 1 {
		t.Fatalf("%d reaction requests, want 1: a deleted comment's reaction is given up at once", n)
	}
	out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.srv.URL, "--failed-notices", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "failed notices", out, `"kind": "reaction"`, "not found")
}
