package githubtest

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ContentLimits are GitHub's secondary rate limits on requests that create
// content (comments, edits, reactions, statuses, dispatches): at most
// PerMinute in any window of Minute and PerHour in any window of Hour.
// GitHub's are 80 a minute and 500 an hour; tests scale the windows down.
type ContentLimits struct {
	PerMinute, PerHour int
	Minute, Hour       time.Duration
}

// SecondaryLimitBody is what GitHub answers, with 403, past a secondary limit.
const SecondaryLimitBody = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 1234:5678:9ABC:DEF0:12345678.","documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`

var contentRoutes = map[string]bool{
	"POST /repos/{owner}/{repo}/issues/{n}/comments":            true,
	"PATCH /repos/{owner}/{repo}/issues/comments/{id}":          true,
	"POST /repos/{owner}/{repo}/issues/comments/{id}/reactions": true,
	"POST /repos/{owner}/{repo}/statuses/{sha}":                 true,
	"POST /repos/{owner}/{repo}/dispatches":                     true,
}

type limiter struct {
	mu       sync.Mutex
	lim      *ContentLimits
	sent     []time.Time // content requests accepted, oldest first
	refusals int
}

// LimitContent makes the fake enforce secondary limits on content-creating
// requests: past them it answers 403 with GitHub's body and a retry-after
// (whole seconds, at least 1) and counts the refusal.
func (f *Fake) LimitContent(l ContentLimits) {
	f.limits.mu.Lock()
	defer f.limits.mu.Unlock()
	f.limits.lim = &l
}

// SecondaryRefusals counts the requests refused under the content limits.
func (f *Fake) SecondaryRefusals() int {
	f.limits.mu.Lock()
	defer f.limits.mu.Unlock()
	return f.limits.refusals
}

// refuseOverLimit answers a content request past the limits and reports
// whether it did; an accepted one is counted.
func (f *Fake) refuseOverLimit(w http.ResponseWriter, route string, rec Request) bool {
	lm := &f.limits
	lm.mu.Lock()
	if lm.lim == nil || !contentRoutes[route] {
		lm.mu.Unlock()
		return false
	}
	now := time.Now()
	l := lm.lim
	for len(lm.sent) > 0 && !lm.sent[0].After(now.Add(-max(l.Hour, l.Minute))) {
		lm.sent = lm.sent[1:]
	}
	var wait time.Duration
	for _, win := range []struct {
		n   int
		per time.Duration
	}{{l.PerMinute, l.Minute}, {l.PerHour, l.Hour}} {
		if win.n <= 0 {
			continue
		}
		c := 0
		for i := len(lm.sent) - 1; i >= 0 && lm.sent[i].After(now.Add(-win.per)); i-- {
			c++
		}
		if c >= win.n {
			wait = max(wait, lm.sent[len(lm.sent)-win.n].Add(win.per).Sub(now))
		}
	}
	if wait == 0 {
		lm.sent = append(lm.sent, now)
		lm.mu.Unlock()
		return false
	}
	lm.refusals++
	lm.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(wait, time.Second).Seconds()))))
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, SecondaryLimitBody)
	f.record(rec, http.StatusForbidden)
	return true
}
