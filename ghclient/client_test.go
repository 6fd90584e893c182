package ghclient

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/metrics"
)

const repo = "SemiAnalysisAI/InferenceX"

const (
	routeRun     = "GET /repos/{owner}/{repo}/actions/runs/{id}"
	routeComment = "POST /repos/{owner}/{repo}/issues/{n}/comments"
)

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return nil
}

func setup(t *testing.T, mod func(*Options)) (*githubtest.Fake, *Client, *sleeps, *metrics.Metrics) {
	t.Helper()
	f := githubtest.New(t)
	f.AddRepo(repo, "run-sweep.yml", 77)
	f.AddRun(repo, githubtest.Run{ID: 31147925932, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success", HeadSHA: "c1"})
	s := &sleeps{}
	m := metrics.New(nil, nil, time.Now)
	opt := Options{APIURL: f.URL, Token: "ghs_test", UserAgent: "opsbot/test", Sleep: s.sleep, Metrics: m, RequestTimeout: time.Second}
	if mod != nil {
		mod(&opt)
	}
	fac, err := NewFactory(opt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := fac.For(0)
	if err != nil {
		t.Fatal(err)
	}
	fac.SetSelf(Identity{Login: githubtest.BotLogin, ID: githubtest.BotID})
	return f, c, s, m
}

func TestTokenAndUserAgent(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatal(err)
	}
	r := f.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "Bearer ghs_test" {
		t.Errorf("Authorization = %q", got)
	}
	if got := r.Header.Get("User-Agent"); got != "opsbot/test" {
		t.Errorf("User-Agent = %q", got)
	}
}

func TestServerErrorsRetryWithBackoff(t *testing.T) {
	f, c, s, _ := setup(t, nil)
	f.Inject(routeRun, githubtest.Fault{Status: 502, Times: 2})
	run, err := c.Run(t.Context(), repo, 31147925932)
	if err != nil || run.GetID() != 31147925932 {
		t.Fatalf("Run = %v, %v", run, err)
	}
	if got := f.Count(routeRun); got != 3 {
		t.Errorf("%d requests, want 3 (two 502s, then 200)", got)
	}
	if len(s.d) != 2 || s.d[0] <= 0 || s.d[1] > 5*time.Second {
		t.Errorf("back-off waits %v", s.d)
	}
}

func TestServerErrorsAreBounded(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.Inject(routeRun, githubtest.Fault{Status: 500})
	_, err := c.Run(t.Context(), repo, 31147925932)
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("Run = %v, want the 500", err)
	}
	if got := f.Count(routeRun); got != 4 {
		t.Errorf("%d requests, want 4 (the bound)", got)
	}
}

func TestPostsAreNotRetried(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 1, "octocat", "b", "base", []string{"c1"})
	f.Inject(routeComment, githubtest.Fault{Status: 502, Times: 1})
	if _, err := c.CreateComment(t.Context(), repo, 1, "hi"); err == nil {
		t.Fatal("CreateComment succeeded through a 502")
	}
	if got := f.Count(routeComment); got != 1 {
		t.Errorf("%d POSTs, want 1: the outbox retries comments, finding what a lost answer created", got)
	}
}

