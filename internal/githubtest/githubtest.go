// Package githubtest is a fake GitHub REST API for opsbot's tests and for
// `opsbot demo`: a plain net/http handler with in-memory repositories, pull requests and their
// commits, workflow runs and artifacts, collaborators, teams, comments,
// reactions, statuses and dispatches, and the GitHub App manifest flow (the
// web form that registers an App, the API's code conversion). Answers have GitHub's documented JSON
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

	mu          sync.Mutex
	now         func() time.Time
	repos       map[string]*Repo
	users       map[string]*github.User
	teams       map[string]map[string]bool // org/slug -> logins
	requests    []Request
	faults      map[string][]*Fault
	nextID      int64
	comments    []*Comment
	statuses    []Status
	checkRuns   []CheckRun
	checkSuites []CheckSuite
	created     []CreatedCheckRun
	merges      []Merge
	enqueues    []string // heads asked to be queued (queue.go)
	moves       int      // branch moves made through updateRefs (queue.go)
	deletions   int      // branches deleted through updateRefs
	reactions   []Reaction
	dispatches  []Dispatch
	// workflowDispatches are the workflow dispatches sent.
	workflowDispatches []WorkflowDispatch
	reruns             []int64 // runs whose failed jobs were re-run (rerunFailed)
	tokens             int
	appTokens          map[string]bool // installation tokens the fake issued
	installs           []int64         // the App's installations (GET /app/installations)
	self               string          // the login GET /user answers and API comments are written by
	known              map[string]bool
	watch              func(Request)
	limits             limiter

	manifestApps []*ManifestApp  // registered through the manifest flow
	appNames     map[string]bool // App names in use (lower case)
}

