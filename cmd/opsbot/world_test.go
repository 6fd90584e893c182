package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The world of the end-to-end tests: one benchmark repository on a fake
// GitHub, and opsbot serving it.
const (
	theRepo   = "SemiAnalysisAI/InferenceX"
	thePR     = 2512
	runR1     = int64(31147925932)
	apiToken  = "test-api-token-0123456789"
	maintLog  = "maintainer"
	maintID   = int64(5001)
	readerLog = "reader"
	readerID  = int64(5002)
)

type world struct {
	t      *testing.T
	gh     *githubtest.Fake
	srv    *testServer
	dir    string
	env    func(string) string
	nextID atomic.Int64
	// readyClock stamps the workflow runs a test completes, in order.
	readyClock int
	// deps are the server's adjusted dependencies, kept for a restart.
	deps func(*app.Deps)
}

var resultArtifacts = []githubtest.Artifact{{Name: "results_bmk"}, {Name: "eval_results_all"}, {Name: "changelog-metadata"}}

// newWorld sets up PR 2512 (commit c1 on base b0) with a successful sweep
// run R1 on c1, a maintainer with write access and a reader, and starts
// opsbot on it. extra is appended to the repository's configuration.
func newWorld(t *testing.T, repoExtra string) *world {
	t.Helper()
	return newWorldWith(t, "", repoExtra, nil)
}

// newWorldWith adds top-level configuration and environment variables.
func newWorldWith(t *testing.T, topExtra, repoExtra string, env map[string]string) *world {
	t.Helper()
	return newWorldOpts(t, worldOpts{top: topExtra, repo: repoExtra, env: env})
}

// worldOpts are additions to the world's configuration: top level, inside
// github:, and inside the repository; and environment variables.
type worldOpts struct {
	top, github, repo string
	env               map[string]string
	// deps adjusts the server's dependencies (a clock the test moves).
	deps func(*app.Deps)
}

