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
	t.Parallel()
	w := newWorld(t, "")
	outsider := user{Login: "outsider", ID: 6666, Kind: "User"}
	w.GH.AddUser(outsider.Login, outsider.ID, "User")
	const route = "POST /repos/{owner}/{repo}/issues/comments/{id}/reactions"
	w.GH.Inject(route, githubtest.Fault{Status: 404, Body: `{"message":"Not Found"}`})
	w.Comment(outsider, "/reuse-sweep-run 31147925932")
	w.Settle()
	if n := w.GH.Count(route); n != 1 {
		t.Fatalf("%d reaction requests, want 1: a deleted comment's reaction is given up at once", n)
	}
	out, _, err := runCLI(t, tokenEnv, "audit", "--server", w.Srv.URL, "--failed-notices", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "failed notices", out, `"kind": "reaction"`, "not found")
}
