// Package githubtest is a fake GitHub REST API for opsbot's tests and for
// `opsbot demo`: a plain net/http handler with in-memory repositories, pull requests and their
// commits, workflow runs and artifacts, collaborators, teams, comments,
// reactions, statuses and dispatches. Answers have GitHub's documented JSON
// shapes (go-github's types marshal them), lists paginate with Link headers,
// GETs carry ETags and answer 304 to If-None-Match, every request is
// recorded, and faults can be injected per route. It imports neither
// testing nor net/http/httptest, so the demo can link it into the binary.
package githubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
)

// BotLogin and BotID are the account comments posted through the API belong
// to (unless SetAuthenticatedUser names another); AppID and AppSlug are the
// GitHub App whose bot user it is.
const (
	BotLogin = "opsbot[bot]"
	BotID    = 900001
	AppID    = 4242
	AppSlug  = "opsbot"
)

// Fake is the fake GitHub.
type Fake struct {
	URL string // base URL with a trailing slash, for github.api_url

	mux    *http.ServeMux
	server *http.Server

	mu         sync.Mutex
	now        func() time.Time
	repos      map[string]*Repo
	users      map[string]*github.User
	teams      map[string]map[string]bool // org/slug -> logins
	requests   []Request
	faults     map[string][]*Fault
	nextID     int64
	comments   []*Comment
	statuses   []Status
	reactions  []Reaction
	dispatches []Dispatch
	tokens     int
	appTokens  map[string]bool // installation tokens the fake issued
	installs   []int64         // the App's installations (GET /app/installations)
	self       string          // the login GET /user answers and API comments are written by
	known      map[string]bool
	watch      func(Request)
	limits     limiter
}

