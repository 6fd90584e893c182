package main

import (
	"fmt"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

const (
	stagingRepo = e2e.StagingRepo
	stageCfg    = e2e.StageConfig
)

func stageWorld(t *testing.T, extra string) *world {
	w := newWorld(t, stageCfg+extra)
	w.GH.AddRepo(stagingRepo, "stage.yml", 500)
	return w
}

// callback sends the staging side's report for a request comment.
func (w *world) callback(action string, commentID, runID int64, succeeded bool) {
	w.T.Helper()
	p := payload(w.T, "repository_dispatch", "")
	p["action"] = action
	setPath(p, "repository.full_name", theRepo)
	p["client_payload"] = map[string]any{"comment-id": strconv.FormatInt(commentID, 10), "run-id": strconv.FormatInt(runID, 10),
		"pr-number": strconv.Itoa(thePR), "stage-succeeded": succeeded, "app-run-id": "777",
		"request-token": w.requestToken(commentID)}
	w.Send("repository_dispatch", p)
}

// requestToken is the token opsbot sent the staging side for the request of
// a comment (the staging side echoes it in its reports); "" if none was sent.
func (w *world) requestToken(commentID int64) string {
	for _, d := range slices.Backward(w.GH.Dispatches()) {
		if d.ClientPayload["comment-id"] == strconv.FormatInt(commentID, 10) {
			tok, _ := d.ClientPayload["request-token"].(string)
			return tok
		}
	}
	return ""
}

func (w *world) ack() string {
	w.T.Helper()
	for _, r := range w.Replies() {
		if strings.Contains(r, "stag") {
			return r
		}
	}
	w.T.Fatal("no staging acknowledgement")
	return ""
}

func TestStageResultsEndToEnd(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	date := time.Now().Add(-2 * time.Hour).UTC().Format("2006-01-02")
	c := w.Comment(maintainer, "/stage-results 31147925932")
	if r := w.GH.Reactions(c.ID); !slices.Equal(r, []string{"+1"}) {
		t.Fatalf("reactions = %v", r)
	}
	mustContain(t, "acknowledgement", w.ack(), "@maintainer staging run [31147925932]", "`success`", "commit `c1c1c1c`", date, "<!-- opsbot:notice=")
	ds := w.GH.Dispatches()
	if len(ds) != 1 || ds[0].Repo != stagingRepo || ds[0].EventType != "stage-results" {
		t.Fatalf("dispatches = %+v", ds)
	}
	want := map[string]any{"source-repository": theRepo, "pr-number": "2512", "run-id": "31147925932", "run-attempt": "1",
		"run-date": date, "requested-by": "maintainer", "comment-id": strconv.FormatInt(c.ID, 10)}
	for k, v := range want {
		if ds[0].ClientPayload[k] != v {
			t.Errorf("client_payload[%s] = %v, want %v", k, ds[0].ClientPayload[k], v)
		}
	}
	if tok, _ := ds[0].ClientPayload["request-token"].(string); len(tok) < 20 {
		t.Errorf("client_payload[request-token] = %q, want a random token", tok)
	}
	w.callback("stage-results-started", c.ID, runR1, false)
	mustContain(t, "edited acknowledgement", w.ack(), "staging in progress")
	w.callback("stage-results-completed", c.ID, runR1, true)
	url := fmt.Sprintf("https://staging.example.com/inference?i_dates=%s~r31147925932", date)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]", url)
	if n := len(w.Replies()); n != 1 {
		t.Fatalf("%d replies: the acknowledgement is edited in place, not reposted", n)
	}
	wantTrail := []string{"command stage-results accepted", "stage requested", "callback started", "callback staged"}
	if got := w.trail(); !slices.Equal(got, wantTrail) {
		t.Fatalf("audit = %v, want %v", got, wantTrail)
	}
	// Asking again for a staged run answers at once, with the URL.
	w.Comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "repeat", w.LastReply(), "run 31147925932 is already staged: [`"+url+"`]("+url+")")
	if len(w.GH.Dispatches()) != 1 {
		t.Fatal("a staged run was dispatched again")
	}
}

func TestStageBareAndRefusals(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	w.GH.AddRun(theRepo, githubtest.Run{ID: 55, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "failure",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: []githubtest.Artifact{{Name: "results_bmk"}, {Name: "changelog-metadata"}},
		CreatedAt: time.Now().Add(-time.Hour)})
	w.GH.AddRun(theRepo, githubtest.Run{ID: 56, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: []githubtest.Artifact{{Name: "results_bmk"}}})
	w.Comment(maintainer, "/stage-results")
	mustContain(t, "bare", w.ack(), "staging run [55]", "`failure`") // the newest stageable run; failure is allowed
	w.Comment(maintainer, "/stage-results 56")
	mustContain(t, "no changelog", w.LastReply(), "I did not stage run 56", "no unexpired `changelog-metadata` artifact")
	w.GH.SetRole(theRepo, readerLog, "triage") // below triage gets a reaction only
	w.Comment(reader, "/stage-results 55")
	mustContain(t, "denied", w.LastReply(), "needs the `write` role")
	w.Comment(maintainer, "/stage-results 999")
	mustContain(t, "missing run", w.LastReply(), "run 999 was not found")

	plain := newWorld(t, "")
	plain.Comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "not configured", plain.LastReply(), "staging is not configured")
}