// Watch calls fn (outside the fake's lock) with every request answered,
// as it is answered: a load generator times replies with it.
func (f *Fake) Watch(fn func(Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watch = fn
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
	// Labels are the PR's labels now: the default ones since its creation,
	// then LabelHistory's changes (SetLabels), which its timeline lists.
	Labels       []string
	LabelHistory []LabelChange
	Draft        bool
	// Behind says the branch lacks the base branch's newest commits
	// (mergeable_state behind; update-branch merges them in).
	// UpdateConflict makes update-branch fail as a conflict does;
	// ReviewRequired makes branch protection block the merge for want of
	// a review (mergeable_state blocked); MergeableUnknown is GitHub still
	// computing whether the PR can be merged.
	Behind, UpdateConflict, ReviewRequired, MergeableUnknown bool
	// UpdateFiles are the files update-branch's merge brings from the base.
	UpdateFiles []string
	// HeadRepoID and HeadRepo are the repository the head branch is in
	// (a fork's); 0 and "" mean the base repository.
	HeadRepoID int64
	HeadRepo   string
	// ClosedAt and UpdatedAt are GitHub's closed_at and updated_at (zero:
	// none); States are the closes and reopens, oldest first (the timeline).
	ClosedAt, UpdatedAt time.Time
	States              []StateEvent
}

// LabelChange is a label added to or removed from a PR, at a time.
type LabelChange struct {
	Label string
	Added bool
	At    time.Time
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
	// StartedAt is when its latest attempt started (zero: CreatedAt).
	StartedAt time.Time
	Artifacts []Artifact
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
	// Jobs are the run's jobs; nil gives a completed run DefaultJobs.
	Jobs []Job
	// Earlier are the jobs of its attempts before the latest, oldest
	// first: listed only with filter=all, each job's id its attempt's
	// (run×1000 + 100×attempt + its index), never the latest's.
	Earlier [][]Job
	// DisplayTitle is the run's name (a workflow's run-name); ActorLogin
	// and ActorID who made it; Inputs a dispatched run's inputs.
	DisplayTitle string
	ActorLogin   string
	ActorID      int64
	Inputs       map[string]string
}

// Job is one job of a run.
type Job struct {
	Name       string
	Conclusion string
	// Error is the job's failure annotation, as a failed step makes one
	// (""; none); a notice annotation comes before it.
	Error  string
	Labels []string
	Took   time.Duration
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
	// Lost makes the request as GitHub would (a merge is merged, a branch
	// updated), then loses its answer: the connection is closed, or, with
	// Status, that status is answered instead (a proxy's 502). With Hold's
	// wait (HoldAnswer) the answer is lost once the wait ends.
	Lost  bool
	Times int // how many requests it applies to; 0 means every one
	// Skip is how many requests on the route pass untouched before it
	// applies.
	Skip int
	// Match, when set, narrows the fault to the route's requests whose
	// body holds it (a GraphQL mutation's name); the others pass, and are
	// neither skipped nor counted.
	Match string
	used  int
	seen  int
	// hold, when set (Hold), keeps the request waiting until it is closed;
	// arrived is closed when the request starts waiting.
	hold, arrived chan struct{}
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

// Hold makes the next request on route wait until release is called (or
// its client gives up), then answers it as usual. arrived is closed once
// that request is waiting: a test orders what happens while a read is slow
// without sleeping. release may be called more than once.
func (f *Fake) Hold(route string) (arrived <-chan struct{}, release func()) {
	fl := Fault{Pass: true, Times: 1, hold: make(chan struct{}), arrived: make(chan struct{})}
	f.Inject(route, fl)
	var once sync.Once
	return fl.arrived, func() { once.Do(func() { close(fl.hold) }) }
}

// HoldThen makes the next request on route wait until release is called
// (or its client gives up), then answers it with fault (its Status, Header
// and Body): a test orders what happens while a request is slow, then has
// GitHub refuse it (a secondary rate limit, say).
func (f *Fake) HoldThen(route string, fault Fault) (arrived <-chan struct{}, release func()) {
	fault.Times, fault.Pass, fault.Lost = 1, false, false
	fault.hold, fault.arrived = make(chan struct{}), make(chan struct{})
	f.Inject(route, fault)
	var once sync.Once
	return fault.arrived, func() { once.Do(func() { close(fault.hold) }) }
}

// HoldAnswer makes the next request on route as GitHub would, then holds
// its answer until release is called (or its client gives up) and loses
// it (Fault.Lost): arrived is closed once the request was made. A test
// stops opsbot meanwhile, as a crash between GitHub's act and opsbot's
// record of it.
func (f *Fake) HoldAnswer(route string) (arrived <-chan struct{}, release func()) {
	fl := Fault{Lost: true, Times: 1, hold: make(chan struct{}), arrived: make(chan struct{})}
	f.Inject(route, fl)
	var once sync.Once
	return fl.arrived, func() { once.Do(func() { close(fl.hold) }) }
}

// HoldAfter is Hold for the request after the next skip ones on route.
func (f *Fake) HoldAfter(route string, skip int) (arrived <-chan struct{}, release func()) {
	fl := Fault{Pass: true, Times: 1, Skip: skip, hold: make(chan struct{}), arrived: make(chan struct{})}
	f.Inject(route, fl)
	var once sync.Once
	return fl.arrived, func() { once.Do(func() { close(fl.hold) }) }
}

// HoldAnswerAfter is HoldAnswer for the request after the next skip ones
// on route.
func (f *Fake) HoldAnswerAfter(route string, skip int) (arrived <-chan struct{}, release func()) {
	fl := Fault{Lost: true, Times: 1, Skip: skip, hold: make(chan struct{}), arrived: make(chan struct{})}
	f.Inject(route, fl)
	var once sync.Once
	return fl.arrived, func() { once.Do(func() { close(fl.hold) }) }
}

// serveLost makes a request and loses its answer (Fault.Lost).
func (f *Fake) serveLost(w http.ResponseWriter, r *http.Request, route string, h handler, rec Request, fault *Fault) {
	f.mu.Lock()
	var repo *Repo
	if o, n := r.PathValue("owner"), r.PathValue("repo"); o != "" {
		repo = f.repos[strings.ToLower(o+"/"+n)]
	}
	code := http.StatusNotFound
	if repo != nil || r.PathValue("owner") == "" {
		code, _ = h(discard{http.Header{}}, r, repo)
	}
	f.mu.Unlock()
	if fault.hold != nil {
		close(fault.arrived)
		select {
		case <-fault.hold:
		case <-r.Context().Done():
		}
	}
	if fault.Status == 0 {
		f.record(rec, code)
		drop(w)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(fault.Status)
	fmt.Fprintf(w, `{"message":"injected %d after the request was made"}`, fault.Status)
	f.record(rec, code)
}

// discard is a response nobody reads: the answer of a request whose
// answer is lost.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// RouteRerunFailed is GitHub's re-run of a run's failed jobs.
const RouteRerunFailed = "POST /repos/{owner}/{repo}/actions/runs/{id}/rerun-failed-jobs"

// RouteDeleteRef is the route of a GraphQL updateRefs that deletes a
// branch (its afterOid zero): counted, held and faulted apart from the
// other GraphQL asks (a branch's move is the same mutation).
const RouteDeleteRef = "POST /graphql (updateRefs: a deletion)"

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
	add("GET /repos/{owner}/{repo}/actions/runs/{id}/attempts/{attempt}/jobs", f.jobs)
	add("GET /repos/{owner}/{repo}/actions/runs/{id}/jobs", f.allJobs)
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
	add("POST /repos/{owner}/{repo}/actions/workflows/{id}/dispatches", f.workflowDispatch)
	add("POST /repos/{owner}/{repo}/actions/runs/{id}/cancel", f.cancelRun)
	add(RouteRerunFailed, f.rerunFailed)
	add("PUT /repos/{owner}/{repo}/pulls/{n}/update-branch", f.updateBranch)
	add("PUT /repos/{owner}/{repo}/pulls/{n}/merge", f.mergePull)
	add("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", f.listCheckRuns)
	add("GET /repos/{owner}/{repo}/check-runs/{id}/annotations", f.annotations)
	add("POST /repos/{owner}/{repo}/check-runs", f.createCheckRun)
	add("GET /repos/{owner}/{repo}/commits/{ref}/status", f.combinedStatus)
	add("GET /repos/{owner}/{repo}/commits/{ref}/check-suites", f.listCheckSuites)
	add("GET /repos/{owner}/{repo}/git/commits/{sha}", f.gitCommit)
	add("GET /repos/{owner}/{repo}/git/blobs/{sha}", f.blob)
	add("GET /repos/{owner}/{repo}/git/trees/{sha}", f.getTree)
	add("POST /repos/{owner}/{repo}/git/trees", f.createTree)
	add("POST /repos/{owner}/{repo}/git/commits", f.createCommit)
	add("PATCH /repos/{owner}/{repo}/git/refs/{ref...}", f.moveBranch)
	add("POST /repos/{owner}/{repo}/git/refs", f.createRef)
	add("GET /repos/{owner}/{repo}/git/matching-refs/{ref...}", f.matchingRefs)
	add("DELETE /repos/{owner}/{repo}/git/refs/{ref...}", f.deleteRef)
	add("POST /repos/{owner}/{repo}/merges", f.mergeInto)
	add("GET /repos/{owner}/{repo}/branches/{branch}", f.branch)
	add("GET /repos/{owner}/{repo}/rules/branches/{branch...}", f.branchRules)
	add("POST /graphql", f.graphql)
	f.known[RouteDeleteRef] = true
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
	// The manifest flow: GitHub's web form, then the API's conversion.
	add("POST /settings/apps/new", f.newAppFromManifest)
	add("POST /organizations/{org}/settings/apps/new", f.newAppFromManifest)
	add("POST /app-manifests/{code}/conversions", f.convertManifest)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request, route string, h handler) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	if route == "POST /graphql" && strings.Contains(string(body), "updateRefs") && strings.Contains(string(body), `"after":"`+strings.Repeat("0", 40)+`"`) {
		route = RouteDeleteRef
	}
	rec := Request{Method: r.Method, Route: route, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: string(body)}
	fault := f.takeFault(route, string(body))
	if fault != nil && fault.Lost {
		f.serveLost(w, r, route, h, rec, fault)
		return
	}
	if fault != nil {
		if fault.hold != nil {
			close(fault.arrived)
			select {
			case <-fault.hold:
			case <-r.Context().Done():
				return
			}
		}
		if fault.Delay > 0 {
			select {
			case <-time.After(fault.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if fault.Drop {
			f.record(rec, 0)
			drop(w)
			return
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
	if code == statusDrop {
		f.record(rec, 0)
		drop(w)
		return
	}

	var out []byte
	if v != nil {
		out, _ = json.Marshal(v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
	if fault != nil {
		for k, v := range fault.Header {
			w.Header().Set(k, v) // a passed answer's own (a rate limit's headers)
		}
	}
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

// drop closes the request's connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (f *Fake) takeFault(route, body string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.faults[route] {
		if fl.Match != "" && !strings.Contains(body, fl.Match) {
			continue
		}
		if fl.seen < fl.Skip {
			fl.seen++
			return nil
		}
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