// Watch calls fn (outside the fake's lock) with every request answered,
// as it is answered: a load generator times replies with it.
func (f *Fake) Watch(fn func(Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watch = fn
}

// Repo is one repository.
type Repo struct {
	Owner, Name   string
	ID            int64
	DefaultBranch string
	Workflows     map[string]int64 // file name -> workflow id
	Runs          map[int64]*Run
	PRs           map[int]*PR
	Roles         map[string]string   // login -> role_name
	parents       map[string]string   // commit -> parent
	files         map[string][]string // commit -> files it touched
}

// PR is one pull request.
type PR struct {
	Number  int
	Title   string
	Author  string
	Branch  string
	BaseSHA string
	// BaseRef is the branch the PR merges into; "" means the default branch.
	BaseRef  string
	Commits  []string // oldest first; the last is the head
	State    string   // open, closed
	Merged   bool
	MergeSHA string
	Labels   []string
	// HeadRepoID and HeadRepo are the repository the head branch is in
	// (a fork's); 0 and "" mean the base repository.
	HeadRepoID int64
	HeadRepo   string
	// ClosedAt and UpdatedAt are GitHub's closed_at and updated_at (zero:
	// none); States are the closes and reopens, oldest first (the timeline).
	ClosedAt, UpdatedAt time.Time
	States              []StateEvent
}

// StateEvent is a PR closed, reopened or retargeted, as its timeline shows it.
type StateEvent struct {
	Event string // closed, reopened, base_ref_changed
	At    time.Time
}

// Head is the PR's head commit.
func (p *PR) Head() string { return p.Commits[len(p.Commits)-1] }

// Run is one workflow run.
type Run struct {
	ID         int64
	WorkflowID int64
	Event      string
	Status     string
	Conclusion string
	HeadSHA    string
	HeadBranch string
	Attempt    int
	CreatedAt  time.Time
	Artifacts  []Artifact
	// PRs are the pull requests the run lists; nil lists what GitHub would:
	// the open PRs of the repository whose head is the run's branch, when
	// the run's head is in the repository itself (a fork's run lists none).
	PRs []int
	// HeadRepoID and HeadRepo are the repository the run's branch is in
	// (a fork's); 0 and "" mean the repository itself.
	HeadRepoID int64
	HeadRepo   string
	// PRBase is the base branch the run's pull_requests entries name; ""
	// means each PR's base branch now (its BaseRef, or the default branch).
	PRBase string
}

// Artifact is one run artifact.
type Artifact struct {
	Name    string
	Expired bool
}

// Comment is an issue comment.
type Comment struct {
	ID        int64
	Repo      string
	PR        int
	Body      string
	Login     string
	UserID    int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Edits     int
	ViaApp    int64 // performed_via_github_app: posted with an installation token
}

// Status is a commit status set through the API.
type Status struct {
	Repo, SHA, State, Description, Context, TargetURL string
}

// Reaction is a reaction added to a comment.
type Reaction struct {
	Repo      string
	CommentID int64
	Content   string
	Login     string // who reacted: the account the request's token belongs to
}

// Dispatch is a repository_dispatch sent.
type Dispatch struct {
	Repo          string
	EventType     string
	ClientPayload map[string]any
}

// Request is one request the fake answered.
type Request struct {
	Method string
	Route  string // the route pattern, e.g. "GET /repos/{owner}/{repo}/actions/runs/{id}"
	Path   string
	Status int
	Header http.Header
	Body   string
}

// Fault is an answer injected on a route instead of the normal one.
type Fault struct {
	Status int
	Header map[string]string
	Body   string
	Delay  time.Duration // wait before answering
	Pass   bool          // after Delay, answer normally
	Drop   bool          // close the connection without answering
	Times  int           // how many requests it applies to; 0 means every one
	used   int
}

// Cleaner is what New needs of a test (testing.TB has it): a way to close
// the server at the end.
type Cleaner interface{ Cleanup(func()) }

// New starts a fake GitHub on a loopback port; it is closed when the test
// (or the caller's cleanup) ends. It panics if no port can be had, as a
// test server would.
func New(t Cleaner) *Fake {
	f, err := Listen()
	if err != nil {
		panic(fmt.Sprintf("githubtest: %v", err))
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// NewHandler returns a fake GitHub that serves nothing by itself: mount it
// (it is an http.Handler) and set URL to where it is served.
func NewHandler() *Fake {
	f := &Fake{now: time.Now, repos: map[string]*Repo{}, users: map[string]*github.User{},
		teams: map[string]map[string]bool{}, faults: map[string][]*Fault{}, nextID: 5000000, mux: http.NewServeMux(),
		appTokens: map[string]bool{}, self: BotLogin, installs: []int64{1}}
	f.AddUser(BotLogin, BotID, "Bot")
	f.routes(f.mux)
	return f
}

// Listen starts a fake GitHub on a free loopback port (127.0.0.1 only: it
// never listens on the network). Close stops it.
func Listen() (*Fake, error) {
	f := NewHandler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on a loopback port for the fake GitHub: %w", err)
	}
	f.server = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	f.URL = "http://" + ln.Addr().String() + "/"
	go f.server.Serve(ln)
	return f, nil
}

// ServeHTTP answers a request as GitHub's REST API would.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Close stops a fake started by Listen (or New) and closes its connections.
func (f *Fake) Close() error {
	if f.server == nil {
		return nil
	}
	return f.server.Close()
}

// SetAuthenticatedUser makes login (registered with AddUser) the account
// of the token: GET /user answers it, and comments posted through the API
// are written by it.
func (f *Fake) SetAuthenticatedUser(login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.self = login
}

// SetNow sets the fake's clock (artifact expiry, timestamps).
func (f *Fake) SetNow(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// AddUser registers an account. kind is "User" or "Bot". Adding a login
// that exists hands it to the new account (a renamed or deleted account's
// login taken by someone else).
func (f *Fake) AddUser(login string, id int64, kind string) *github.User {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := &github.User{Login: github.String(login), ID: github.Int64(id), Type: github.String(kind),
		HTMLURL: github.String("https://github.com/" + login)}
	f.users[strings.ToLower(login)] = u
	return u
}

// AddRepo registers a repository with a sweep workflow at file (e.g. run-sweep.yml).
func (f *Fake) AddRepo(fullName string, workflowFile string, workflowID int64) *Repo {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner, name, _ := strings.Cut(fullName, "/")
	r := &Repo{Owner: owner, Name: name, ID: int64(len(f.repos) + 100), DefaultBranch: "main",
		Workflows: map[string]int64{workflowFile: workflowID}, Runs: map[int64]*Run{}, PRs: map[int]*PR{},
		Roles: map[string]string{}, parents: map[string]string{}, files: map[string][]string{}}
	f.repos[strings.ToLower(fullName)] = r
	return r
}

// Repo returns a registered repository.
func (f *Fake) Repo(fullName string) *Repo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[strings.ToLower(fullName)]
}

// SetRole gives login a role (none, read, triage, write, maintain, admin, or a custom name).
func (f *Fake) SetRole(repo, login, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].Roles[strings.ToLower(login)] = role
}

// AddTeamMember puts login in team org/slug.
func (f *Fake) AddTeamMember(team, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.teams[strings.ToLower(team)] == nil {
		f.teams[strings.ToLower(team)] = map[string]bool{}
	}
	f.teams[strings.ToLower(team)][strings.ToLower(login)] = true
}

// AddPR opens a PR whose commits follow base in order; files[i] are the
// files commit i touched (may be shorter than commits).
func (f *Fake) AddPR(repo string, number int, author, branch, base string, commits []string, files ...[]string) *PR {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := &PR{Number: number, Title: fmt.Sprintf("PR %d", number), Author: author, Branch: branch, BaseSHA: base,
		Commits: append([]string(nil), commits...), State: "open"}
	r.PRs[number] = p
	r.chain(base, commits, files)
	return p
}

// Push adds commits to a PR's head (a synchronize).
func (f *Fake) Push(repo string, number int, commits []string, files ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.Head(), commits, files)
	p.Commits = append(p.Commits, commits...)
}

// ForcePush replaces a PR's commits (a rebase): the old ones leave the PR.
func (f *Fake) ForcePush(repo string, number int, commits []string, files ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.BaseSHA, commits, files)
	p.Commits = append([]string(nil), commits...)
}

// Retarget changes the branch a PR merges into ("" is the default branch).
func (f *Fake) Retarget(repo string, number int, baseRef string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.BaseRef = baseRef
	p.States = append(p.States, StateEvent{Event: "base_ref_changed", At: f.now()})
}

// FromFork puts a PR's head branch in a fork (repository id and full name).
func (f *Fake) FromFork(repo string, number int, forkID int64, fork string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.HeadRepoID, p.HeadRepo = forkID, fork
}

// PRHead is a PR's head commit now.
func (f *Fake) PRHead(repo string, number int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[strings.ToLower(repo)].PRs[number].Head()
}