func TestStageCallbacks(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	c := w.Comment(maintainer, "/stage-results 31147925932")
	before := w.ack()
	w.callback("stage-results-completed", 123456, runR1, true) // no such request
	w.callback("stage-results-completed", c.ID, 42, true)      // wrong run
	if w.ack() != before {
		t.Fatal("an unmatched callback edited the acknowledgement")
	}
	if tr := w.trail(); !slices.Equal(tr[len(tr)-2:], []string{"callback refused", "callback refused"}) {
		t.Fatalf("audit = %v", tr)
	}
	w.callback("stage-results-completed", c.ID, runR1, false)
	mustContain(t, "failed", w.ack(), "staging run [31147925932]", "failed", "staging run](https://github.com/"+stagingRepo+"/actions/runs/777)")
}

func TestStageSharedSlot(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	w.GH.AddUser("other", 7000, "User")
	w.GH.AddPR(theRepo, 3000, "other", "other-branch", sha("b0"), []string{sha("e1")})
	w.GH.AddRun(theRepo, githubtest.Run{ID: 900, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("e1"), HeadBranch: "other-branch", Artifacts: resultArtifacts})
	first := w.Comment(maintainer, "/stage-results 31147925932")
	w.callback("stage-results-completed", first.ID, runR1, true)

	// PR 3000 asks; its run takes the shared slot; PR 2512 is told.
	c2 := w.GH.AddComment(theRepo, 3000, maintLog, "/stage-results 900")
	p := payload(t, "issue_comment", "created")
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", 3000)
	setPath(p, "issue.pull_request", map[string]any{"url": "x"})
	setPath(p, "comment.id", c2.ID)
	setPath(p, "comment.body", c2.Body)
	setPath(p, "comment.user", maintainer.JSON())
	p["sender"] = maintainer.JSON()
	w.Send("issue_comment", p)
	cb := payload(t, "repository_dispatch", "")
	cb["action"] = "stage-results-completed"
	setPath(cb, "repository.full_name", theRepo)
	cb["client_payload"] = map[string]any{"comment-id": strconv.FormatInt(c2.ID, 10), "run-id": "900", "pr-number": 3000, "stage-succeeded": true,
		"request-token": w.requestToken(c2.ID)}
	w.Send("repository_dispatch", cb)
	mustContain(t, "unstaged notice", w.LastReply(), "Run 31147925932 of this PR is no longer staged", "run 900 of PR #3000")

	// A request still waiting when a newer one comes is replaced, and told.
	w.Comment(maintainer, "/stage-results 31147925932") // waits for the staging side
	w.Comment(maintainer, "/stage-results 31147925932") // comes first to the shared slot
	found := false
	for _, r := range w.Replies() {
		found = found || strings.Contains(r, "was replaced by a newer request")
	}
	if !found {
		t.Fatalf("the replaced request was not told: %v", w.Replies())
	}
}

func TestStageRequiredLabels(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "      required_labels: [\"full-sweep-fail-fast\", \"full-sweep-enabled\"]\n")
	w.GH.Repo(theRepo).PRs[thePR].Labels = nil // created without labels
	w.Comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "no label", w.LastReply(), "none of the labels")
	w.GH.Repo(theRepo).PRs[thePR].Labels = []string{"full-sweep-enabled"} // as if it had been there from the start
	w.Comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "label", w.LastReply(), "staging run [31147925932]")
}

// Anyone able to send a repository_dispatch to the served repository (another
// App, a workflow with a write token) cannot report a stage request failed or
// staged: a report must echo the request's token, which only the dispatch to
// the staging side carried. The genuine report still lands.
func TestStageCallbackWithoutTheRequestTokenIsRefused(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	c := w.Comment(maintainer, "/stage-results 31147925932")
	for _, tok := range []any{nil, "", "guessed-token"} {
		p := payload(t, "repository_dispatch", "")
		p["action"] = "stage-results-completed"
		setPath(p, "repository.full_name", theRepo)
		p["sender"] = map[string]any{"login": "some-pr-workflow[bot]", "id": 41898282, "type": "Bot"}
		cp := map[string]any{"comment-id": strconv.FormatInt(c.ID, 10), "run-id": strconv.FormatInt(runR1, 10),
			"pr-number": strconv.Itoa(thePR), "stage-succeeded": "false", "app-run-id": "1"}
		if tok != nil {
			cp["request-token"] = tok
		}
		p["client_payload"] = cp
		w.Send("repository_dispatch", p)
		if ack := w.ack(); strings.Contains(ack, "failed") {
			t.Fatalf("a report with request-token %v was taken: %s", tok, ack)
		}
	}
	refused := 0
	for _, a := range w.audit() {
		if a["kind"] == "callback" && a["outcome"] == "refused" && strings.Contains(fmt.Sprint(a["reason"]), "request's token") {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d forged reports audited as refused for the token, want 3: %v", refused, w.audit())
	}
	w.callback("stage-results-completed", c.ID, runR1, true)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
}
