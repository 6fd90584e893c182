package ghsend

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/state"
)

const repo = "SemiAnalysisAI/InferenceX"

const (
	routeComment = "POST /repos/{owner}/{repo}/issues/{n}/comments"
	routeStatus  = "POST /repos/{owner}/{repo}/statuses/{sha}"
)

// setup serves a fake GitHub with the repository and a run, and gives the
// clients for it, as opsbot's own token (the client's back-off does not
// sleep).
func setup(t *testing.T) (*githubtest.Fake, *ghclient.Factory) {
	t.Helper()
	f := githubtest.New(t)
	f.AddRepo(repo, "run-sweep.yml", 77)
	f.AddRun(repo, githubtest.Run{ID: 31147925932, WorkflowID: 77, Event: "pull_request", Status: "completed", Conclusion: "success", HeadSHA: "c1"})
	fac, err := ghclient.NewFactory(ghclient.Options{APIURL: f.URL, Token: "ghs_test", UserAgent: "opsbot/test", RequestTimeout: time.Second,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	fac.SetSelf(ghclient.Identity{Login: githubtest.BotLogin, ID: githubtest.BotID})
	return f, fac
}

func limitSender(t *testing.T) (*githubtest.Fake, *Sender, *ghclient.Client) {
	t.Helper()
	f, fac := setup(t)
	c, err := fac.For(0)
	if err != nil {
		t.Fatal(err)
	}
	return f, &Sender{Clients: fac}, c
}

func primaryLimit(reset time.Time) githubtest.Fault {
	return githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{
		"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Resource": "core",
		"X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)},
		Body: `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`}
}

// A retried status finds the one an earlier attempt set and does not set it again.
func TestStatusRetryFindsEarlierAttempt(t *testing.T) {
	f, fac := setup(t)
	s := &Sender{Clients: fac}
	n := &state.Notice{ID: 1, Kind: state.NoticeStatus, Repo: repo, SHA: "c2", State: "success",
		Description: "skip: reusing run 1, authorized by @m", Context: "opsbot/sweep-gate"}
	if _, err := s.Send(t.Context(), n, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), n, 2); err != nil { // as after a crash between sending and recording
		t.Fatal(err)
	}
	if st := f.Statuses(repo, "c2"); len(st) != 1 {
		t.Fatalf("%d statuses, want 1", len(st))
	}
	n.Description = "sweep: no reuse authorization" // a different status is set
	if _, err := s.Send(t.Context(), n, 2); err != nil {
		t.Fatal(err)
	}
	if st := f.Statuses(repo, "c2"); len(st) != 2 {
		t.Fatalf("%d statuses, want 2", len(st))
	}
}

// What follows a failed send: a validation error is given up at once, other
// client errors after MaxAttempts, server errors never.
func TestSenderRetryPolicy(t *testing.T) {
	status := func(code int) error {
		return &github.ErrorResponse{Response: &http.Response{StatusCode: code, Request: &http.Request{Method: "POST", URL: &url.URL{}}}}
	}
	s := &Sender{MaxAttempts: 3}
	now := time.Now()
	for _, c := range []struct {
		err     error
		attempt int
		giveUp  bool
	}{
		{status(422), 1, true},
		{status(400), 1, true},
		{status(404), 1, false},
		{status(404), 3, true},
		{status(409), 2, false},
		{status(500), 50, false},
		{status(429), 50, false},
		{status(403), 2, false}, // no rate limit (a locked conversation): refused after MaxAttempts
		{status(403), 3, true},
		{errors.New("connection reset"), 50, false},
	} {
		r := s.Retry(c.err, c.attempt, now)
		if r.GiveUp != c.giveUp {
			t.Errorf("%v at attempt %d: give up = %v, want %v", c.err, c.attempt, r.GiveUp, c.giveUp)
		}
		if !r.GiveUp && !r.At.After(now) {
			t.Errorf("%v at attempt %d: retry at %v, not after now", c.err, c.attempt, r.At)
		}
	}
}

// A secondary rate limit the transport did not wait out (a 403 naming it,
// or a 429) holds the whole channel for as long as GitHub asked:
// retry-after, else until x-ratelimit-reset.
func TestSenderRetryHonoursSecondaryLimit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	resp := func(code int, h map[string]string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}, Request: &http.Request{Method: "POST", URL: &url.URL{}}}
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return r
	}
	after := 90 * time.Second
	s := &Sender{}
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"403 with retry-after", &github.AbuseRateLimitError{Response: resp(403, nil), RetryAfter: &after}, 90 * time.Second},
		{"403 with x-ratelimit-reset", &github.AbuseRateLimitError{Response: resp(403, map[string]string{
			"X-Ratelimit-Reset": strconv.FormatInt(now.Add(2*time.Minute).Unix(), 10)})}, 2 * time.Minute},
		{"429 with retry-after", &github.ErrorResponse{Response: resp(429, map[string]string{"Retry-After": "30"})}, 30 * time.Second},
		{"429 with x-ratelimit-reset", &github.ErrorResponse{Response: resp(429, map[string]string{
			"X-Ratelimit-Reset": strconv.FormatInt(now.Add(45*time.Second).Unix(), 10)})}, 45 * time.Second},
		{"429 naming no time", &github.ErrorResponse{Response: resp(429, nil)}, time.Minute},
	} {
		r := s.Retry(fmt.Errorf("posting a comment: %w", c.err), 1, now)
		if r.GiveUp || !r.Global || !r.At.Equal(now.Add(c.want)) {
			t.Errorf("%s: retry = %+v, want the channel held until %v", c.name, r, now.Add(c.want))
		}
	}
}

