package outbox

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Backoff is the one back-off schedule of opsbot's senders: the wait before
// try n (from 1) grows exponentially from initial, with jitter, and is
// capped at most. Each sender's Retry and the outbox's own wait for an
// earlier notice use it.
func Backoff(n int, initial, most time.Duration) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = initial
	b.MaxInterval = most
	d := b.NextBackOff()
	for i := 1; i < n && i < 40; i++ {
		d = b.NextBackOff()
	}
	return d
}

// RetryDelay is the senders' schedule for a failed send: from 1 s, capped at 5 minutes.
func RetryDelay(attempt int) time.Duration { return Backoff(attempt, time.Second, 5*time.Minute) }
