package server

import (
	"math"
	"sync"
	"time"
)

// AskLimiter limits gate asks per credential: a token bucket of Burst asks
// that refills at PerMinute, for each key (a static token's digest, or the
// repository of a GitHub Actions ID token). Past it an ask is answered 429
// with Retry-After, before anything is read from GitHub. Keys are only
// those of credentials that were verified, so there are as many buckets as
// tokens and served repositories.
type AskLimiter struct {
	Burst     int
	PerMinute int
	Now       func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// Take takes one ask from key's bucket; when it is empty it returns false
// and how long until the next ask is allowed.
func (l *AskLimiter) Take(key string) (bool, time.Duration) {
	if l == nil || l.Burst <= 0 || l.PerMinute <= 0 {
		return true, 0
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	rate := float64(l.PerMinute) / 60 // asks a second
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: float64(l.Burst), at: now}
		l.buckets[key] = b
	}
	if d := now.Sub(b.at).Seconds(); d > 0 {
		b.tokens = math.Min(float64(l.Burst), b.tokens+d*rate)
	}
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	return false, wait
}
