package ghclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gofri/go-github-ratelimit/v2/github_ratelimit/github_primary_ratelimit"

	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

// RateLimitError says GitHub's primary rate limit is spent until Reset.
type RateLimitError struct {
	Reset time.Time
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("GitHub API rate limit exhausted until %s (in %s)",
		e.Reset.UTC().Format("15:04:05 UTC"), time.Until(e.Reset).Round(time.Second))
}

type ctxKey int

const retry404Key ctxKey = iota

// AfterWebhook marks reads that follow a webhook: a 404 is retried once,
// since GitHub's replicas may not have the object yet.
func AfterWebhook(ctx context.Context) context.Context {
	return context.WithValue(ctx, retry404Key, true)
}

// retryTransport retries reads (GET, HEAD, OPTIONS) on network errors and
// 5xx with exponential back-off and jitter, bounded in tries and time;
// waits out a primary rate limit whose reset is near; and retries one 404
// after a webhook. A write (POST, PUT, PATCH, DELETE) is never sent again
// here, whatever its method promises: a merge or a branch update whose
// answer was lost may have been made, and sent again it is refused ("not
// mergeable") as if it had failed; a dispatch sent again starts a second
// run. Whoever writes decides what a lost answer means from what GitHub
// shows on a read (the merge sequence re-reads the PR; the outbox finds a
// comment it may have posted by its marker before posting it again). A
// request GitHub refused for its secondary rate limit, which it did not
// take, is waited out and sent again by the rate limiter below this one.
type retryTransport struct {
	base       http.RoundTripper
	maxTries   int
	maxElapsed time.Duration
	nearReset  time.Duration
	initial    time.Duration
	sleep      func(ctx context.Context, d time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	p := &retryPolicy{t: t, ctx: ctx, idempotent: Idempotent(req.Method),
		retry404: req.Method == http.MethodGet && ctx.Value(retry404Key) != nil}
	exp := backoff.NewExponentialBackOff()
	exp.InitialInterval = t.initial
	exp.MaxInterval = 5 * time.Second
	p.wait = &injectedSleep{BackOff: exp, sleep: t.sleep, ctx: ctx}
	var prev *http.Response
	resp, err := backoff.Retry(ctx, func() (*http.Response, error) {
		if prev != nil { // the attempt before this one, which is retried: its answer is not used
			io.Copy(io.Discard, io.LimitReader(prev.Body, 1<<16))
			prev.Body.Close()
			prev = nil
		}
		r, err := rewind(req)
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		resp, err := t.base.RoundTrip(r)
		if err := p.rateLimit(err); err != nil {
			return nil, err
		}
		if !p.retry(resp, err) {
			if err != nil {
				return nil, backoff.Permanent(err)
			}
			return resp, nil
		}
		prev = resp
		if err == nil {
			err = errRetryStatus
		}
		return resp, err
	}, backoff.WithBackOff(p.wait), backoff.WithMaxTries(uint(max(1, t.maxTries))),
		backoff.WithMaxElapsedTime(t.maxElapsed))
	if errors.Is(err, errRetryStatus) {
		return resp, nil // the last answer, a 5xx or a 404, is the caller's to read
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, err
}

// Idempotent reports whether a request of method is sent again on a
// network error or a 5xx: only reads are (retryTransport).
func Idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// errRetryStatus marks an answer whose status is retried (a 5xx, a 404
// after a webhook); when the tries are spent that answer is returned.
var errRetryStatus = errors.New("ghclient: retried status")

// retryPolicy is what is retried, and the two cases beyond back-off: a
// primary rate limit whose reset is near is waited out once, and a GET
// after a webhook retries one 404 (GitHub may not have the object yet).
type retryPolicy struct {
	t           *retryTransport
	ctx         context.Context
	idempotent  bool
	retry404    bool
	waitedReset bool
	wait        *injectedSleep
}

// rateLimit handles a primary rate limit: nil when err is none; an error
// to retry at once after the near reset was waited out; else a permanent
// *RateLimitError.
func (p *retryPolicy) rateLimit(err error) error {
	var rl *github_primary_ratelimit.RateLimitReachedError
	if !errors.As(err, &rl) || rl.ResetTime == nil {
		return nil
	}
	wait := time.Until(*rl.ResetTime) + time.Second
	if p.waitedReset || wait > p.t.nearReset {
		// Refused by the limiter before it was sent, or by GitHub under
		// its limit: not taken either way, and an act's mark is kept.
		return backoff.Permanent(seq.Unsent(p.ctx, &RateLimitError{Reset: *rl.ResetTime}))
	}
	p.waitedReset = true
	if err := p.t.sleep(p.ctx, wait); err != nil {
		return backoff.Permanent(seq.Unsent(p.ctx, err)) // refused, and not sent again: an act's mark is kept
	}
	p.wait.skip = true           // waited already: no back-off on top
	return backoff.RetryAfter(0) // try again now
}

// retry reports whether an attempt's outcome is tried again: a network
// error or a 5xx of an idempotent request, or the one 404 after a webhook.
func (p *retryPolicy) retry(resp *http.Response, err error) bool {
	var notSent *seq.NotSent
	switch {
	case errors.As(err, &notSent):
		return false // an act's last stop check stopped it: sent again, it is stopped again
	case err != nil:
		return p.ctx.Err() == nil && p.idempotent && !errors.Is(err, ErrNoCredentials)
	case resp.StatusCode >= 500:
		return p.idempotent
	case resp.StatusCode == http.StatusNotFound && p.retry404:
		p.retry404 = false
		return true
	}
	return false
}

// injectedSleep waits each back-off with the transport's sleep (tests give
// one that does not wait) and tells backoff.Retry to wait no more.
type injectedSleep struct {
	backoff.BackOff
	sleep func(ctx context.Context, d time.Duration) error
	ctx   context.Context
	skip  bool // the next wait was made already (a rate limit's reset)
}

func (b *injectedSleep) NextBackOff() time.Duration {
	if b.skip {
		b.skip = false
		return 0
	}
	d := b.BackOff.NextBackOff()
	if d == backoff.Stop {
		return d
	}
	if err := b.sleep(b.ctx, d); err != nil {
		return backoff.Stop
	}
	return 0
}

// rewind gives each attempt a fresh copy of the request body.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.GetBody == nil {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, nil
}

// rewindTransport makes sure a request retried by a layer above (the
// secondary rate limiter re-sends the same request) carries its body again.
type rewindTransport struct{ base http.RoundTripper }

func (t rewindTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, err := rewind(req)
	if err != nil {
		return nil, err
	}
	return t.base.RoundTrip(r)
}

// etagTransport makes repeated GETs conditional: GitHub answers 304, which
// does not count against the rate limit, and the cached body is served.
type etagTransport struct {
	base http.RoundTripper
	max  int

	mu    sync.Mutex
	cache map[string]*cached
	order []string
}

type cached struct {
	etag   string
	header http.Header
	body   []byte
}

func (t *etagTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return t.base.RoundTrip(req)
	}
	key := req.URL.String()
	t.mu.Lock()
	c := t.cache[key]
	t.mu.Unlock()
	if c != nil {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", c.etag)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusNotModified && c != nil {
		resp.Body.Close()
		h := c.header.Clone()
		for _, k := range []string{"X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Ratelimit-Limit"} {
			if v := resp.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor,
			ProtoMinor: resp.ProtoMinor, Header: h, Body: io.NopCloser(bytes.NewReader(c.body)),
			ContentLength: int64(len(c.body)), Request: req}, nil
	}
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || etag == "" || resp.ContentLength > 4<<20 {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) <= 4<<20 {
		t.mu.Lock()
		if _, ok := t.cache[key]; !ok {
			t.order = append(t.order, key)
			if len(t.order) > t.max {
				delete(t.cache, t.order[0])
				t.order = t.order[1:]
			}
		}
		t.cache[key] = &cached{etag: etag, header: resp.Header.Clone(), body: body}
		t.mu.Unlock()
	}
	return resp, nil
}

