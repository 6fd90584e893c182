package ghclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"opsbot/internal/githubtest"
	"opsbot/state"
)

const routeStatus = "POST /repos/{owner}/{repo}/statuses/{sha}"

func limitSender(t *testing.T) (*githubtest.Fake, *Sender, *Client) {
	t.Helper()
	f, _, s, _ := setup(t, nil)
	fac, err := NewFactory(Options{APIURL: f.URL, Token: "t", Sleep: s.sleep, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fac.SetSelf(Identity{Login: githubtest.BotLogin, ID: githubtest.BotID})
	c, err := fac.For(0)
	if err != nil {
		t.Fatal(err)
	}
	return f, &Sender{Clients: fac}, c
}

func gateStatus() *state.Notice {
	return &state.Notice{ID: 1, Kind: state.NoticeStatus, Repo: repo, PR: 1, SHA: "c1",
		State: "success", Description: "sweep: no reuse authorization", Context: "opsbot/sweep-gate"}
}

// A secondary-limit answer asking to wait ten years holds the installation
// for at most MaxSecondaryWait: the sender's retry, and go-github's own
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
	if !r.Global || r.GiveUp || r.At.Sub(now) > MaxSecondaryWait {
		t.Fatalf("retry = %+v (in %v), want the installation held at most %v", r, r.At.Sub(now), MaxSecondaryWait)
	}
	_, err = c.Run(t.Context(), repo, 31147925932)
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) && (abuse.RetryAfter == nil || *abuse.RetryAfter > MaxSecondaryWait) {
		t.Fatalf("a later read is refused for %v, want at most %v", abuse.GetRetryAfter(), MaxSecondaryWait)
	}
}

// A primary-limit answer with a reset in 2100 holds the installation for at
// most MaxPrimaryWait: the sender's retry, and the limiter that refuses
// later reads until the reset.
func TestFarFuturePrimaryResetIsCappedForTheSenderAndTheClient(t *testing.T) {
	f, s, c := limitSender(t)
	f.Inject(routeStatus, primaryLimit(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)))
	now := time.Now()
	_, err := s.Send(t.Context(), gateStatus(), 1)
	r := s.Retry(err, 1, now)
	if !r.Global || r.GiveUp || r.At.Sub(now) > MaxPrimaryWait+time.Minute {
		t.Fatalf("retry after %v = %+v (in %v), want the installation held at most %v", err, r, r.At.Sub(now), MaxPrimaryWait)
	}
	_, err = c.Run(t.Context(), repo, 31147925932)
	var rl *RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("a later read = %v, want the limit remembered (until its capped reset)", err)
	}
	if d := rl.Reset.Sub(now); d > MaxPrimaryWait+time.Minute {
		t.Fatalf("a later read is refused for %v, want at most %v", d, MaxPrimaryWait)
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
	if !r.Global || r.GiveUp || r.At.Sub(now) > MaxSecondaryWait {
		t.Fatalf("a secondary limit by its message: retry = %+v, want the installation held at most %v", r, MaxSecondaryWait)
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

// A retry finds opsbot's comment on a PR with more than 50 pages of
// comments (an outsider's flood): pages are read newest first, so the
// recent comment is found at once and is not posted twice.
func TestFindCommentReadsNewestPagesFirst(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 2512, "octocat", "b", "base", []string{"c1"})
	for i := range 5200 {
		f.AddComment(repo, 2512, "octocat", fmt.Sprintf("noise %d", i))
	}
	ref, err := c.CreateComment(t.Context(), repo, 2512, "pinned\n<!-- opsbot:notice=7.ab -->")
	if err != nil {
		t.Fatal(err)
	}
	f.ResetRequests()
	found, ok, err := c.FindComment(t.Context(), repo, 2512, "<!-- opsbot:notice=7.ab -->")
	if err != nil || !ok || found.ID != ref.ID {
		t.Fatalf("FindComment = %+v %v %v, want the comment posted last", found, ok, err)
	}
	if n := f.Count("GET /repos/{owner}/{repo}/issues/{n}/comments"); n > 2 {
		t.Fatalf("%d pages read to find the newest comment, want 2 (the first, for the Link header, and the last)", n)
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
