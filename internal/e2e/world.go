package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// The world: one benchmark repository on a fake GitHub, with PR 2512
// (commit c1 on base b0), a successful sweep run R1 on c1, a maintainer
// with write access and a reader.
const (
	Repo        = "SemiAnalysisAI/InferenceX"
	PR          = 2512
	RunR1       = int64(31147925932)
	APIToken    = "test-api-token-0123456789"
	MaintLogin  = "maintainer"
	MaintID     = int64(5001)
	ReaderLogin = "reader"
	ReaderID    = int64(5002)
)

// ResultArtifacts are the artifacts of a real sweep run.
var ResultArtifacts = []githubtest.Artifact{{Name: "results_bmk"}, {Name: "eval_results_all"}, {Name: "changelog-metadata"}}

// User is a GitHub account that acts in the world.
type User struct {
	Login string
	ID    int64
	Kind  string // User (the default) or Bot
}

// The world's people.
var (
	Maintainer = User{MaintLogin, MaintID, "User"}
	Reader     = User{ReaderLogin, ReaderID, "User"}
)

// JSON is the account as a webhook names it.
func (u User) JSON() map[string]any {
	kind := u.Kind
	if kind == "" {
		kind = "User"
	}
	return map[string]any{"login": u.Login, "id": u.ID, "type": kind}
}

// Options are additions to the world's configuration: top level, inside
// github:, and inside the repository; environment variables; and the
// server's dependencies (a clock the test moves, a test's command).
type Options struct {
	Top, GitHub, Repo string
	Env               map[string]string
	Deps              func(*app.Deps)
	// App runs opsbot as the fake's GitHub App (check runs and their
	// buttons are an App's) instead of with a token.
	App bool
}

// World is one test's world: the fake GitHub and opsbot serving it.
type World struct {
	T   *testing.T
	GH  *githubtest.Fake
	Srv *Server
	Dir string
	Env func(string) string
	// Deps are the server's adjusted dependencies, kept for a restart.
	Deps func(*app.Deps)
	// ReadyClock stamps the workflow runs a test completes, in order.
	ReadyClock int
	nextID     atomic.Int64
}