func newWorldOpts(t *testing.T, o worldOpts) *world {
	t.Helper()
	topExtra, repoExtra, env := o.top, o.repo, o.env
	gh := githubtest.New(t)
	gh.AddRepo(theRepo, "run-sweep.yml", 77)
	gh.AddUser("author", 5000, "User")
	gh.AddUser(maintLog, maintID, "User")
	gh.AddUser(readerLog, readerID, "User")
	gh.SetRole(theRepo, maintLog, "write")
	gh.SetRole(theRepo, readerLog, "read")
	gh.AddPR(theRepo, thePR, "author", "kimi-tune", sha("b0"), []string{sha("c1")}, []string{"benchmarks/kimi.sh"})
	gh.AddRun(theRepo, githubtest.Run{ID: runR1, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: sha("c1"), HeadBranch: "kimi-tune", Artifacts: resultArtifacts, CreatedAt: time.Now().Add(-2 * time.Hour)})
	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
state_path: %q
github:
  api_url: %q
  token_env: "TEST_GITHUB_TOKEN"
  webhook_secret_env: "TEST_WEBHOOK_SECRET"
%s
api:
  tokens_env: "TEST_API_TOKENS"
%s
repos:
  - name: %q
    sweep_workflow: ".github/workflows/run-sweep.yml"
%s`, filepath.Join(dir, "opsbot.db"), gh.URL, o.github, topExtra, theRepo, repoExtra)
	path := filepath.Join(dir, "opsbot.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, gh: gh, dir: dir, deps: o.deps}
	w.nextID.Store(1000)
	vars := map[string]string{"TEST_GITHUB_TOKEN": "ghs_test", "TEST_API_TOKENS": apiToken}
	for k, v := range env {
		vars[k] = v
	}
	w.env = testEnv(vars)
	w.srv = startServerWith(t, path, w.env, o.deps)
	return w
}

func (w *world) id() string { return fmt.Sprintf("delivery-%d", w.nextID.Add(1)) }

// send signs and posts a payload, and waits until it is processed and
// every notice it caused is sent.
func (w *world) send(event string, payload map[string]any) string {
	w.t.Helper()
	id := w.id()
	w.sendAs(id, event, payload)
	return id
}

func (w *world) sendAs(id, event string, payload map[string]any) int {
	w.t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		w.t.Fatal(err)
	}
	code, rep := post(w.t, fixtures.SignedRequest(w.t, w.srv.URL+"/webhook", event, id, body, testSecret))
	if code/100 != 2 {
		w.t.Fatalf("webhook %s: %d %v", event, code, rep)
	}
	w.settle()
	return code
}

// settle waits until the inbox and the outbox are empty.
func (w *world) settle() {
	w.t.Helper()
	// A scrape reads the two gauges one after the other, so a delivery
	// completed into a notice between the reads could look like two empty
	// queues; the next scrape, wholly after it, cannot.
	empty := func() bool {
		m := w.metrics()
		return m["opsbot_inbox_depth"] == "0" && m["opsbot_outbox_depth"] == "0"
	}
	testkit.Eventually(w.t, "the inbox and the outbox drain", func() bool {
		if !empty() {
			return false
		}
		return empty() // a second scrape, wholly after the first
	})
}

func (w *world) metrics() map[string]string {
	resp, err := http.Get(w.srv.URL + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

func payload(t *testing.T, event, action string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixtures.Webhook(t, event, action), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

type user struct {
	login string
	id    int64
	kind  string
}

var (
	maintainer = user{maintLog, maintID, "User"}
	reader     = user{readerLog, readerID, "User"}
)

func (u user) json() map[string]any {
	kind := u.kind
	if kind == "" {
		kind = "User"
	}
	return map[string]any{"login": u.login, "id": u.id, "type": kind}
}

// comment writes a comment on the fake GitHub and announces it.
func (w *world) comment(u user, body string) githubtest.Comment {
	w.t.Helper()
	c := w.gh.AddComment(theRepo, thePR, u.login, body)
	w.commentEvent("created", u, u, c.ID, body, "")
	return c
}

// commentEvent sends an issue_comment event (created, edited, deleted).
func (w *world) commentEvent(action string, author, sender user, id int64, body, oldBody string) string {
	w.t.Helper()
	return w.send("issue_comment", w.commentPayload(action, author, sender, id, body, oldBody))
}

// commentPayload is an issue_comment payload on the PR (created, edited,
// deleted), not yet sent.
func (w *world) commentPayload(action string, author, sender user, id int64, body, oldBody string) map[string]any {
	w.t.Helper()
	p := payload(w.t, "issue_comment", "created")
	p["action"] = action
	setPath(p, "repository.full_name", theRepo)
	setPath(p, "issue.number", thePR)
	setPath(p, "issue.state", "open")
	setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/" + strconv.Itoa(thePR)})
	setPath(p, "comment.id", id)
	setPath(p, "comment.body", body)
	setPath(p, "comment.user", author.json())
	setPath(p, "comment.html_url", fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", theRepo, thePR, id))
	p["sender"] = sender.json()
	if action == "edited" {
		p["changes"] = map[string]any{"body": map[string]any{"from": oldBody}}
	}
	return p
}

// push adds a commit to the PR on the fake GitHub and sends synchronize.
func (w *world) push(name string, files ...string) string {
	w.t.Helper()
	w.gh.Push(theRepo, thePR, []string{sha(name)}, files)
	return w.sendSync(sha(name), "")
}

func (w *world) syncPayload(head string) map[string]any {
	p := payload(w.t, "pull_request", "synchronize")
	setPath(p, "repository.full_name", theRepo)
	p["number"] = thePR
	setPath(p, "pull_request.number", thePR)
	setPath(p, "pull_request.head.sha", head)
	setPath(p, "pull_request.head.ref", "kimi-tune")
	w.setLabels(p)
	return p
}

// setLabels gives a pull_request payload the PR's labels and draft flag
// as the fake GitHub has them, as GitHub's webhooks carry them.
func (w *world) setLabels(p map[string]any) {
	labels, draft := w.gh.PRLabels(theRepo, thePR)
	list := []any{}
	for _, l := range labels {
		list = append(list, map[string]any{"name": l})
	}
	setPath(p, "pull_request.labels", list)
	setPath(p, "pull_request.draft", draft)
}

func (w *world) sendSync(head, id string) string {
	w.t.Helper()
	if id == "" {
		id = w.id()
	}
	w.sendAs(id, "pull_request", w.syncPayload(head))
	return id
}

func (w *world) close(merged bool, merge string) {
	w.t.Helper()
	mergeSHA := ""
	if merge != "" {
		mergeSHA = sha(merge)
	}
	w.gh.ClosePR(theRepo, thePR, merged, mergeSHA)
	p := payload(w.t, "pull_request", "closed")
	setPath(p, "repository.full_name", theRepo)
	p["number"] = thePR
	setPath(p, "pull_request.number", thePR)
	setPath(p, "pull_request.merged", merged)
	setPath(p, "pull_request.merge_commit_sha", mergeSHA)
	setPath(p, "pull_request.head.ref", "kimi-tune")
	setPath(p, "pull_request.head.sha", w.gh.PRHead(theRepo, thePR))
	w.setLabels(p)
	w.send("pull_request", p)
}

// replies are opsbot's comments on the PR, oldest first.
func (w *world) replies() []string {
	var out []string
	for _, c := range w.gh.Comments(theRepo, thePR) {
		if c.Login == githubtest.BotLogin && strings.Contains(c.Body, "<!-- opsbot:notice=") {
			out = append(out, c.Body)
		}
	}
	return out
}

func (w *world) lastReply() string {
	w.t.Helper()
	r := w.replies()
	if len(r) == 0 {
		w.t.Fatal("opsbot posted no comment")
	}
	return r[len(r)-1]
}

func (w *world) statuses(name string) []githubtest.Status { return w.gh.Statuses(theRepo, sha(name)) }

// gate runs `opsbot gate` for the PR at sha and returns its outputs.
func (w *world) gate(args ...string) (map[string]string, string) {
	w.t.Helper()
	out := filepath.Join(w.t.TempDir(), "github_output")
	var stdout, stderr bytes.Buffer
	base := []string{"gate", "--server", w.srv.URL, "--repo", theRepo, "--github-output", out}
	err := run(w.t.Context(), append(base, args...), func(k string) string {
		if k == "OPSBOT_API_TOKEN" {
			return apiToken
		}
		return ""
	}, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		w.t.Fatalf("opsbot gate: %v\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		w.t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), string(raw)) {
		w.t.Fatalf("GITHUB_OUTPUT %q differs from stdout %q", raw, stdout.String())
	}
	vals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vals[k] = v
	}
	return vals, stdout.String()
}

// audit lists the PR's audit through `opsbot audit --server`.
func (w *world) audit() []map[string]any {
	w.t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(w.t.Context(), []string{"audit", "--server", w.srv.URL, "--repo", theRepo, "--pr", strconv.Itoa(thePR), "--format", "json"},
		func(k string) string {
			if k == "OPSBOT_API_TOKEN" {
				return apiToken
			}
			return ""
		}, strings.NewReader(""), &stdout, &stderr)
	if err != nil {
		w.t.Fatalf("opsbot audit: %v\n%s", err, stderr.String())
	}
	var recs []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &recs); err != nil {
		w.t.Fatalf("audit JSON: %v\n%s", err, stdout.String())
	}
	return recs
}

// trail is the audit as "kind outcome" lines.
func (w *world) trail() []string {
	var out []string
	for _, r := range w.audit() {
		s := fmt.Sprint(r["kind"], " ", r["outcome"])
		if c, ok := r["command"]; ok {
			s = fmt.Sprint(r["kind"], " ", c, " ", r["outcome"])
		}
		out = append(out, s)
	}
	return out
}

// sha makes a commit id from a short hex name: sha("c1") is c1c1…c1.
func sha(name string) string { return strings.Repeat(name, 40/len(name)+1)[:40] }

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// postNoSettle posts a payload and returns its delivery id without waiting.
func postNoSettle(t *testing.T, w *world, event string, p map[string]any) string {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	id := w.id()
	if code, rep := post(t, fixtures.SignedRequest(t, w.srv.URL+"/webhook", event, id, body, testSecret)); code/100 != 2 {
		t.Fatalf("webhook: %d %v", code, rep)
	}
	return id
}

func newGet(url string) (*http.Request, error) { return http.NewRequest(http.MethodGet, url, nil) }

func doReq(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(r)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// commentBody is the body of a comment on the fake GitHub.
func (w *world) commentBody(id int64) string {
	for _, c := range w.gh.Comments(theRepo, thePR) {
		if c.ID == id {
			return c.Body
		}
	}
	w.t.Fatalf("no comment %d", id)
	return ""
}
