package server

import (
	"math"
	"sync"
	"time"
)

// RateLimiter is a token bucket per key: Burst at once, refilled at
// PerMinute. The gate API keys asks by credential (a static token's sum,
// or the repository of a verified GitHub Actions ID token: as many buckets
// as tokens and served repositories); the audit page keys failed sign-ins
// by client address.
type RateLimiter struct {
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

// Take takes one from key's bucket; when it is empty it returns false and
// how long until the next is allowed.
func (l *RateLimiter) Take(key string) (bool, time.Duration) {
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
	if len(l.buckets) > maxBuckets {
		l.forgetFull(now, rate)
	}
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

// Empty reports whether key's bucket has nothing left now, without taking.
func (l *RateLimiter) Empty(key string) (bool, time.Duration) {
	if l == nil || l.Burst <= 0 || l.PerMinute <= 0 {
		return false, 0
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	rate := float64(l.PerMinute) / 60
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return false, 0
	}
	tokens := math.Min(float64(l.Burst), b.tokens+now.Sub(b.at).Seconds()*rate)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / rate * float64(time.Second))
}

// maxBuckets bounds the keys kept: past it, buckets that have refilled
// (which say nothing a new bucket would not) are forgotten.
const maxBuckets = 10000

func (l *RateLimiter) forgetFull(now time.Time, rate float64) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*rate >= float64(l.Burst) {
			delete(l.buckets, k)
		}
	}
}