// New sets up the world and starts opsbot on it.
func New(t *testing.T, o Options) *World {
	t.Helper()
	gh := githubtest.New(t)
	gh.AddRepo(Repo, "run-sweep.yml", 77)
	gh.AddUser("author", 5000, "User")
	gh.AddUser(MaintLogin, MaintID, "User")
	gh.AddUser(ReaderLogin, ReaderID, "User")
	gh.SetRole(Repo, MaintLogin, "write")
	gh.SetRole(Repo, ReaderLogin, "read")
	gh.AddPR(Repo, PR, "author", "kimi-tune", SHA("b0"), []string{SHA("c1")}, []string{"benchmarks/kimi.sh"})
	gh.AddRun(Repo, githubtest.Run{ID: RunR1, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success",
		HeadSHA: SHA("c1"), HeadBranch: "kimi-tune", Artifacts: ResultArtifacts, CreatedAt: time.Now().Add(-2 * time.Hour)})
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
%s`, filepath.Join(dir, "opsbot.db"), gh.URL, o.GitHub, o.Top, Repo, o.Repo)
	if o.App {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		keyFile := filepath.Join(dir, "app.pem")
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg = strings.Replace(cfg, `  token_env: "TEST_GITHUB_TOKEN"`, fmt.Sprintf("  app:\n    id: %d\n    installation_id: 1\n    private_key_file: %q",
			githubtest.AppID, keyFile), 1)
	}
	path := filepath.Join(dir, "opsbot.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &World{T: t, GH: gh, Dir: dir, Deps: o.Deps}
	w.nextID.Store(1000)
	vars := map[string]string{"TEST_GITHUB_TOKEN": "ghs_test", "TEST_API_TOKENS": APIToken}
	for k, v := range o.Env {
		vars[k] = v
	}
	w.Env = TestEnv(vars)
	w.Srv = Start(t, path, w.Env, o.Deps)
	return w
}

// ConfigPath is the world's configuration file.
func (w *World) ConfigPath() string { return filepath.Join(w.Dir, "opsbot.yaml") }

// Restart stops opsbot and starts it again on the same database, with the
// configuration edited by edit (nil: as it is) and the dependencies deps
// (nil: the world's).
func (w *World) Restart(edit func(cfg string) string, deps func(*app.Deps)) {
	w.T.Helper()
	w.Srv.Stop(w.T)
	if edit != nil {
		raw, err := os.ReadFile(w.ConfigPath())
		if err != nil {
			w.T.Fatal(err)
		}
		if err := os.WriteFile(w.ConfigPath(), []byte(edit(string(raw))), 0o600); err != nil {
			w.T.Fatal(err)
		}
	}
	if deps == nil {
		deps = w.Deps
	}
	w.Srv = Start(w.T, w.ConfigPath(), w.Env, deps)
}

// ID is a new delivery id.
func (w *World) ID() string { return fmt.Sprintf("delivery-%d", w.Next()) }

// Next is a new number of the world's, for ids a test makes.
func (w *World) Next() int64 { return w.nextID.Add(1) }

// Send signs and posts a payload, and waits until it is processed and
// every notice it caused is sent.
func (w *World) Send(event string, payload map[string]any) string {
	w.T.Helper()
	id := w.ID()
	w.SendAs(id, event, payload)
	return id
}

// SendAs is Send under a delivery id of the test's.
func (w *World) SendAs(id, event string, payload map[string]any) int {
	w.T.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		w.T.Fatal(err)
	}
	code, rep := Post(w.T, fixtures.SignedRequest(w.T, w.Srv.URL+"/webhook", event, id, body, Secret))
	if code/100 != 2 {
		w.T.Fatalf("webhook %s: %d %v", event, code, rep)
	}
	w.Settle()
	return code
}

// PostNoSettle posts a payload and returns its delivery id without waiting.
func (w *World) PostNoSettle(event string, p map[string]any) string {
	w.T.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		w.T.Fatal(err)
	}
	id := w.ID()
	if code, rep := Post(w.T, fixtures.SignedRequest(w.T, w.Srv.URL+"/webhook", event, id, body, Secret)); code/100 != 2 {
		w.T.Fatalf("webhook: %d %v", code, rep)
	}
	return id
}

// Settle waits until the inbox and the outbox are empty.
func (w *World) Settle() {
	w.T.Helper()
	// A scrape reads the two gauges one after the other, so a delivery
	// completed into a notice between the reads could look like two empty
	// queues; the next scrape, wholly after it, cannot.
	empty := func() bool {
		m := w.Metrics()
		return m["opsbot_inbox_depth"] == "0" && m["opsbot_outbox_depth"] == "0"
	}
	testkit.Eventually(w.T, "the inbox and the outbox drain", func() bool {
		if !empty() {
			return false
		}
		return empty() // a second scrape, wholly after the first
	})
}

// Metrics are the server's metrics, by series.
func (w *World) Metrics() map[string]string {
	resp, err := http.Get(w.Srv.URL + "/metrics")
	if err != nil {
		w.T.Fatal(err)
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

// Payload is a real webhook payload of event and action.
func Payload(t testing.TB, event, action string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixtures.Webhook(t, event, action), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// SetPath sets a value in a payload at a dotted path, making the maps on
// the way.
func SetPath(m map[string]any, path string, v any) {
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

// Comment writes a comment on the fake GitHub and announces it.
func (w *World) Comment(u User, body string) githubtest.Comment {
	w.T.Helper()
	c := w.GH.AddComment(Repo, PR, u.Login, body)
	w.CommentEvent("created", u, u, c.ID, body, "")
	return c
}

// CommentEvent sends an issue_comment event (created, edited, deleted).
func (w *World) CommentEvent(action string, author, sender User, id int64, body, oldBody string) string {
	w.T.Helper()
	return w.Send("issue_comment", w.CommentPayload(action, author, sender, id, body, oldBody))
}

// CommentPayload is an issue_comment payload on the PR (created, edited,
// deleted), not yet sent.
func (w *World) CommentPayload(action string, author, sender User, id int64, body, oldBody string) map[string]any {
	w.T.Helper()
	p := Payload(w.T, "issue_comment", "created")
	p["action"] = action
	SetPath(p, "repository.full_name", Repo)
	SetPath(p, "issue.number", PR)
	SetPath(p, "issue.state", "open")
	SetPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + Repo + "/pulls/" + strconv.Itoa(PR)})
	SetPath(p, "comment.id", id)
	SetPath(p, "comment.body", body)
	SetPath(p, "comment.user", author.JSON())
	SetPath(p, "comment.html_url", fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", Repo, PR, id))
	p["sender"] = sender.JSON()
	if action == "edited" {
		p["changes"] = map[string]any{"body": map[string]any{"from": oldBody}}
	}
	return p
}

// Push adds a commit to the PR on the fake GitHub and sends synchronize.
func (w *World) Push(name string, files ...string) string {
	w.T.Helper()
	w.GH.Push(Repo, PR, []string{SHA(name)}, files)
	return w.SendSync(SHA(name), "")
}

// SyncPayload is the PR's synchronize for head.
func (w *World) SyncPayload(head string) map[string]any {
	p := Payload(w.T, "pull_request", "synchronize")
	SetPath(p, "repository.full_name", Repo)
	p["number"] = PR
	SetPath(p, "pull_request.number", PR)
	SetPath(p, "pull_request.head.sha", head)
	SetPath(p, "pull_request.head.ref", "kimi-tune")
	w.SetLabels(p)
	return p
}

// SetLabels gives a pull_request payload the PR's labels and draft flag
// as the fake GitHub has them, as GitHub's webhooks carry them.
func (w *World) SetLabels(p map[string]any) {
	labels, draft := w.GH.PRLabels(Repo, PR)
	list := []any{}
	for _, l := range labels {
		list = append(list, map[string]any{"name": l})
	}
	SetPath(p, "pull_request.labels", list)
	SetPath(p, "pull_request.draft", draft)
}

// SendSync sends the PR's synchronize for head (under id, or a new one).
func (w *World) SendSync(head, id string) string {
	w.T.Helper()
	if id == "" {
		id = w.ID()
	}
	w.SendAs(id, "pull_request", w.SyncPayload(head))
	return id
}

// ClosePR closes the PR on the fake GitHub (merged as commit merge, when
// merged) and sends pull_request closed.
func (w *World) ClosePR(merged bool, merge string) {
	w.T.Helper()
	mergeSHA := ""
	if merge != "" {
		mergeSHA = SHA(merge)
	}
	w.GH.ClosePR(Repo, PR, merged, mergeSHA)
	w.Send("pull_request", w.ClosedPayload(merged, mergeSHA))
}

// ClosedPayload is the PR's pull_request closed (merged as mergeSHA, when
// merged), with its head and labels as the fake GitHub has them.
func (w *World) ClosedPayload(merged bool, mergeSHA string) map[string]any {
	p := Payload(w.T, "pull_request", "closed")
	SetPath(p, "repository.full_name", Repo)
	p["number"] = PR
	SetPath(p, "pull_request.number", PR)
	SetPath(p, "pull_request.merged", merged)
	SetPath(p, "pull_request.merge_commit_sha", mergeSHA)
	SetPath(p, "pull_request.head.ref", "kimi-tune")
	SetPath(p, "pull_request.head.sha", w.GH.PRHead(Repo, PR))
	w.SetLabels(p)
	return p
}

// Replies are opsbot's comments on the PR, oldest first.
func (w *World) Replies() []string {
	var out []string
	for _, c := range w.GH.Comments(Repo, PR) {
		if c.Login == githubtest.BotLogin && strings.Contains(c.Body, "<!-- opsbot:notice=") {
			out = append(out, c.Body)
		}
	}
	return out
}

// LastReply is opsbot's newest comment on the PR.
func (w *World) LastReply() string {
	w.T.Helper()
	r := w.Replies()
	if len(r) == 0 {
		w.T.Fatal("opsbot posted no comment")
	}
	return r[len(r)-1]
}

// Statuses are the commit statuses on commit name.
func (w *World) Statuses(name string) []githubtest.Status { return w.GH.Statuses(Repo, SHA(name)) }

// CommentBody is the body of a comment on the fake GitHub.
func (w *World) CommentBody(id int64) string {
	for _, c := range w.GH.Comments(Repo, PR) {
		if c.ID == id {
			return c.Body
		}
	}
	w.T.Fatalf("no comment %d", id)
	return ""
}

// AuditRecords are the PR's audit records, read through the admin API.
func (w *World) AuditRecords() []map[string]any {
	w.T.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/audit?repo=%s&pr=%d&limit=1000", w.Srv.URL, Repo, PR), nil)
	if err != nil {
		w.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		w.T.Fatalf("GET /api/v1/audit: %d %v", resp.StatusCode, err)
	}
	return page.Records
}

// SHA makes a commit id from a short hex name: SHA("c1") is c1c1…c1.
func SHA(name string) string { return strings.Repeat(name, 40/len(name)+1)[:40] }

// MustContain fails the test when s lacks one of subs.
func MustContain(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// Clock is a clock the test moves (app.Deps.Now).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock at now.
func NewClock() *Clock { return &Clock{t: time.Now()} }

// ClockAt is a clock at t.
func ClockAt(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Wakeups is how many wake-ups the server has processed.
func (w *World) Wakeups() int {
	n := 0
	for k, v := range w.Metrics() {
		if strings.HasPrefix(k, `opsbot_deliveries_processed_total{event="opsbot_wakeup"`) {
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

// PassTime moves the clock by d and waits until a wake-up has been
// processed since, so what was due by then has been acted on.
func (w *World) PassTime(c *Clock, d time.Duration) {
	w.T.Helper()
	before := w.Wakeups()
	c.Add(d)
	testkit.Eventually(w.T, "a wake-up after the clock moved", func() bool { return w.Wakeups() > before })
	w.Settle()
}

// CheckRunsOn are opsbot's check runs on commit name (an App's).
func (w *World) CheckRunsOn(name string) []githubtest.CreatedCheckRun {
	var out []githubtest.CreatedCheckRun
	for _, c := range w.GH.CreatedCheckRuns() {
		if c.SHA == SHA(name) {
			out = append(out, c)
		}
	}
	return out
}

// ClickCheckRun sends check_run requested_action: u clicked the button
// identifier on opsbot's newest check run of commit name that offers it,
// about run.
func (w *World) ClickCheckRun(u User, name, identifier string, run int64) {
	w.T.Helper()
	w.Send("check_run", w.ClickPayload(u, name, identifier, run))
}

// ClickPayload is the check_run requested_action GitHub sends for a click
// (ClickCheckRun): the check run, its name and its external_id (the PR,
// the run and the offer's nonce) are those of the newest check run on the
// commit that offers the button; a test sends it again to replay it. run is unused
// when one offers it (the check run names its run).
func (w *World) ClickPayload(u User, name, identifier string, run int64) map[string]any {
	w.T.Helper()
	var id int64
	ext := fmt.Sprintf("%d:%d", PR, run) // no check run offers it: a button opsbot never offered
	check := "opsbot/sweep-gate"
	for _, c := range w.CheckRunsOn(name) {
		if slices.Contains(c.Actions, identifier) {
			id, ext, check = c.ID, c.ExternalID, c.Name
		}
	}
	return map[string]any{"action": "requested_action",
		"repository": map[string]any{"full_name": Repo},
		"check_run": map[string]any{"id": id, "name": check, "head_sha": SHA(name), "external_id": ext,
			"app": map[string]any{"id": githubtest.AppID}, "pull_requests": []any{map[string]any{"number": PR}}},
		"requested_action": map[string]any{"identifier": identifier},
		"sender":           u.JSON()}
}

// SweepCompleted sends workflow_run completed for a run of the sweep
// workflow on commit name.
func (w *World) SweepCompleted(name string, run int64, conclusion string) {
	w.T.Helper()
	w.ReadyClock++
	w.Send("workflow_run", map[string]any{"action": "completed",
		"repository": map[string]any{"full_name": Repo},
		"workflow_run": map[string]any{"id": run, "head_sha": SHA(name), "conclusion": conclusion, "event": "pull_request",
			"path": ".github/workflows/run-sweep.yml", "html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", Repo, run),
			"run_attempt": 1, "updated_at": time.Date(2026, 12, 1, 0, 0, w.ReadyClock, 0, time.UTC).Format(time.RFC3339),
			"pull_requests": []any{map[string]any{"number": PR}}}})
}

// CheckEvent sends check_suite completed for head, as GitHub does when a
// head's checks finish.
func (w *World) CheckEvent(head string) {
	w.T.Helper()
	p := Payload(w.T, "check_suite", "completed")
	SetPath(p, "repository.full_name", Repo)
	SetPath(p, "check_suite.head_sha", head)
	w.Send("check_suite", p)
}

// Gate asks the gate as the workflow's `opsbot gate` does (POST
// /api/v1/gate with a gate token) and returns its answer; an answer other
// than 200 fails the test.
func (w *World) Gate(ask gate.Request) gate.Answer {
	w.T.Helper()
	if ask.Repo == "" {
		ask.Repo = Repo
	}
	body, err := json.Marshal(ask)
	if err != nil {
		w.T.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, w.Srv.URL+"/api/v1/gate", bytes.NewReader(body))
	if err != nil {
		w.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+APIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatalf("POST /api/v1/gate: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var ans gate.Answer
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &ans) != nil {
		w.T.Fatalf("POST /api/v1/gate %+v: %d %s", ask, resp.StatusCode, raw)
	}
	return ans
}

// GateFlags asks the gate as `opsbot gate` would with these flags
// (--event, --sha, --ref, --pr) and returns the step outputs it writes.
func (w *World) GateFlags(args ...string) map[string]string {
	w.T.Helper()
	var ask gate.Request
	for i := 0; i+1 < len(args); i += 2 {
		switch v := args[i+1]; args[i] {
		case "--event":
			ask.Event = v
		case "--sha":
			ask.SHA = v
		case "--ref":
			ask.Ref = v
		case "--pr":
			n, err := strconv.Atoi(v)
			if err != nil {
				w.T.Fatalf("gate --pr %q: %v", v, err)
			}
			ask.PR = n
		default:
			w.T.Fatalf("gate: no flag %s here", args[i])
		}
	}
	return w.Gate(ask).Outputs()
}

// Trail is the PR's audit as "kind outcome" lines ("kind command
// outcome" for a command's).
func (w *World) Trail() []string {
	var out []string
	for _, r := range w.AuditRecords() {
		s := fmt.Sprint(r["kind"], " ", r["outcome"])
		if c, ok := r["command"]; ok {
			s = fmt.Sprint(r["kind"], " ", c, " ", r["outcome"])
		}
		out = append(out, s)
	}
	return out
}

// Reply is an API answer: its status and body.
type Reply struct {
	Code int
	Body string
}

// Call makes one API request with an admin or gate token (APIToken); a
// body is sent as JSON.
func (w *World) Call(method, path, body string) Reply {
	w.T.Helper()
	req, err := http.NewRequest(method, w.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		w.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+APIToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return Reply{resp.StatusCode, string(raw)}
}

// Offered are the check-run buttons opsbot's commands offer, as their
// identifiers and labels joined with commas: Reuse for next push and Merge
// with reuse first.
func Offered(t testing.TB) (ids, labels string) {
	t.Helper()
	var i, l []string
	for _, a := range app.Grammar().CheckActions() {
		i, l = append(i, a.Identifier), append(l, a.Label)
	}
	if len(i) < 2 || i[0] != "reuse" || i[1] != "merge" || l[0] != "Reuse for next push" || l[1] != "Merge with reuse" {
		t.Fatalf("the commands offer %v %v on a check run: want Reuse for next push and Merge with reuse first", i, l)
	}
	return strings.Join(i, ","), strings.Join(l, ",")
}

// NewestReply is the newest of opsbot's comments on the PR that starts
// with prefix ("": none): a sequence's status comment, edited in place.
func (w *World) NewestReply(prefix string) string {
	out := ""
	for _, r := range w.Replies() {
		if strings.HasPrefix(r, prefix) {
			out = r
		}
	}
	return out
}

// WaitReply waits until the newest comment starting with prefix says
// each of subs, and returns it.
func (w *World) WaitReply(prefix string, subs ...string) string {
	w.T.Helper()
	testkit.Eventually(w.T, "the comment "+prefix+"… says "+strings.Join(subs, ", "), func() bool {
		s := w.NewestReply(prefix)
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return s != ""
	})
	return w.NewestReply(prefix)
}