// metricsTransport counts each request by route template and status, and
// keeps the rate limit remaining.
type metricsTransport struct {
	base http.RoundTripper
	m    *metrics.Metrics
}

func (t metricsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if t.m == nil {
		return resp, err
	}
	status := "error"
	if resp != nil {
		status = strconv.Itoa(resp.StatusCode)
		if v, perr := strconv.Atoi(resp.Header.Get("X-Ratelimit-Remaining")); perr == nil {
			t.m.RateLeft.Set(float64(v))
		}
	}
	t.m.APIReqs.WithLabelValues("github", req.Method+" "+RouteTemplate(req.URL.Path), status).Inc()
	return resp, err
}

// tokenTransport authenticates with a token.
type tokenTransport struct {
	base  http.RoundTripper
	token string
	ua    string
}

func (t tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	r.Header.Set("User-Agent", t.ua)
	return t.base.RoundTrip(r)
}

var afterName = map[string]string{
	"collaborators": "{user}", "memberships": "{user}", "runs": "{id}", "pulls": "{n}", "issues": "{n}",
	"comments": "{id}", "workflows": "{file}", "installations": "{id}", "compare": "{basehead}",
	"statuses": "{sha}", "commits": "{sha}", "teams": "{slug}", "orgs": "{org}", "artifacts": "{id}",
	"attempts": "{n}", "jobs": "{id}", "users": "{user}", "trees": "{sha}", "blobs": "{sha}", "branches": "{branch}",
}

