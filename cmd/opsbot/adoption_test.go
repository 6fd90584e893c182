package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"opsbot/auth"
)

// GitHub's default webhook content type is a form whose payload field holds
// the JSON. opsbot checks the signature over the raw form body, then reads
// the payload: a pin sent that way is answered like one sent as JSON.
func TestFormEncodedWebhookIsAccepted(t *testing.T) {
	w := newWorld(t, "")
	c := w.gh.AddComment(theRepo, thePR, maintLog, "/reuse-sweep-run 31147925932")
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/2512"})
	setPath(p, "comment.id", c.ID)
	setPath(p, "comment.body", c.Body)
	setPath(p, "comment.user", maintainer.json())
	p["sender"] = maintainer.json()
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	form := []byte(url.Values{"payload": {string(js)}}.Encode())

	send := func(id string, signed []byte) int {
		req, err := http.NewRequest(http.MethodPost, w.srv.URL+"/webhook", strings.NewReader(string(form)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", auth.Sign(signed, testSecret))
		code, _ := post(t, req)
		return code
	}
	// A signature over the JSON inside, not the bytes sent, is refused.
	if code := send("form-bad-signature", js); code != http.StatusUnauthorized {
		t.Fatalf("signature over the inner JSON: status %d, want 401", code)
	}
	if code := send("form-1", form); code != http.StatusAccepted {
		t.Fatalf("form-encoded delivery: status %d, want 202", code)
	}
	w.settle()
	mustContain(t, "pin reply", w.lastReply(), "@maintainer pinned run [31147925932]")
}
