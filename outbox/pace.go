package outbox

import (
	"sort"
	"sync"
	"time"
)

// Limit is at most N sends in any window of length Per.
type Limit struct {
	N   int
	Per time.Duration
}

// Pace keeps a channel's sends within limits per budget key (GitHub's
// secondary rate limits count content-creating requests per installation):
// a send may go when, for every limit, fewer than N were made in the last
// Per. Bursts up to the limits go at once. A fifth of each limit is kept for
// commit statuses: comments, reactions and the rest stop at four fifths, so
// a flood of them leaves room for the gate's statuses even when it spends
// an hour's budget. The count lives in memory: after a restart the windows
// start empty.
type Pace struct {
	Limits []Limit
	// Key is the budget a notice counts against (default: its installation).
	Key func(n int64) int64

	mu   sync.Mutex
	sent map[int64][]time.Time // per budget, send times within the longest window, oldest first
}

func (p *Pace) key(inst int64) int64 {
	if p.Key == nil {
		return inst
	}
	return p.Key(inst)
}

func (p *Pace) longest() time.Duration {
	var d time.Duration
	for _, l := range p.Limits {
		d = max(d, l.Per)
	}
	return d
}

// reserve is the part of a limit of n kept for commit statuses.
func reserve(n int) int { return n / 5 }

// available is how many sends budget k may make now, and when none may,
// when the next one can. Without status, the statuses' reserve is not
// available.
func (p *Pace) available(k int64, now time.Time, status bool) (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := p.trim(k, now)
	avail, next := -1, time.Time{}
	for _, l := range p.Limits {
		if l.N <= 0 {
			continue // not a limit
		}
		n := l.N
		if !status {
			n -= reserve(n)
		}
		from := now.Add(-l.Per)
		c := len(ts) - sort.Search(len(ts), func(i int) bool { return ts[i].After(from) })
		a := max(n-c, 0)
		if avail < 0 || a < avail {
			avail = a
		}
		if a == 0 {
			// The window frees a send when its n-th newest send ages out.
			if at := ts[len(ts)-n].Add(l.Per); at.After(next) {
				next = at
			}
		}
	}
	if avail < 0 { // no limits
		return int(^uint(0) >> 1), time.Time{}
	}
	return avail, next
}

// trim forgets the sends no window counts any more: those older than the
// longest window, and those before the newest N of the largest limit (a
// window holding N is full whatever came before).
func (p *Pace) trim(k int64, now time.Time) []time.Time {
	ts := p.sent[k]
	cut := now.Add(-p.longest())
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(cut) })
	most := 0
	for _, l := range p.Limits {
		most = max(most, l.N)
	}
	i = max(i, len(ts)-most)
	if i > 0 {
		ts = ts[i:]
		p.sent[k] = ts
	}
	return ts
}

// record counts a send of budget k at now.
func (p *Pace) record(k int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent == nil {
		p.sent = map[int64][]time.Time{}
	}
	ts := p.sent[k]
	if len(ts) > 0 && now.Before(ts[len(ts)-1]) {
		now = ts[len(ts)-1] // keep the log in order
	}
	p.sent[k] = append(ts, now)
}