// ClosePR closes a PR, merged or not.
func (f *Fake) ClosePR(repo string, number int, merged bool, mergeSHA string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.State, p.Merged, p.MergeSHA = "closed", merged, mergeSHA
	p.ClosedAt, p.UpdatedAt = f.now(), f.now()
	p.States = append(p.States, StateEvent{Event: "closed", At: f.now()})
}

// ReopenPR reopens a closed, unmerged PR.
func (f *Fake) ReopenPR(repo string, number int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.State, p.ClosedAt, p.UpdatedAt = "open", time.Time{}, f.now()
	p.States = append(p.States, StateEvent{Event: "reopened", At: f.now()})
}

func (r *Repo) chain(parent string, commits []string, files [][]string) {
	for i, c := range commits {
		r.parents[c] = parent
		if i < len(files) {
			r.files[c] = files[i]
		}
		parent = c
	}
}

// AddRun registers a workflow run.
func (f *Fake) AddRun(repo string, run Run) *Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	if run.Attempt == 0 {
		run.Attempt = 1
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = f.now()
	}
	run.Artifacts = append([]Artifact(nil), run.Artifacts...) // the caller's slice stays theirs
	r := &run
	f.repos[strings.ToLower(repo)].Runs[run.ID] = r
	return r
}

// Rerun re-runs a run: its attempt goes up by one and it completes again
// with conclusion.
func (f *Fake) Rerun(repo string, runID int64, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[runID]
	run.Attempt++
	run.Status, run.Conclusion = "completed", conclusion
}

// ExpireArtifacts marks every artifact of a run expired.
func (f *Fake) ExpireArtifacts(repo string, runID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[runID]
	for i := range run.Artifacts {
		run.Artifacts[i].Expired = true
	}
}

// Inject answers the next requests on route with fault. route is a
// pattern as registered, e.g. "GET /repos/{owner}/{repo}/actions/runs/{id}".
func (f *Fake) Inject(route string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known[route] {
		panic("githubtest: no route " + route)
	}
	fc := fault
	f.faults[route] = append(f.faults[route], &fc)
}

// Heal removes the faults injected on a route.
func (f *Fake) Heal(route string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.faults, route)
}

// Requests returns every request answered so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Count is the number of requests answered on route (all routes for "").
func (f *Fake) Count(route string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if route == "" || r.Route == route {
			n++
		}
	}
	return n
}

// Reads is the number of GET requests answered with something other than 304.
func (f *Fake) Reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r.Method == http.MethodGet && r.Status != http.StatusNotModified {
			n++
		}
	}
	return n
}

// ResetRequests forgets the recorded requests.
func (f *Fake) ResetRequests() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = nil
}

// Comments returns the comments of a PR, oldest first.
func (f *Fake) Comments(repo string, pr int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, repo) && c.PR == pr {
			out = append(out, *c)
		}
	}
	return out
}

// AddComment records a comment as written by login (a user's comment the
// tests then announce in a webhook). It returns the comment's id.
func (f *Fake) AddComment(repo string, pr int, login string, body string) Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.addComment(repo, pr, login, body)
}

func (f *Fake) addComment(repo string, pr int, login, body string) *Comment {
	f.nextID++
	u := f.users[strings.ToLower(login)]
	var uid int64
	if u != nil {
		uid = u.GetID()
	}
	now := f.now()
	c := &Comment{ID: f.nextID, Repo: repo, PR: pr, Body: body, Login: login, UserID: uid, CreatedAt: now, UpdatedAt: now}
	f.comments = append(f.comments, c)
	return c
}

// Statuses returns the statuses set on a commit, oldest first.
func (f *Fake) Statuses(repo, sha string) []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Status
	for _, s := range f.statuses {
		if strings.EqualFold(s.Repo, repo) && s.SHA == sha {
			out = append(out, s)
		}
	}
	return out
}

// AddReaction adds login's reaction of kind content to a comment, as a
// person reacting on GitHub would.
func (f *Fake) AddReaction(repo string, commentID int64, login, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reactions = append(f.reactions, Reaction{Repo: repo, CommentID: commentID, Content: content, Login: login})
}

// Reactions returns the reactions added to a comment.
func (f *Fake) Reactions(commentID int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reactions {
		if r.CommentID == commentID {
			out = append(out, r.Content)
		}
	}
	return out
}

// Dispatches returns the repository_dispatch events sent.
func (f *Fake) Dispatches() []Dispatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Dispatch(nil), f.dispatches...)
}

// ---- HTTP ----

type handler func(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any)

