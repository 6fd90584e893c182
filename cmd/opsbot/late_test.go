package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// A command taken back (its comment deleted, or the command edited away)
// before its `created` webhook reached opsbot never runs when that webhook
// comes late: GitHub does not promise the order of deliveries, a `created`
// answered 503 comes again later, and an operator may redeliver it.
func TestLateCreatedAfterTheCommandWasTakenBack(t *testing.T) {
	t.Parallel()
	const cmd = "/reuse-sweep-run 31147925932"
	notRun := func(t *testing.T, w *world, why string) {
		t.Helper()
		if tr := w.trail(); slices.Contains(tr, "pin active") {
			t.Fatalf("a pin was taken from a command taken back: %v", tr)
		}
		found := false
		for _, r := range w.audit() {
			if r["kind"] == "command" && r["outcome"] == "not_run" && strings.Contains(r["reason"].(string), why) {
				found = true
			}
		}
		if !found {
			t.Fatalf("no audit record says the command was not run (%q): %v", why, w.trail())
		}
		w.Push("c2")
		if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "false" {
			t.Fatalf("the push after a taken-back command: %v, want the sweep", out)
		}
	}
	t.Run("deleted first", func(t *testing.T) {
		w := newWorld(t, "")
		c := w.GH.AddComment(theRepo, thePR, maintLog, cmd)
		w.GH.DeleteComment(c.ID)
		w.CommentEvent("deleted", maintainer, maintainer, c.ID, cmd, "")
		w.CommentEvent("created", maintainer, maintainer, c.ID, cmd, "")
		if r := w.GH.Reactions(c.ID); len(r) != 0 {
			t.Fatalf("reactions to the deleted comment: %v", r)
		}
		for _, r := range w.Replies() {
			if strings.Contains(r, "pinned run") {
				t.Fatalf("opsbot answered a deleted comment's command:\n%s", r)
			}
		}
		notRun(t, w, "deleted before opsbot processed its created webhook")
	})
	t.Run("edited away first", func(t *testing.T) {
		w := newWorld(t, "")
		c := w.GH.AddComment(theRepo, thePR, maintLog, cmd)
		w.GH.EditComment(c.ID, "never mind, the sweep is needed")
		w.CommentEvent("edited", maintainer, maintainer, c.ID, "never mind, the sweep is needed", cmd)
		w.CommentEvent("created", maintainer, maintainer, c.ID, cmd, "")
		notRun(t, w, "no longer holds this command")
	})
	t.Run("an edit seen first that GitHub shows was followed by a deletion", func(t *testing.T) {
		w := newWorld(t, "")
		c := w.GH.AddComment(theRepo, thePR, maintLog, cmd)
		w.CommentEvent("edited", maintainer, maintainer, c.ID, cmd+"\nthanks", cmd)
		w.GH.DeleteComment(c.ID)
		w.CommentEvent("created", maintainer, maintainer, c.ID, cmd, "")
		notRun(t, w, "edited and then deleted")
	})
	t.Run("an edit that kept the command runs it", func(t *testing.T) {
		w := newWorld(t, "")
		c := w.GH.AddComment(theRepo, thePR, maintLog, cmd)
		w.GH.EditComment(c.ID, cmd+"\nthanks!")
		w.CommentEvent("edited", maintainer, maintainer, c.ID, cmd+"\nthanks!", cmd)
		w.CommentEvent("created", maintainer, maintainer, c.ID, cmd, "")
		if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"+1"}) {
			t.Fatalf("reactions = %v, want +1", r)
		}
		w.Push("c2")
		if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "true" {
			t.Fatalf("the push after the kept command: %v, want a skip", out)
		}
	})
}