func TestSecondaryRateLimitHonoursRetryAfter(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.Inject(routeRun, githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{"Retry-After": "1"},
		Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`})
	start := time.Now()
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Run after Retry-After: %v", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("retried after %v; Retry-After said 1s", waited)
	}
	if got := f.Count(routeRun); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}

func primaryLimit(reset time.Time) githubtest.Fault {
	return githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{
		"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Resource": "core",
		"X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)},
		Body: `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`}
}

func TestPrimaryRateLimitNearResetWaits(t *testing.T) {
	f, c, _, _ := setup(t, func(o *Options) { o.Sleep = sleepCtx })
	f.Inject(routeRun, primaryLimit(time.Now().Add(time.Second)))
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Run: %v (a reset 1 s away is waited for)", err)
	}
	if got := f.Count(routeRun); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}

func TestPrimaryRateLimitFarResetFailsClearly(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.Inject(routeRun, primaryLimit(time.Now().Add(time.Hour)))
	_, err := c.Run(t.Context(), repo, 31147925932)
	var rl *RateLimitError
	if !errors.As(err, &rl) || !strings.Contains(err.Error(), "rate limit exhausted until") {
		t.Fatalf("Run = %v, want a RateLimitError", err)
	}
	// Known exhausted: the next call does not even ask.
	if _, err := c.Run(t.Context(), repo, 31147925932); !errors.As(err, &rl) {
		t.Fatalf("second Run = %v", err)
	}
	if got := f.Count(routeRun); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

func TestNotFoundAfterWebhookRetriesOnce(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.Inject(routeRun, githubtest.Fault{Status: 404, Times: 1})
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Run: %v (a lagging replica's 404 is retried once)", err)
	}
	if got := f.Count(routeRun); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
	_, err := c.Run(t.Context(), repo, 999)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing run: %v, want ErrNotFound", err)
	}
	if got := f.Count(routeRun); got != 4 {
		t.Errorf("%d requests, want 4 (one retry only)", got)
	}
}

func TestTimeoutAndDroppedConnectionRetry(t *testing.T) {
	f, c, _, _ := setup(t, func(o *Options) { o.RequestTimeout = 100 * time.Millisecond })
	f.Inject(routeRun, githubtest.Fault{Delay: 2 * time.Second, Pass: true, Times: 1})
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Run after a slow answer: %v", err)
	}
	f.Inject(routeRun, githubtest.Fault{Drop: true, Times: 1})
	if _, err := c.Artifacts(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Artifacts: %v", err)
	}
	if _, err := c.Run(t.Context(), repo, 31147925932); err != nil {
		t.Fatalf("Run after a dropped connection: %v", err)
	}
}

func TestConditionalRequests(t *testing.T) {
	f, c, _, m := setup(t, nil)
	for i := 0; i < 3; i++ {
		run, err := c.Run(t.Context(), repo, 31147925932)
		if err != nil || run.GetConclusion() != "success" {
			t.Fatalf("Run %d = %v, %v", i, run, err)
		}
	}
	reqs := f.Requests()
	if len(reqs) != 3 || reqs[1].Status != 304 || reqs[2].Status != 304 || reqs[1].Header.Get("If-None-Match") == "" {
		t.Fatalf("requests: %+v", reqs)
	}
	if got := f.Reads(); got != 1 {
		t.Errorf("%d reads counted against the limit, want 1", got)
	}
	if got := testutil.ToFloat64(m.APIReqs.WithLabelValues("github", "GET /repos/{owner}/{repo}/actions/runs/{id}", "304")); got != 2 {
		t.Errorf("metric for 304s = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.RateLeft); got != 4999 {
		t.Errorf("rate limit remaining = %v", got)
	}
}

func TestRouteTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"/repos/o/r/actions/runs/123":                    "/repos/{owner}/{repo}/actions/runs/{id}",
		"/repos/o/r/collaborators/octocat/permission":    "/repos/{owner}/{repo}/collaborators/{user}/permission",
		"/api/v3/repos/o/r/issues/5/comments":            "/repos/{owner}/{repo}/issues/{n}/comments",
		"/repos/o/r/compare/a...b":                       "/repos/{owner}/{repo}/compare/{basehead}",
		"/orgs/acme/teams/reviewers/memberships/alice":   "/orgs/{org}/teams/{slug}/memberships/{user}",
		"/repos/o/r/issues/comments/9/reactions":         "/repos/{owner}/{repo}/issues/comments/{id}/reactions",
		"/repos/o/r/statuses/abc":                        "/repos/{owner}/{repo}/statuses/{sha}",
		"/repos/o/r/something-new/secret-name":           "/repos/{owner}/{repo}/{x}/{x}",
		"/repos/o/r/contents/docs/a/perf-changelog.yaml": "/repos/{owner}/{repo}/contents/{path}",
		"/repos/o/r/git/refs/heads/feature/x":            "/repos/{owner}/{repo}/git/refs/{path}",
		"/repos/o/r/git/trees/abc":                       "/repos/{owner}/{repo}/git/trees/{sha}",
		"/repos/o/r/git/commits":                         "/repos/{owner}/{repo}/git/commits",
		"/repos/o/r/git/commits/abc":                     "/repos/{owner}/{repo}/git/commits/{sha}",
	} {
		if got := RouteTemplate(in); got != want {
			t.Errorf("RouteTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWritesAndMarkerLookup(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 2512, "octocat", "b", "base", []string{"c1"})
	f.AddComment(repo, 2512, "octocat", "/reuse-sweep-run 31147925932")
	// Someone else's comment holding the marker first is not opsbot's.
	f.AddComment(repo, 2512, "octocat", "<!-- opsbot:notice=7 -->")
	ref, err := c.CreateComment(t.Context(), repo, 2512, "pinned\n<!-- opsbot:notice=7 -->")
	if err != nil || ref.ID == 0 || !strings.Contains(ref.URL, "issuecomment-") {
		t.Fatalf("CreateComment = %+v, %v", ref, err)
	}
	found, ok, err := c.FindComment(t.Context(), repo, 2512, "<!-- opsbot:notice=7 -->")
	if err != nil || !ok || found.ID != ref.ID {
		t.Fatalf("FindComment = %+v %v %v", found, ok, err)
	}
	if _, ok, _ := c.FindComment(t.Context(), repo, 2512, "<!-- opsbot:notice=8 -->"); ok {
		t.Fatal("found a marker that was never posted")
	}
	if err := c.EditComment(t.Context(), repo, ref.ID, "edited"); err != nil {
		t.Fatal(err)
	}
	if err := c.React(t.Context(), repo, ref.ID, "+1"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatus(t.Context(), repo, "c1", "success", strings.Repeat("x", 200), "", "opsbot/sweep-gate"); err != nil {
		t.Fatalf("SetStatus with a long description: %v", err)
	}
	if err := c.Dispatch(t.Context(), "acme/staging", "stage-results", map[string]any{"run-id": "1"}); err == nil {
		t.Fatal("dispatch to an unknown repository succeeded")
	}
	f.AddRepo("acme/staging", "x.yml", 1)
	if err := c.Dispatch(t.Context(), "acme/staging", "stage-results", map[string]any{"run-id": "1"}); err != nil {
		t.Fatal(err)
	}
	cs := f.Comments(repo, 2512)
	if len(cs) != 3 || cs[2].Body != "edited" {
		t.Fatalf("comments = %+v", cs)
	}
	if r := f.Reactions(ref.ID); len(r) != 1 || r[0] != "+1" {
		t.Fatalf("reactions = %v", r)
	}
	if st := f.Statuses(repo, "c1"); len(st) != 1 || len(st[0].Description) != 140 {
		t.Fatalf("statuses = %+v", st)
	}
	if d := f.Dispatches(); len(d) != 1 || d[0].EventType != "stage-results" || d[0].ClientPayload["run-id"] != "1" {
		t.Fatalf("dispatches = %+v", d)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	f, c, _, _ := setup(t, func(o *Options) { o.DryRun = true })
	f.AddPR(repo, 1, "octocat", "b", "base", []string{"c1"})
	if _, err := c.CreateComment(t.Context(), repo, 1, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatus(t.Context(), repo, "c1", "success", "x", "", "opsbot/sweep-gate"); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(""); n != 0 {
		t.Fatalf("dry run made %d requests", n)
	}
}

func TestGitHubAppInstallation(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	f := githubtest.New(t)
	f.AddRepo(repo, "run-sweep.yml", 77)
	f.AddRun(repo, githubtest.Run{ID: 5, WorkflowID: 77, Event: "pull_request", Status: "completed"})
	fac, err := NewFactory(Options{APIURL: f.URL, AppID: 1234, AppKey: pemKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fac.For(0); err == nil {
		t.Fatal("an App without an installation id made a client")
	}
	c, err := fac.For(42)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(t.Context(), repo, 5); err != nil {
		t.Fatal(err)
	}
	if f.TokensIssued() != 1 || f.Count("POST /app/installations/{id}/access_tokens") != 1 {
		t.Fatalf("tokens issued %d", f.TokensIssued())
	}
	var runReq githubtest.Request
	for _, r := range f.Requests() {
		if r.Route == routeRun {
			runReq = r
		}
	}
	if got := runReq.Header.Get("Authorization"); got != "token ghs_fake1" {
		t.Fatalf("run read with Authorization %q, want the installation token", got)
	}
	if _, err := NewFactory(Options{APIURL: f.URL, AppID: 1234, AppKey: []byte("not a key")}); err == nil {
		t.Fatal("a bad App key was accepted")
	}
	_ = fmt.Sprint()

	// The App learns its bot user; a comment it posts is its own, and one
	// by the same account performed through another App is not.
	self, err := fac.LearnSelf(t.Context())
	if err != nil || self != (Identity{Login: githubtest.BotLogin, ID: githubtest.BotID, AppID: githubtest.AppID, Type: "Bot"}) {
		t.Fatalf("LearnSelf = %+v, %v", self, err)
	}
	// Without a configured installation the bot user is read with a token
	// of the App's first installation, never unauthenticated.
	for _, r := range f.Requests() {
		if r.Route == "GET /users/{user}" && !strings.HasPrefix(r.Header.Get("Authorization"), "token ghs_fake") {
			t.Fatalf("GET %s with Authorization %q, want an installation token", r.Path, r.Header.Get("Authorization"))
		}
	}
	if f.Count("GET /app/installations") != 1 || f.Count("GET /users/{user}") != 1 {
		t.Fatalf("installations listed %d times, bot user read %d times", f.Count("GET /app/installations"), f.Count("GET /users/{user}"))
	}
	f.SetInstallations()
	if _, err := fac.LearnSelf(t.Context()); !errors.Is(err, ErrUnknownSelf) || !strings.Contains(err.Error(), "no installation") {
		t.Fatalf("LearnSelf for an App installed nowhere = %v, want ErrUnknownSelf saying so", err)
	}
	f.AddPR(repo, 7, "octocat", "b", "base", []string{"c1"})
	ref, err := c.CreateComment(t.Context(), repo, 7, "hello <!-- m -->")
	if err != nil {
		t.Fatal(err)
	}
	if found, ok, err := c.FindComment(t.Context(), repo, 7, "<!-- m -->"); err != nil || !ok || found.ID != ref.ID {
		t.Fatalf("FindComment = %+v %v %v", found, ok, err)
	}
	if self.Wrote(githubtest.BotID, 99) || !self.Wrote(githubtest.BotID, githubtest.AppID) || !self.Wrote(githubtest.BotID, 0) ||
		self.Wrote(1, githubtest.AppID) {
		t.Fatal("Wrote does not hold to the author's id and the performing App")
	}
}

// With a token opsbot learns the token's account; without an answer it
// does not know who it is.
func TestLearnSelfWithAToken(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddUser("machine", 77, "User")
	f.SetAuthenticatedUser("machine")
	fac, err := NewFactory(Options{APIURL: f.URL, Token: "ghs_test"})
	if err != nil {
		t.Fatal(err)
	}
	if self, err := fac.LearnSelf(t.Context()); err != nil || self != (Identity{Login: "machine", ID: 77, Type: "User"}) {
		t.Fatalf("LearnSelf = %+v, %v", self, err)
	}
	f.Inject("GET /user", githubtest.Fault{Status: 401, Times: 1})
	if _, err := fac.LearnSelf(t.Context()); !errors.Is(err, ErrUnknownSelf) {
		t.Fatalf("LearnSelf after a 401 = %v, want ErrUnknownSelf", err)
	}
	_ = c
}

// paginate reads every page the fake serves, in order, and stops at the
// page cap, when visit says stop, or at the first error.
func TestPaginate(t *testing.T) {
	const route = "GET /repos/{owner}/{repo}/issues/{n}/comments"
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 2512, "octocat", "b", "base", []string{"c1"})
	for i := range 5 {
		f.AddComment(repo, 2512, "octocat", fmt.Sprintf("comment %d", i))
	}
	list := func(maxPages int, visit func([]*github.IssueComment) bool) ([]string, int, error) {
		t.Helper()
		f.ResetRequests()
		var bodies []string
		opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 2}}
		err := paginate("listing the comments of PR #2512", &opt.ListOptions, maxPages,
			func() ([]*github.IssueComment, *github.Response, error) {
				return c.gh.Issues.ListComments(t.Context(), "SemiAnalysisAI", "InferenceX", 2512, opt)
			},
			func(page []*github.IssueComment) bool {
				for _, cm := range page {
					bodies = append(bodies, cm.GetBody())
				}
				return visit(page)
			})
		return bodies, f.Count(route), err
	}
	all := func([]*github.IssueComment) bool { return true }

	got, reads, err := list(10, all)
	if err != nil {
		t.Fatal(err)
	}
	if want := "comment 0,comment 1,comment 2,comment 3,comment 4"; strings.Join(got, ",") != want || reads != 3 {
		t.Fatalf("all pages: %q in %d reads, want %q in 3", got, reads, want)
	}

	got, reads, err = list(2, all)
	if err != nil || len(got) != 4 || reads != 2 {
		t.Fatalf("capped at 2 pages: %q in %d reads, %v; want 4 comments in 2 reads", got, reads, err)
	}

	got, reads, err = list(10, func([]*github.IssueComment) bool { return false })
	if err != nil || len(got) != 2 || reads != 1 {
		t.Fatalf("visit says stop: %q in %d reads, %v; want 2 comments in 1 read", got, reads, err)
	}

	f.Inject(route, githubtest.Fault{Status: http.StatusNotFound, Body: `{"message":"Not Found"}`, Times: 1})
	_, _, err = list(10, all)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "listing the comments of PR #2512") {
		t.Fatalf("a failed page: err = %v, want ErrNotFound named by what was listed", err)
	}
}

// FindComment finds opsbot's marker on the third page, reading newest
// first: the first page (for the Link header's last page), then the third.
func TestFindCommentOnALaterPage(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 2512, "octocat", "b", "base", []string{"c1"})
	f.AddComment(repo, 2512, "octocat", "<!-- opsbot:notice=9 -->") // planted by someone else: not opsbot's
	for i := range 230 {
		f.AddComment(repo, 2512, "octocat", fmt.Sprintf("comment %d", i))
	}
	want := f.AddComment(repo, 2512, githubtest.BotLogin, "pinned\n<!-- opsbot:notice=9 -->")
	f.ResetRequests()
	ref, ok, err := c.FindComment(t.Context(), repo, 2512, "<!-- opsbot:notice=9 -->")
	if err != nil || !ok || ref.ID != want.ID {
		t.Fatalf("FindComment = %+v %v %v, want comment %d", ref, ok, err, want.ID)
	}
	if got := f.Count("GET /repos/{owner}/{repo}/issues/{n}/comments"); got != 2 {
		t.Fatalf("FindComment read %d pages, want 2 (the first, then the last)", got)
	}
}

// Recovery asks whether opsbot already answered a comment by its reaction.
// Reactions of others cannot hide opsbot's behind the first page, and a
// comment with more reactions of a kind than are read counts as answered.
func TestReactedByReadsPastOthersReactions(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 1, "author", "b", "b0", []string{"c1"})
	hidden := f.AddComment(repo, 1, "maintainer", "/reuse-sweep-run 5")
	plain := f.AddComment(repo, 1, "maintainer", "/reuse-sweep-run 6")
	flooded := f.AddComment(repo, 1, "maintainer", "/reuse-sweep-run 7")
	for i := range 150 {
		f.AddReaction(repo, hidden.ID, fmt.Sprintf("crowd%d", i), "+1")
		f.AddReaction(repo, plain.ID, fmt.Sprintf("crowd%d", i), "-1")
	}
	f.AddReaction(repo, hidden.ID, githubtest.BotLogin, "+1") // on the second page
	for i := range 1001 {
		f.AddReaction(repo, flooded.ID, fmt.Sprintf("crowd%d", i), "confused")
	}
	for _, tc := range []struct {
		name string
		id   int64
		want bool
	}{
		{"opsbot's reaction behind a page of others'", hidden.ID, true},
		{"others' reactions only", plain.ID, false},
		{"more reactions of one kind than are read", flooded.ID, true},
	} {
		got, err := c.ReactedBy(t.Context(), repo, tc.id, githubtest.BotID)
		if err != nil || got != tc.want {
			t.Errorf("%s: ReactedBy = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// A write is never sent again by the client, whatever its method: a merge
// (PUT) or a branch update whose answer was lost may have been made, and a
// second one is refused as if the first had failed. Reads are retried.
func TestWritesAreNotRetried(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 1, "octocat", "b", "base", []string{"c1"})
	const routeMerge = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	const routeUpdate = "PUT /repos/{owner}/{repo}/pulls/{n}/update-branch"
	f.Inject(routeMerge, githubtest.Fault{Lost: true, Status: 502, Times: 1})
	if _, err := c.MergePR(t.Context(), repo, 1, "c1", "squash"); err == nil {
		t.Fatal("MergePR succeeded through a lost answer")
	}
	f.Inject(routeUpdate, githubtest.Fault{Status: 502, Times: 1})
	if err := c.UpdateBranch(t.Context(), repo, 1, "c1"); err == nil {
		t.Fatal("UpdateBranch succeeded through a 502")
	}
	for _, route := range []string{routeMerge, routeUpdate} {
		if got := f.Count(route); got != 1 {
			t.Errorf("%s sent %d times, want once", route, got)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if Idempotent(m) {
			t.Errorf("%s is retried", m)
		}
	}
	if !Idempotent(http.MethodGet) {
		t.Error("GET is not retried")
	}
}

// The client waits out at most five single waits of GitHub's secondary
// rate limit an hour: with the hour's spent, a limit is GitHub's answer;
// an hour later, one is waited out again (the limiter's own total never
// falls).
func TestSecondaryWaitsAreBudgetedPerHour(t *testing.T) {
	now := time.Now()
	budget := &sleepBudget{now: func() time.Time { return now }}
	f, c, _, _ := setup(t, func(o *Options) { o.SecondarySleepLimit = time.Second; o.secondaryBudget = budget })
	secondary := githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{"Retry-After": "1"},
		Body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`}
	for range 5 {
		budget.waits = append(budget.waits, sleptAt{at: now, d: time.Second}) // the hour's waits, taken
	}
	f.Inject(routeRun, secondary)
	if _, err := c.Run(t.Context(), repo, 31147925932); err == nil || f.Count(routeRun) != 1 {
		t.Fatalf("Run = %v after %d requests; want the limit, not waited out", err, f.Count(routeRun))
	}
	now = now.Add(time.Hour)
	f.Inject(routeRun, secondary)
	// go-github remembers GitHub's one second itself and refuses the read
	// without sending it until then: the read is asked until it leaves.
	var err error
	testkit.Eventually(t, "go-github's remembered limit over", func() bool {
		_, err = c.Run(t.Context(), repo, 31147925932)
		return err == nil || !strings.HasSuffix(err.Error(), "not making remote request.")
	})
	if err != nil || f.Count(routeRun) != 3 {
		t.Fatalf("Run = %v after %d requests; want the limit waited out an hour later, and the run read", err, f.Count(routeRun))
	}
}

// One request that meets a secondary limit again and again waits only as
// long as the hour's budget leaves, however often the limiter sends it
// again.
func TestSecondaryWaitsOfOneRequestAreBudgeted(t *testing.T) {
	now := time.Now()
	budget := &sleepBudget{now: func() time.Time { return now }}
	f, c, _, _ := setup(t, func(o *Options) { o.SecondarySleepLimit = time.Second; o.secondaryBudget = budget })
	for range 3 {
		budget.waits = append(budget.waits, sleptAt{at: now, d: time.Second}) // three of the hour's five seconds, spent
	}
	f.Inject(routeRun, githubtest.Fault{Status: 403, Header: map[string]string{"Retry-After": "1"},
		Body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`})
	if _, err := c.Run(t.Context(), repo, 31147925932); err == nil || f.Count(routeRun) != 3 {
		t.Fatalf("Run = %v after %d requests; want the limit after two waits (three requests)", err, f.Count(routeRun))
	}
	budget.mu.Lock()
	defer budget.mu.Unlock()
	if len(budget.waits) != 5 || budget.waits[4].d <= 0 {
		t.Fatalf("the budget noted %+v; want the two waits taken beside the three", budget.waits)
	}
}
