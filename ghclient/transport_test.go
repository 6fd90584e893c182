package ghclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An act's step whose time runs out while the client waits to send a
// request again (GitHub refused the first under its secondary limit):
// nothing more leaves, and the act's mark is this process's again, so the
// next step sends it instead of reading GitHub for an act never taken.
func TestLastCheckSendsNothingOnceTheStepsTimeRanOut(t *testing.T) {
	sent := 0
	rt := lastCheckTransport{base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Retry-After": {"60"}}, Body: http.NoBody, Request: r}, nil
	})}
	var marks seq.Marks
	mark := marks.New()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := seq.Wakeup{Marks: &marks}.Send(ctx, seq.Act{Mark: mark, Do: func(ctx context.Context) error {
		req := httptest.NewRequest(http.MethodPut, "http://github.invalid/repos/o/r/pulls/1/merge", nil).WithContext(ctx)
		if _, err := rt.RoundTrip(req); err != nil {
			return err
		}
		cancel() // the step's time runs out while the limiter waits
		_, err := rt.RoundTrip(req)
		return err // as go-github answers once the context ended
	}})
	if !errors.Is(err, context.Canceled) || sent != 1 || !marks.Fresh(mark) {
		t.Fatalf("err %v, sent %d, mark fresh %v; want the context's end, one request, the mark kept", err, sent, marks.Fresh(mark))
	}
}

// A rate limit the client knows of before an act's request would leave
// (gofri's from a refused read, go-github's from a read's headers or its
// secondary limit): the request is never made, and the act's mark stays
// this process's, so the step sends it once the limit is over instead of
// reading GitHub for an act never taken.
func TestAKnownRateLimitKeepsTheActsMark(t *testing.T) {
	const routeMerge = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	far := time.Now().Add(30 * time.Minute)
	cases := map[string]githubtest.Fault{
		"the limiter's, from a refused read": primaryLimit(far),
		"go-github's, from a read's headers": {Pass: true, Times: 1, Header: map[string]string{
			"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Resource": "core",
			"X-RateLimit-Reset": strconv.FormatInt(far.Unix(), 10)}},
		"go-github's secondary limit": {Status: 403, Times: 1, Header: map[string]string{"Retry-After": "600"},
			Body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`},
	}
	for name, limit := range cases {
		t.Run(name, func(t *testing.T) {
			f, c, _, _ := setup(t, nil)
			f.AddPR(repo, 1, "octocat", "b", "base", []string{"c1"})
			f.Inject(routeRun, limit)
			c.Run(t.Context(), repo, 31147925932) // the read that teaches the client the limit
			var marks seq.Marks
			mark := marks.New()
			_, err := seq.Wakeup{Marks: &marks}.Send(t.Context(), seq.Act{Mark: mark, Do: func(ctx context.Context) error {
				_, err := c.MergePR(ctx, repo, 1, "c1", "squash")
				return err
			}})
			if err == nil || !marks.Fresh(mark) || f.Count(routeMerge) != 0 {
				t.Fatalf("err %v, mark fresh %v, merges sent %d; want the limit's error, the mark kept, nothing sent",
					err, marks.Fresh(mark), f.Count(routeMerge))
			}
		})
	}
}

// An act's own request GitHub refuses under a rate limit (its primary
// limit far off, its secondary limit longer than the client waits, or a
// near reset the step's time ran out waiting for) was not taken: the mark
// stays this process's, and the act is sent again once the limit is over.
func TestAnActRefusedUnderARateLimitKeepsItsMark(t *testing.T) {
	const routeMerge = "PUT /repos/{owner}/{repo}/pulls/{n}/merge"
	secondary := githubtest.Fault{Status: 403, Times: 1, Header: map[string]string{"Retry-After": "600"},
		Body: `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`}
	for name, c := range map[string]struct {
		limit githubtest.Fault
		sleep func(context.Context, time.Duration) error
	}{
		"the primary limit, far off":            {limit: primaryLimit(time.Now().Add(30 * time.Minute))},
		"the secondary limit, beyond the waits": {limit: secondary},
		"a near reset, the step's time run out": {limit: primaryLimit(time.Now().Add(2 * time.Second)),
			sleep: func(context.Context, time.Duration) error { return context.DeadlineExceeded }},
	} {
		t.Run(name, func(t *testing.T) {
			f, cl, _, _ := setup(t, func(o *Options) {
				if c.sleep != nil {
					o.Sleep = c.sleep
				}
			})
			f.AddPR(repo, 1, "octocat", "b", "base", []string{"c1"})
			f.Inject(routeMerge, c.limit)
			var marks seq.Marks
			mark := marks.New()
			_, err := seq.Wakeup{Marks: &marks}.Send(t.Context(), seq.Act{Mark: mark, Do: func(ctx context.Context) error {
				_, err := cl.MergePR(ctx, repo, 1, "c1", "squash")
				return err
			}})
			if err == nil || !marks.Fresh(mark) || f.Count(routeMerge) != 1 || len(f.Merges()) != 0 {
				t.Fatalf("err %v, mark fresh %v, merges asked %d, made %d; want the limit's error, the mark kept, one ask refused",
					err, marks.Fresh(mark), f.Count(routeMerge), len(f.Merges()))
			}
		})
	}
}
