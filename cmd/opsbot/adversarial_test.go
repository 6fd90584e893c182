package main

import (
	"net/http"
	"strings"
	"testing"
)

// Edits whose bodies are 64 KiB built to make a Markdown parser do
// quadratic work (nested quotes, runs of "[a](", quote and list mixes; one
// such comment cost goldmark seconds, in the webhook request, twice per
// edit) are stored and answered 202 like any delivery, and read right: a
// command line after the noise keeps the pin, one only inside the noise
// (in a quote) is no command, and the edit that drops the real line
// revokes it.
func TestAdversarialEditsAreStoredAndReadRight(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	const line = "/reuse-sweep-run 31147925932"
	c := w.Comment(maintainer, "LGTM\n"+line)
	noise := []struct{ name, body string }{
		{"link openers", strings.Repeat("[a](", 16<<10)},
		{"brackets", strings.Repeat("[", 64<<10)},
		{"emphasis runs", strings.Repeat("*a_", 20<<10)},
	}
	old := c.Body
	for _, n := range noise {
		body := n.body + "\n\n" + line
		code := w.SendAs(w.ID(), "issue_comment", w.CommentPayload("edited", maintainer, maintainer, c.ID, body, old))
		if code != http.StatusAccepted {
			t.Fatalf("%s: answered %d, want 202 (stored)", n.name, code)
		}
		if tr := w.trail(); tr[len(tr)-1] != "pin active" {
			t.Fatalf("%s: an edit keeping the command changed the pin: %v", n.name, tr)
		}
		old = body
	}
	// Nested past commands.MaxNesting, the comment is read for no command:
	// the pin's line is gone from it as opsbot reads it.
	body := strings.Repeat("> ", 32<<10) + "\n\n" + line
	if code := w.SendAs(w.ID(), "issue_comment", w.CommentPayload("edited", maintainer, maintainer, c.ID, body, old)); code != http.StatusAccepted {
		t.Fatalf("answered %d, want 202", code)
	}
	mustContain(t, "edit reply", w.LastReply(), "is **revoked**", "edited away")
	w.Push("c2")
	if st := w.Statuses("c2"); st[0].Description != "sweep: no reuse authorization" {
		t.Fatalf("after the edit: %+v", st)
	}
}

// A comment from anyone nested thousands deep (list markers, then blank
// lines: seconds and gigabytes for a Markdown parser) is stored, read for
// no command in one linear pass, and holds up nothing after it.
func TestDeeplyNestedCommentIsReadForNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(reader, "/x\n"+strings.Repeat("- ", 20<<10)+"a"+strings.Repeat("\n", 20<<10)+"/reuse-sweep-run 31147925932\n")
	w.Comment(maintainer, strings.Repeat("- ", 3000)+"a\n"+strings.Repeat("\n", 6000)+"/reuse-sweep-run 31147925932\n")
	if tr := w.trail(); len(tr) != 0 {
		t.Fatalf("audit after deeply nested comments = %v, want nothing read", tr)
	}
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	mustContain(t, "the pin after them", w.LastReply(), "pinned run")
}
