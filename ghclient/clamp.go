package ghclient

import (
	"net/http"
	"strconv"
	"time"
)

// The longest waits opsbot takes from GitHub: a secondary rate limit's
// retry-after (GitHub asks for a minute or a few), and a primary limit's
// reset (the window is an hour). A longer answer is waited out to the cap,
// then the request is made again and GitHub answers anew.
const (
	MaxSecondaryWait = 15 * time.Minute
	MaxPrimaryWait   = time.Hour
)

// clampTransport caps the waits a GitHub answer asks for before anything
// above it reads them (gofri's limiters, go-github's own memory of a limit,
// the sender's retry): a retry-after beyond MaxSecondaryWait, or an
// x-ratelimit-reset beyond MaxPrimaryWait from now, is rewritten to the cap,
// so one answer cannot hold an installation's client for longer.
type clampTransport struct {
	base http.RoundTripper
}

func (t clampTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if resp == nil || resp.Header == nil {
		return resp, err
	}
	clampHeaders(resp.Header, time.Now())
	return resp, err
}

// clampHeaders caps Retry-After and X-RateLimit-Reset in h.
func clampHeaders(h http.Header, now time.Time) {
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			if secs > int64(MaxSecondaryWait/time.Second) || secs < 0 {
				h.Set("Retry-After", strconv.FormatInt(int64(MaxSecondaryWait/time.Second), 10))
			}
		} else if at, err := http.ParseTime(v); err == nil && at.Sub(now) > MaxSecondaryWait {
			h.Set("Retry-After", strconv.FormatInt(int64(MaxSecondaryWait/time.Second), 10))
		}
	}
	if v := h.Get("X-Ratelimit-Reset"); v != "" {
		if unix, err := strconv.ParseInt(v, 10, 64); err == nil {
			if limit := now.Add(MaxPrimaryWait); time.Unix(unix, 0).After(limit) {
				h.Set("X-Ratelimit-Reset", strconv.FormatInt(limit.Unix(), 10))
			}
		}
	}
}