// RouteTemplate turns a request path into its route template, so metrics
// never carry a repository, a user or a number.
func RouteTemplate(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	// A GitHub Enterprise base URL puts /api/v3 first.
	if len(segs) >= 2 && segs[0] == "api" && segs[1] == "v3" {
		segs = segs[2:]
	}
	out := make([]string, 0, len(segs))
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		switch {
		case s == "repos" && i+2 < len(segs)+1:
			out = append(out, "repos", "{owner}", "{repo}")
			i += 2
		case s == "rules" && i+2 < len(segs) && segs[i+1] == "branches":
			return "/" + strings.Join(append(out, "rules", "branches", "{branch}"), "/")
		case s == "api" && i+1 < len(segs) && segs[i+1] == "graphql":
			return "/graphql"
		case (s == "contents" || s == "refs" || s == "matching-refs") && i+1 < len(segs):
			// A file's path, or a ref's name: one label however deep.
			return "/" + strings.Join(append(out, s, "{path}"), "/")
		case afterName[s] != "":
			out = append(out, s)
			if i+1 < len(segs) && afterName[segs[i+1]] == "" && !knownWord[segs[i+1]] {
				out = append(out, afterName[s])
				i++
			}
		case knownWord[s]:
			out = append(out, s)
		default:
			out = append(out, "{x}")
		}
	}
	return "/" + strings.Join(out, "/")
}

var knownWord = map[string]bool{
	"permission": true, "actions": true, "reactions": true, "dispatches": true, "access_tokens": true,
	"app": true, "timeline": true, "rate_limit": true, "user": true, "git": true, "merges": true,
	"graphql": true,
}

// lastCheckTransport asks an act's last stop check (seq.Sending) right
// before each request goes out, below every wait the client takes (the
// rate limiters', the back-off's): a stop stored while the client waited
// sends nothing. It tells the check whether GitHub refused the request
// (a 4xx), so that the act knows whether anything of it may be taken.
//
// Within an act, the App's installation token is had first (warm), so no
// request of GitHub's sits between the check and the act's own; and a
// step whose time ran out while the client waited sends nothing.
type lastCheckTransport struct {
	base http.RoundTripper
	warm func(ctx context.Context) error // nil: a token needs no fetching
}

func (t lastCheckTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	unsent := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, sent or not
		}
		return nil, err
	}
	if seq.InAct(ctx) {
		if err := ctx.Err(); err != nil {
			return unsent(seq.Unsent(ctx, err))
		}
		if t.warm != nil {
			if err := t.warm(ctx); err != nil {
				return unsent(seq.Unsent(ctx, fmt.Errorf("getting the installation's token: %w", err)))
			}
		}
	}
	answered, err := seq.Sending(ctx)
	if err != nil {
		return unsent(err)
	}
	resp, err := t.base.RoundTrip(req)
	answered(err == nil && resp.StatusCode >= 400 && resp.StatusCode < 500)
	return resp, err
}