// Deleting a /stage-results comment before opsbot has sent its dispatch
// cancels the request: the staging side is never asked, and the
// acknowledgement says so. A request whose dispatch was already sent stays.
func TestDeletingAStageCommentCancelsItsDispatch(t *testing.T) {
	t.Parallel()
	stageAudit := func(w *world, outcome string, commentID int64) bool {
		for _, r := range w.audit() {
			if r["kind"] == "stage" && r["outcome"] == outcome && int64(r["comment_id"].(float64)) == commentID {
				return true
			}
		}
		return false
	}
	t.Run("before the dispatch is sent", func(t *testing.T) {
		w := stageWorld(t, "")
		// The first request's dispatch is slow: the second's waits behind it, unsent.
		w.GH.Inject("POST /repos/{owner}/{repo}/dispatches", githubtest.Fault{Delay: 3 * time.Second, Pass: true, Times: 1})
		first := w.GH.AddComment(theRepo, thePR, maintLog, "/stage-results 31147925932")
		postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, first.ID, first.Body, ""))
		second := w.GH.AddComment(theRepo, thePR, maintLog, "/stage-results")
		postNoSettle(t, w, "issue_comment", w.CommentPayload("created", maintainer, maintainer, second.ID, second.Body, ""))
		w.GH.DeleteComment(second.ID)
		w.CommentEvent("deleted", maintainer, maintainer, second.ID, second.Body, "")
		ds := w.GH.Dispatches()
		if len(ds) != 1 || ds[0].ClientPayload["comment-id"] != strconv.FormatInt(first.ID, 10) {
			t.Fatalf("dispatches = %+v, want only the first request's", ds)
		}
		if !stageAudit(w, "cancelled", second.ID) {
			t.Fatalf("audit: %v", w.trail())
		}
		found := false
		for _, r := range w.Replies() {
			found = found || strings.Contains(r, "was cancelled before the staging side was asked")
		}
		if !found {
			t.Fatalf("no acknowledgement says the request was cancelled:\n%s", strings.Join(w.Replies(), "\n---\n"))
		}
	})
	t.Run("after the dispatch was sent", func(t *testing.T) {
		w := stageWorld(t, "")
		c := w.Comment(maintainer, "/stage-results 31147925932")
		w.GH.DeleteComment(c.ID)
		w.CommentEvent("deleted", maintainer, maintainer, c.ID, c.Body, "")
		if !stageAudit(w, "not_cancelled", c.ID) {
			t.Fatalf("audit: %v", w.trail())
		}
		if ds := w.GH.Dispatches(); len(ds) != 1 {
			t.Fatalf("dispatches = %+v, want the one sent", ds)
		}
	})
}

// A collaborator below the command's role cannot revoke a maintainer's pin
// by deleting its comment or editing its command away (GitHub lets anyone
// with write access edit others' comments): the pin stays, the audit and
// the PR say so, and the next push reuses the run.
func TestLowerRoleCannotTakeBackAPin(t *testing.T) {
	t.Parallel()
	const cmd = "/reuse-sweep-run 31147925932"
	writer := user{Login: "writer", ID: 5003, Kind: "User"}
	for _, how := range []string{"deleted", "edited"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t, "    reuse:\n      min_role: maintain\n")
			w.GH.SetRole(theRepo, maintLog, "maintain")
			w.GH.AddUser(writer.Login, writer.ID, "User")
			w.GH.SetRole(theRepo, writer.Login, "write")
			c := w.Comment(maintainer, cmd)
			if how == "deleted" {
				w.GH.DeleteComment(c.ID)
				w.CommentEvent("deleted", maintainer, writer, c.ID, cmd, "")
			} else {
				w.GH.EditComment(c.ID, "no")
				w.CommentEvent("edited", maintainer, writer, c.ID, "no", cmd)
			}
			mustContain(t, "reply", w.LastReply(), "@writer", "the pin stays")
			kept := false
			for _, r := range w.audit() {
				kept = kept || (r["kind"] == "pin" && r["outcome"] == "kept")
			}
			if !kept {
				t.Fatalf("audit: %v", w.trail())
			}
			w.Push("c2")
			if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "true" {
				t.Fatalf("the push after a refused revocation: %v, want a skip", out)
			}
		})
	}
	t.Run("the author takes back their own pin", func(t *testing.T) {
		w := newWorld(t, "    reuse:\n      min_role: maintain\n")
		w.GH.SetRole(theRepo, maintLog, "maintain")
		c := w.Comment(maintainer, cmd)
		w.GH.DeleteComment(c.ID)
		w.CommentEvent("deleted", maintainer, maintainer, c.ID, cmd, "")
		w.Push("c2")
		if out, _ := w.gate("--pr", "2512", "--sha", sha("c2")); out["skip-pr-sweep"] != "false" {
			t.Fatalf("the push after the author deleted the pin's comment: %v, want the sweep", out)
		}
	})
}