// An edit whose comment is still to be sent waits (without an attempt);
// one whose comment was refused for good or whose record is gone is posted
// as a new comment, found again by its own marker on a retry.
func TestEditOfAMissingCommentPostsANewOne(t *testing.T) {
	f, fac := setup(t)
	f.AddPR(repo, 7, "author", "b", "base", []string{"c1"})
	st := state.NoticePending
	s := &Sender{Clients: fac,
		SentRef: func(uint64) (state.SentRef, bool, error) { return state.SentRef{}, false, nil },
		Status:  func(uint64) (state.NoticeState, error) { return st, nil }}
	n := &state.Notice{ID: 9, Kind: state.NoticeEdit, Repo: repo, PR: 7, EditOf: 3, Body: "@m staged run 1: https://x", Nonce: "0123abcd"}
	if err := s.Ready(n); !errors.Is(err, outbox.ErrWaiting) {
		t.Fatalf("Ready with the comment pending = %v, want ErrWaiting", err)
	}
	for _, st = range []state.NoticeState{state.NoticeGaveUp, state.NoticeGone} {
		if err := s.Ready(n); err != nil {
			t.Fatalf("Ready with the comment in state %v = %v", st, err)
		}
	}
	for attempt := 1; attempt <= 2; attempt++ { // the second as after a crash before the send was recorded
		ref, err := s.Send(t.Context(), n, attempt)
		if err != nil || ref.CommentID == 0 {
			t.Fatalf("attempt %d: %+v, %v", attempt, ref, err)
		}
	}
	cs := f.Comments(repo, 7)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "staged run 1") || !strings.Contains(cs[0].Body, n.Marker()) {
		t.Fatalf("comments = %+v, want one new comment with the edit's text and marker", cs)
	}
}

func gateStatus() *state.Notice {
	return &state.Notice{ID: 1, Kind: state.NoticeStatus, Repo: repo, PR: 1, SHA: "c1",
		State: "success", Description: "sweep: no reuse authorization", Context: "opsbot/sweep-gate"}
}