func (f *Fake) routes(mux *http.ServeMux) {
	f.known = map[string]bool{}
	add := func(pattern string, h handler) {
		f.known[pattern] = true
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, pattern, h) })
	}
	add("GET /repos/{owner}/{repo}/collaborators/{user}/permission", f.permission)
	add("GET /orgs/{org}/teams/{slug}/memberships/{user}", f.teamMembership)
	add("GET /users/{user}", f.user)
	add("GET /repos/{owner}/{repo}/actions/workflows/{file}", f.workflow)
	add("GET /repos/{owner}/{repo}/actions/workflows/{id}/runs", f.workflowRuns)
	add("GET /repos/{owner}/{repo}/actions/runs/{id}", f.run)
	add("GET /repos/{owner}/{repo}/actions/runs", f.repoRuns)
	add("GET /repos/{owner}/{repo}/actions/runs/{id}/artifacts", f.artifacts)
	add("GET /repos/{owner}/{repo}", f.repository)
	add("GET /repos/{owner}/{repo}/pulls/{n}", f.pull)
	add("GET /repos/{owner}/{repo}/pulls/{n}/commits", f.pullCommits)
	add("GET /repos/{owner}/{repo}/compare/{basehead}", f.compare)
	add("GET /repos/{owner}/{repo}/commits/{sha}/pulls", f.commitPulls)
	add("POST /repos/{owner}/{repo}/issues/{n}/comments", f.createComment)
	add("GET /repos/{owner}/{repo}/issues/comments", f.repoComments)
	add("GET /repos/{owner}/{repo}/pulls", f.listPulls)
	add("PATCH /repos/{owner}/{repo}/issues/comments/{id}", f.editComment)
	add("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", f.react)
	add("GET /repos/{owner}/{repo}/issues/comments/{id}/reactions", f.listReactions)
	add("POST /repos/{owner}/{repo}/statuses/{sha}", f.status)
	add("GET /repos/{owner}/{repo}/commits/{sha}/statuses", f.listStatuses)
	add("POST /repos/{owner}/{repo}/dispatches", f.dispatch)
	// Three GET routes share one shape; one handler tells them apart.
	issueGets := map[string]handler{
		"GET /repos/{owner}/{repo}/issues/{n}/comments":  f.listComments,
		"GET /repos/{owner}/{repo}/issues/comments/{id}": f.getComment,
		"GET /repos/{owner}/{repo}/issues/{n}/timeline":  f.timeline,
	}
	for route := range issueGets {
		f.known[route] = true
	}
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{a}/{b}", func(w http.ResponseWriter, r *http.Request) {
		a, b := r.PathValue("a"), r.PathValue("b")
		var route string
		switch {
		case a == "comments":
			route = "GET /repos/{owner}/{repo}/issues/comments/{id}"
			r.SetPathValue("id", b)
		case b == "comments":
			route = "GET /repos/{owner}/{repo}/issues/{n}/comments"
			r.SetPathValue("n", a)
		case b == "timeline":
			route = "GET /repos/{owner}/{repo}/issues/{n}/timeline"
			r.SetPathValue("n", a)
		default:
			http.NotFound(w, r)
			return
		}
		f.serve(w, r, route, issueGets[route])
	})
	add("POST /app/installations/{id}/access_tokens", f.accessToken)
	add("GET /user", f.authenticatedUser)
	add("GET /app", f.getApp)
	add("GET /app/installations", f.listInstallations)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request, route string, h handler) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	rec := Request{Method: r.Method, Route: route, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: string(body)}
	if fault := f.takeFault(route); fault != nil {
		if fault.Delay > 0 {
			select {
			case <-time.After(fault.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if fault.Drop {
			f.record(rec, 0)
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
		if !fault.Pass {
			for k, v := range fault.Header {
				w.Header().Set(k, v)
			}
			if fault.Body == "" {
				fault.Body = fmt.Sprintf(`{"message":"injected %d","documentation_url":"https://docs.github.com/rest"}`, fault.Status)
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(fault.Status)
			io.WriteString(w, fault.Body)
			f.record(rec, fault.Status)
			return
		}
	}

	if f.refuseOverLimit(w, route, rec) {
		return
	}
	f.mu.Lock()
	var repo *Repo
	if o, n := r.PathValue("owner"), r.PathValue("repo"); o != "" {
		repo = f.repos[strings.ToLower(o+"/"+n)]
	}
	var code int
	var v any
	if repo == nil && r.PathValue("owner") != "" {
		code, v = http.StatusNotFound, notFound()
	} else {
		code, v = h(w, r, repo)
	}
	f.mu.Unlock()

	var out []byte
	if v != nil {
		out, _ = json.Marshal(v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
	if r.Method == http.MethodGet && code == http.StatusOK {
		sum := sha256.Sum256(out)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			f.record(rec, http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(code)
	w.Write(out)
	f.record(rec, code)
}

func (f *Fake) takeFault(route string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.faults[route] {
		if fl.Times == 0 || fl.used < fl.Times {
			fl.used++
			return fl
		}
	}
	return nil
}

func (f *Fake) record(r Request, status int) {
	f.mu.Lock()
	r.Status = status
	if f.watch == nil {
		f.requests = append(f.requests, r)
	}
	w := f.watch
	f.mu.Unlock()
	if w != nil {
		w(r) // a watched fake keeps no log: a load run would fill memory
	}
}

func notFound() map[string]string {
	return map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
}

func (f *Fake) permission(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	login := r.PathValue("user")
	u := f.users[strings.ToLower(login)]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	role := repo.Roles[strings.ToLower(login)]
	if role == "" {
		role = "read" // public repository: everyone reads
	}
	legacy := map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none"}[role]
	if legacy == "" {
		legacy = "write" // a custom role built on write
	}
	rank := map[string]int{"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}[legacy]
	if r, ok := map[string]int{"triage": 2, "maintain": 4}[role]; ok {
		rank = r
	}
	perms := map[string]bool{"pull": rank >= 1, "triage": rank >= 2, "push": rank >= 3, "maintain": rank >= 4, "admin": rank >= 5}
	user := map[string]any{"login": u.GetLogin(), "id": u.GetID(), "type": u.GetType(), "permissions": perms}
	return http.StatusOK, map[string]any{"permission": legacy, "role_name": role, "user": user}
}

// user answers an account by login, as whoever holds the login now.
func (f *Fake) user(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	u := f.users[strings.ToLower(r.PathValue("user"))]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, u
}

func (f *Fake) teamMembership(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	team := strings.ToLower(r.PathValue("org") + "/" + r.PathValue("slug"))
	if !f.teams[team][strings.ToLower(r.PathValue("user"))] {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, map[string]any{"url": "", "role": "member", "state": "active"}
}

func (f *Fake) workflow(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	file := r.PathValue("file")
	id, ok := repo.Workflows[file]
	if !ok {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, &github.Workflow{ID: github.Int64(id), Name: github.String(file), Path: github.String(".github/workflows/" + file), State: github.String("active")}
}

func (f *Fake) runJSON(repo *Repo, run *Run) *github.WorkflowRun {
	full := repo.Owner + "/" + repo.Name
	wr := &github.WorkflowRun{
		ID: github.Int64(run.ID), WorkflowID: github.Int64(run.WorkflowID), Event: github.String(run.Event),
		Status: github.String(run.Status), HeadSHA: github.String(run.HeadSHA), HeadBranch: github.String(run.HeadBranch),
		RunAttempt: github.Int(run.Attempt), CreatedAt: &github.Timestamp{Time: run.CreatedAt},
		HTMLURL:    github.String(fmt.Sprintf("https://github.com/%s/actions/runs/%d", full, run.ID)),
		Repository: &github.Repository{FullName: github.String(full), ID: github.Int64(repo.ID)},
	}
	if run.Conclusion != "" {
		wr.Conclusion = github.String(run.Conclusion)
	}
	headID, headName := run.HeadRepoID, run.HeadRepo
	if headID == 0 {
		headID, headName = repo.ID, full
	}
	wr.HeadRepository = &github.Repository{ID: github.Int64(headID), FullName: github.String(headName)}
	prs := run.PRs
	if prs == nil && headID == repo.ID {
		for n, p := range repo.PRs {
			if p.State == "open" && p.Branch == run.HeadBranch && (p.HeadRepoID == 0 || p.HeadRepoID == repo.ID) {
				prs = append(prs, n)
			}
		}
		sort.Ints(prs)
	}
	for _, n := range prs {
		base := run.PRBase
		if base == "" {
			base = repo.DefaultBranch
			if p := repo.PRs[n]; p != nil && p.BaseRef != "" {
				base = p.BaseRef
			}
		}
		wr.PullRequests = append(wr.PullRequests, &github.PullRequest{Number: github.Int(n),
			Base: &github.PullRequestBranch{Ref: github.String(base)}})
	}
	return wr
}

func (f *Fake) run(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.runJSON(repo, run)
}

func (f *Fake) workflowRuns(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	q := r.URL.Query()
	var runs []*Run
	for _, run := range repo.Runs {
		if run.WorkflowID != id ||
			(q.Get("branch") != "" && run.HeadBranch != q.Get("branch")) ||
			(q.Get("event") != "" && run.Event != q.Get("event")) ||
			(q.Get("status") != "" && run.Status != q.Get("status") && run.Conclusion != q.Get("status")) ||
			(q.Get("head_sha") != "" && run.HeadSHA != q.Get("head_sha")) {
			continue
		}
		runs = append(runs, run)
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].CreatedAt.After(runs[j].CreatedAt) || (runs[i].CreatedAt.Equal(runs[j].CreatedAt) && runs[i].ID > runs[j].ID)
	})
	page := paginate(w, r, len(runs))
	out := &github.WorkflowRuns{TotalCount: github.Int(len(runs)), WorkflowRuns: []*github.WorkflowRun{}}
	for _, run := range runs[page.from:page.to] {
		out.WorkflowRuns = append(out.WorkflowRuns, f.runJSON(repo, run))
	}
	return http.StatusOK, out
}

// repoRuns lists the repository's runs of every workflow, newest first,
// filtered by head_sha when asked.
func (f *Fake) repoRuns(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.URL.Query().Get("head_sha")
	var runs []*Run
	for _, run := range repo.Runs {
		if sha == "" || run.HeadSHA == sha {
			runs = append(runs, run)
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].CreatedAt.After(runs[j].CreatedAt) || (runs[i].CreatedAt.Equal(runs[j].CreatedAt) && runs[i].ID > runs[j].ID)
	})
	page := paginate(w, r, len(runs))
	out := &github.WorkflowRuns{TotalCount: github.Int(len(runs)), WorkflowRuns: []*github.WorkflowRun{}}
	for _, run := range runs[page.from:page.to] {
		out.WorkflowRuns = append(out.WorkflowRuns, f.runJSON(repo, run))
	}
	return http.StatusOK, out
}

func (f *Fake) artifacts(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	page := paginate(w, r, len(run.Artifacts))
	out := &github.ArtifactList{TotalCount: github.Int64(int64(len(run.Artifacts))), Artifacts: []*github.Artifact{}}
	for i, a := range run.Artifacts[page.from:page.to] {
		exp := run.CreatedAt.Add(90 * 24 * time.Hour)
		if a.Expired {
			exp = f.now().Add(-time.Hour)
		}
		out.Artifacts = append(out.Artifacts, &github.Artifact{ID: github.Int64(run.ID*100 + int64(i)), Name: github.String(a.Name),
			Expired: github.Bool(a.Expired), SizeInBytes: github.Int64(1024), ExpiresAt: &github.Timestamp{Time: exp},
			WorkflowRun: &github.ArtifactWorkflowRun{ID: github.Int64(run.ID), HeadSHA: github.String(run.HeadSHA)}})
	}
	return http.StatusOK, out
}

func (f *Fake) prJSON(repo *Repo, p *PR) *github.PullRequest {
	full := repo.Owner + "/" + repo.Name
	headID, headName := p.HeadRepoID, p.HeadRepo
	if headID == 0 {
		headID, headName = repo.ID, full
	}
	baseRef := p.BaseRef
	if baseRef == "" {
		baseRef = repo.DefaultBranch
	}
	out := &github.PullRequest{
		Number: github.Int(p.Number), Title: github.String(p.Title), State: github.String(p.State),
		Merged: github.Bool(p.Merged), Commits: github.Int(len(p.Commits)),
		User:    f.users[strings.ToLower(p.Author)],
		HTMLURL: github.String(fmt.Sprintf("https://github.com/%s/pull/%d", full, p.Number)),
		Head: &github.PullRequestBranch{SHA: github.String(p.Head()), Ref: github.String(p.Branch),
			Label: github.String(strings.SplitN(headName, "/", 2)[0] + ":" + p.Branch),
			Repo:  &github.Repository{ID: github.Int64(headID), FullName: github.String(headName)}},
		Base: &github.PullRequestBranch{SHA: github.String(p.BaseSHA), Ref: github.String(baseRef),
			Repo: &github.Repository{FullName: github.String(full), DefaultBranch: github.String(repo.DefaultBranch)}},
	}
	if p.MergeSHA != "" {
		out.MergeCommitSHA = github.String(p.MergeSHA)
	}
	if !p.ClosedAt.IsZero() {
		out.ClosedAt = &github.Timestamp{Time: p.ClosedAt}
	}
	if !p.UpdatedAt.IsZero() {
		out.UpdatedAt = &github.Timestamp{Time: p.UpdatedAt}
	}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, &github.Label{Name: github.String(l)})
	}
	return out
}

func (f *Fake) repository(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	return http.StatusOK, &github.Repository{ID: github.Int64(repo.ID), Name: github.String(repo.Name),
		FullName: github.String(repo.Owner + "/" + repo.Name), DefaultBranch: github.String(repo.DefaultBranch)}
}

func (f *Fake) pull(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.prJSON(repo, p)
}

func (f *Fake) pullCommits(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	commits := p.Commits
	if len(commits) > 250 { // GitHub lists at most 250 commits of a PR
		commits = commits[:250]
	}
	page := paginate(w, r, len(commits))
	out := []*github.RepositoryCommit{}
	for _, c := range commits[page.from:page.to] {
		out = append(out, &github.RepositoryCommit{SHA: github.String(c)})
	}
	return http.StatusOK, out
}

// ancestors returns head's chain, head first.
func (repo *Repo) ancestors(head string) []string {
	var out []string
	seen := map[string]bool{}
	for c := head; c != "" && !seen[c]; c = repo.parents[c] {
		seen[c] = true
		out = append(out, c)
	}
	return out
}

func (f *Fake) compare(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	base, head, ok := strings.Cut(r.PathValue("basehead"), "...")
	if !ok {
		return http.StatusNotFound, notFound()
	}
	known := func(c string) bool { _, ok := repo.parents[c]; return ok || isBase(repo, c) }
	onBase := map[string]bool{} // the commits of base: a commit's ancestors, or the default branch's
	if base == repo.DefaultBranch {
		// The default branch holds every PR's base and merge commit.
		for _, p := range repo.PRs {
			for _, c := range append(repo.ancestors(p.BaseSHA), repo.ancestors(p.MergeSHA)...) {
				onBase[c] = true
			}
		}
	} else if known(base) {
		for _, c := range repo.ancestors(base) {
			onBase[c] = true
		}
	}
	if len(onBase) == 0 || !known(head) {
		return http.StatusNotFound, notFound()
	}
	// Three dots: the changes on head since its merge base with base.
	status, ahead, behind := "", 0, 0
	var between []string
	hc := repo.ancestors(head)
	for i, c := range hc {
		if onBase[c] {
			ahead, between = i, hc[:i]
			switch {
			case c == base && i == 0:
				status = "identical"
			case c == base || base == repo.DefaultBranch:
				status = "ahead"
			case i == 0:
				status = "behind"
				for j, b := range repo.ancestors(base) {
					if b == head {
						behind = j
					}
				}
			default:
				status = "diverged"
			}
			break
		}
	}
	if status == "" {
		return http.StatusNotFound, map[string]string{"message": "No common ancestor between " + base + " and " + head + "."}
	}
	files := map[string]bool{}
	for _, c := range between {
		for _, fl := range repo.files[c] {
			files[fl] = true
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &github.CommitsComparison{Status: github.String(status), AheadBy: github.Int(ahead), BehindBy: github.Int(behind),
		TotalCommits: github.Int(ahead)}
	for i := len(between) - 1; i >= 0; i-- {
		out.Commits = append(out.Commits, &github.RepositoryCommit{SHA: github.String(between[i])})
	}
	for _, n := range names {
		out.Files = append(out.Files, &github.CommitFile{Filename: github.String(n), Status: github.String("modified")})
	}
	return http.StatusOK, out
}

func isBase(repo *Repo, c string) bool {
	for _, p := range repo.PRs {
		if p.BaseSHA == c || p.MergeSHA == c {
			return true
		}
	}
	return false
}

func (f *Fake) commitPulls(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.PathValue("sha")
	out := []*github.PullRequest{}
	nums := make([]int, 0, len(repo.PRs))
	for n := range repo.PRs {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		p := repo.PRs[n]
		hit := p.MergeSHA == sha
		for _, c := range p.Commits {
			hit = hit || c == sha
		}
		if hit {
			out = append(out, f.prJSON(repo, p))
		}
	}
	return http.StatusOK, out
}

// issueComment is an issue comment as GitHub answers it, with the App that
// performed it (go-github's IssueComment has no such field).
type issueComment struct {
	*github.IssueComment
	PerformedViaGithubApp *github.App `json:"performed_via_github_app"`
}

func (f *Fake) commentJSON(c *Comment) issueComment {
	user := &github.User{Login: github.String(c.Login), ID: github.Int64(c.UserID), Type: github.String("User")}
	if u := f.users[strings.ToLower(c.Login)]; u != nil {
		user.Type = u.Type
	}
	out := issueComment{IssueComment: &github.IssueComment{ID: github.Int64(c.ID), Body: github.String(c.Body), User: user,
		HTMLURL:   github.String(fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", c.Repo, c.PR, c.ID)),
		CreatedAt: &github.Timestamp{Time: c.CreatedAt}, UpdatedAt: &github.Timestamp{Time: c.UpdatedAt}}}
	if c.ViaApp != 0 {
		out.PerformedViaGithubApp = &github.App{ID: github.Int64(c.ViaApp), Slug: github.String(AppSlug)}
	}
	return out
}

func (f *Fake) listComments(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	full := repo.Owner + "/" + repo.Name
	var cs []*Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, full) && c.PR == n {
			cs = append(cs, c)
		}
	}
	page := paginate(w, r, len(cs))
	out := []issueComment{}
	for _, c := range cs[page.from:page.to] {
		out = append(out, f.commentJSON(c))
	}
	return http.StatusOK, out
}

func (f *Fake) createComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	var in github.IssueComment
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.GetBody() == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	c := f.addComment(repo.Owner+"/"+repo.Name, n, f.self, in.GetBody())
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token "); ok && f.appTokens[tok] {
		c.ViaApp = AppID
	} else if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && f.appTokens[tok] {
		c.ViaApp = AppID
	}
	return http.StatusCreated, f.commentJSON(c)
}

func (f *Fake) findComment(repo *Repo, id int64) *Comment {
	for _, c := range f.comments {
		if c.ID == id && strings.EqualFold(c.Repo, repo.Owner+"/"+repo.Name) {
			return c
		}
	}
	return nil
}

func (f *Fake) getComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c := f.findComment(repo, id)
	if c == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.commentJSON(c)
}

func (f *Fake) editComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c := f.findComment(repo, id)
	if c == nil {
		return http.StatusNotFound, notFound()
	}
	var in github.IssueComment
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.GetBody() == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	c.Body, c.UpdatedAt = in.GetBody(), f.now()
	c.Edits++
	return http.StatusOK, f.commentJSON(c)
}

func (f *Fake) react(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if f.findComment(repo, id) == nil {
		return http.StatusNotFound, notFound()
	}
	var in struct {
		Content string `json:"content"`
	}
	json.NewDecoder(r.Body).Decode(&in)
	valid := map[string]bool{"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true}
	if !valid[in.Content] {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	for _, x := range f.reactions {
		if x.CommentID == id && x.Content == in.Content {
			return http.StatusOK, &github.Reaction{Content: github.String(in.Content)}
		}
	}
	f.reactions = append(f.reactions, Reaction{Repo: repo.Owner + "/" + repo.Name, CommentID: id, Content: in.Content, Login: f.self})
	return http.StatusCreated, &github.Reaction{ID: github.Int64(int64(len(f.reactions))), Content: github.String(in.Content)}
}

// listReactions answers a comment's reactions, each with the user who added it.
func (f *Fake) listReactions(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if f.findComment(repo, id) == nil {
		return http.StatusNotFound, notFound()
	}
	out := []*github.Reaction{}
	content := r.URL.Query().Get("content") // GitHub's filter by kind
	for i, x := range f.reactions {
		if x.CommentID == id && strings.EqualFold(x.Repo, repo.Owner+"/"+repo.Name) && (content == "" || x.Content == content) {
			u := f.users[strings.ToLower(x.Login)]
			if u == nil {
				u = &github.User{Login: github.String(x.Login)}
			}
			out = append(out, &github.Reaction{ID: github.Int64(int64(i + 1)), Content: github.String(x.Content), User: u})
		}
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

func (f *Fake) status(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in github.RepoStatus
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	switch in.GetState() {
	case "error", "failure", "pending", "success":
	default:
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	if len(in.GetDescription()) > 140 {
		return http.StatusUnprocessableEntity, map[string]string{"message": "description is too long (maximum is 140 characters)"}
	}
	f.statuses = append(f.statuses, Status{Repo: repo.Owner + "/" + repo.Name, SHA: r.PathValue("sha"), State: in.GetState(),
		Description: in.GetDescription(), Context: in.GetContext(), TargetURL: in.GetTargetURL()})
	return http.StatusCreated, &in
}

func (f *Fake) dispatch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		EventType     string         `json:"event_type"`
		ClientPayload map[string]any `json:"client_payload"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.EventType == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	f.dispatches = append(f.dispatches, Dispatch{Repo: repo.Owner + "/" + repo.Name, EventType: in.EventType, ClientPayload: in.ClientPayload})
	return http.StatusNoContent, nil
}

// timeline answers labeled events for the PR's current labels, dated at the
// PR's creation, then its closes and reopens.
func (f *Fake) timeline(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	out := []map[string]any{}
	for _, l := range p.Labels {
		out = append(out, map[string]any{"event": "labeled", "label": map[string]string{"name": l},
			"created_at": time.Unix(0, 0).UTC().Format(time.RFC3339)})
	}
	for _, e := range p.States {
		out = append(out, map[string]any{"event": e.Event, "created_at": e.At.UTC().Format(time.RFC3339)})
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

func (f *Fake) accessToken(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	f.tokens++
	f.appTokens[fmt.Sprintf("ghs_fake%d", f.tokens)] = true
	return http.StatusCreated, map[string]any{"token": fmt.Sprintf("ghs_fake%d", f.tokens),
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
}

// authenticatedUser answers GET /user: the token's account.
func (f *Fake) authenticatedUser(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	u := f.users[strings.ToLower(f.self)]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, u
}

// getApp answers GET /app for a request signed as the App (a JWT).
func (f *Fake) getApp(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	return http.StatusOK, &github.App{ID: github.Int64(AppID), Slug: github.String(AppSlug), Name: github.String("opsbot")}
}

// SetInstallations sets the App's installations (default: one, id 1).
func (f *Fake) SetInstallations(ids ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs = ids
}

// listInstallations answers GET /app/installations for a request signed as the App.
func (f *Fake) listInstallations(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	out := []*github.Installation{}
	for _, id := range f.installs {
		out = append(out, &github.Installation{ID: github.Int64(id), AppID: github.Int64(AppID)})
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

// TokensIssued is the number of installation tokens the fake issued.
func (f *Fake) TokensIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}

type pageRange struct{ from, to int }

// paginate reads per_page and page, sets a Link header for the next and
// the last page (as GitHub does), and returns the slice bounds.
func paginate(w http.ResponseWriter, r *http.Request, n int) pageRange {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	if per > 100 {
		per = 100
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page <= 0 {
		page = 1
	}
	from := min((page-1)*per, n)
	to := min(from+per, n)
	if to < n {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page+1))
		q.Set("per_page", strconv.Itoa(per))
		u.RawQuery = q.Encode()
		next := u.RequestURI()
		q.Set("page", strconv.Itoa((n+per-1)/per))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next", <http://%s%s>; rel="last"`, r.Host, next, r.Host, u.RequestURI()))
	}
	return pageRange{from, to}
}

func (f *Fake) repoComments(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		since, _ = time.Parse(time.RFC3339, v)
	}
	var cs []*Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, full) && !c.UpdatedAt.Before(since) {
			cs = append(cs, c)
		}
	}
	page := paginate(w, r, len(cs))
	out := []issueComment{}
	for _, c := range cs[page.from:page.to] {
		ic := f.commentJSON(c)
		ic.IssueURL = github.String(fmt.Sprintf("https://api.github.com/repos/%s/issues/%d", full, c.PR))
		out = append(out, ic)
	}
	return http.StatusOK, out
}

func (f *Fake) listPulls(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	want := r.URL.Query().Get("state")
	if want == "" {
		want = "open"
	}
	head := r.URL.Query().Get("head") // OWNER:BRANCH
	nums := make([]int, 0, len(repo.PRs))
	for n, p := range repo.PRs {
		if (want == "all" || p.State == want) && (head == "" || strings.EqualFold(f.prJSON(repo, p).GetHead().GetLabel(), head)) {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	page := paginate(w, r, len(nums))
	out := []*github.PullRequest{}
	for _, n := range nums[page.from:page.to] {
		out = append(out, f.prJSON(repo, repo.PRs[n]))
	}
	return http.StatusOK, out
}

// EditComment replaces a comment's body as a person would on GitHub's page
// (its updated_at moves to now; created_at stays).
func (f *Fake) EditComment(id int64, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		if c.ID == id {
			c.Body, c.UpdatedAt = body, f.now()
			c.Edits++
		}
	}
}

// DeleteComment deletes a comment as a person would on GitHub's page: it
// is gone from every list and read (404).
func (f *Fake) DeleteComment(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.comments = slices.DeleteFunc(f.comments, func(c *Comment) bool { return c.ID == id })
}

// SetCommentTime backdates a comment (a webhook opsbot never got).
func (f *Fake) SetCommentTime(id int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		if c.ID == id {
			c.CreatedAt, c.UpdatedAt = at, at
		}
	}
}

func (f *Fake) listStatuses(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	out := []*github.RepoStatus{}
	for i := len(f.statuses) - 1; i >= 0; i-- { // newest first, as GitHub lists them
		st := f.statuses[i]
		if strings.EqualFold(st.Repo, full) && st.SHA == r.PathValue("sha") {
			out = append(out, &github.RepoStatus{State: github.String(st.State), Description: github.String(st.Description),
				Context: github.String(st.Context), TargetURL: github.String(st.TargetURL)})
		}
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}