// A secondary-limit answer asking to wait ten years holds the installation
// for at most ghclient.MaxSecondaryWait: the sender's retry, and go-github's own
// memory of the limit that refuses later reads without asking.
func TestFarFutureRetryAfterIsCappedForTheSenderAndTheClient(t *testing.T) {
	f, s, c := limitSender(t)
	f.Inject(routeStatus, githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{"Retry-After": "315360000"},
		Body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`})
	now := time.Now()
	_, err := s.Send(t.Context(), gateStatus(), 1)
	if err == nil {
		t.Fatal("the refused status was reported sent")
	}
	r := s.Retry(err, 1, now)
	if !r.Global || r.GiveUp || r.At.Sub(now) > ghclient.MaxSecondaryWait {
		t.Fatalf("retry = %+v (in %v), want the installation held at most %v", r, r.At.Sub(now), ghclient.MaxSecondaryWait)
	}
	_, err = c.Run(t.Context(), repo, 31147925932)
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) && (abuse.RetryAfter == nil || *abuse.RetryAfter > ghclient.MaxSecondaryWait) {
		t.Fatalf("a later read is refused for %v, want at most %v", abuse.GetRetryAfter(), ghclient.MaxSecondaryWait)
	}
}

// A primary-limit answer with a reset in 2100 holds the installation for at
// most ghclient.MaxPrimaryWait: the sender's retry, and the limiter that refuses
// later reads until the reset.
func TestFarFuturePrimaryResetIsCappedForTheSenderAndTheClient(t *testing.T) {
	f, s, c := limitSender(t)
	f.Inject(routeStatus, primaryLimit(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)))
	now := time.Now()
	_, err := s.Send(t.Context(), gateStatus(), 1)
	r := s.Retry(err, 1, now)
	if !r.Global || r.GiveUp || r.At.Sub(now) > ghclient.MaxPrimaryWait+time.Minute {
		t.Fatalf("retry after %v = %+v (in %v), want the installation held at most %v", err, r, r.At.Sub(now), ghclient.MaxPrimaryWait)
	}
	_, err = c.Run(t.Context(), repo, 31147925932)
	var rl *ghclient.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("a later read = %v, want the limit remembered (until its capped reset)", err)
	}
	if d := rl.Reset.Sub(now); d > ghclient.MaxPrimaryWait+time.Minute {
		t.Fatalf("a later read is refused for %v, want at most %v", d, ghclient.MaxPrimaryWait)
	}
}

// A 403 that is no rate limit (a locked conversation) is a refusal: tried
// MaxAttempts times, never holding the installation, then given up. A 403
// whose message names a secondary limit, with no documentation URL, is a
// rate limit (the installation waits, capped).
func TestPlain403IsRefusedAndSecondaryLimitMessageIsALimit(t *testing.T) {
	f, s, _ := limitSender(t)
	f.Inject(routeComment, githubtest.Fault{Status: 403, Times: 1,
		Body: `{"message":"Unable to create comment because issue is locked.","documentation_url":"https://docs.github.com/articles/locking-conversations/"}`})
	n := &state.Notice{ID: 2, Kind: state.NoticeComment, Repo: repo, PR: 1, Body: "skip", Nonce: "ab"}
	_, err := s.Send(t.Context(), n, 1)
	if err == nil {
		t.Fatal("the refused comment was reported sent")
	}
	now := time.Now()
	for attempt := 1; attempt <= 5; attempt++ {
		r := s.Retry(err, attempt, now)
		if r.Global {
			t.Fatalf("a locked conversation held the installation: %+v", r)
		}
		if r.GiveUp != (attempt == 5) {
			t.Fatalf("attempt %d: give up = %v, want it at the 5th", attempt, r.GiveUp)
		}
	}
	f.Inject(routeComment, githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{"Retry-After": "86400"},
		Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`})
	_, err = s.Send(t.Context(), n, 1)
	r := s.Retry(err, 50, now)
	if !r.Global || r.GiveUp || r.At.Sub(now) > ghclient.MaxSecondaryWait {
		t.Fatalf("a secondary limit by its message: retry = %+v, want the installation held at most %v", r, ghclient.MaxSecondaryWait)
	}
}

// A reaction to a comment its author deleted is given up at once: the
// comment does not come back, and each try spends the installation's budget.
func TestReactionToDeletedCommentGivesUpAtOnce(t *testing.T) {
	_, s, _ := limitSender(t)
	n := &state.Notice{ID: 3, Kind: state.NoticeReaction, Repo: repo, PR: 1, TargetComment: 424242, Reaction: "-1"}
	_, err := s.Send(t.Context(), n, 1)
	if err == nil {
		t.Fatal("a reaction to a missing comment was reported sent")
	}
	if r := s.Retry(err, 1, time.Now()); !r.GiveUp {
		t.Fatalf("retry = %+v, want it given up at the first attempt (%v)", r, err)
	}
}

// The description is cut on a rune boundary, so the status a crash left
// behind is recognised on the retry (the cut text is the same both times).
func TestLongDescriptionIsCutOnARuneAndFoundAgain(t *testing.T) {
	f, s, _ := limitSender(t)
	n := gateStatus()
	n.Description = strings.Repeat("a", 136) + strings.Repeat("é", 10)
	if _, err := s.Send(t.Context(), n, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), n, 2); err != nil { // as after a crash
		t.Fatal(err)
	}
	sts := f.Statuses(repo, "c1")
	if len(sts) != 1 {
		t.Fatalf("%d statuses set, want 1: the retry did not recognise the first", len(sts))
	}
}

// A dispatch carries its notice id in client_payload (notice-id), so the
// staging side can tell a retried dispatch from a new one.
func TestDispatchCarriesItsNoticeID(t *testing.T) {
	f, s, _ := limitSender(t)
	f.AddRepo("acme/staging", "x.yml", 1)
	n := &state.Notice{ID: 41, Kind: state.NoticeDispatch, Repo: "acme/staging", EventType: "stage-results",
		Payload: map[string]any{"run-id": "1"}}
	if _, err := s.Send(t.Context(), n, 1); err != nil {
		t.Fatal(err)
	}
	d := f.Dispatches()
	if len(d) != 1 || d[0].ClientPayload["notice-id"] != "41" || d[0].ClientPayload["run-id"] != "1" {
		t.Fatalf("dispatches = %+v, want notice-id 41 beside run-id", d)
	}
	if _, ok := n.Payload["notice-id"]; ok {
		t.Fatal("the notice's own payload was changed")
	}
}
