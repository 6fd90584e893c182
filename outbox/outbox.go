// Package outbox delivers the notices the state holds for one channel
// (GitHub or Slack): in order within a PR, each attempt recorded before it
// is made, with retries whose timing the channel's sender decides. Time is
// injected, so an outage can be replayed without waiting.
package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"opsbot/state"
)

// ErrWaiting is what a sender returns when a notice must wait for an
// earlier one (the comment an edit targets, the thread's parent message).
var ErrWaiting = errors.New("outbox: waiting for an earlier notice")

// Store is what the loop needs of the state.
type Store interface {
	Outbox(channel string) ([]state.Notice, error)
	BeginAttempt(id uint64) (int, error)
	NoticeSent(n *state.Notice, ref state.SentRef) error
	NoticeRetry(id uint64, next time.Time, lastErr string) error
	NoticeFailed(id uint64, reason string) error
	Subscribe() <-chan struct{}
}

// Retry is a sender's verdict on a failed attempt.
type Retry struct {
	At     time.Time // when to try again
	GiveUp bool      // the notice can never be sent: keep it among the failed
	Global bool      // the whole channel waits until At (a workspace-wide rate limit)
}

// Preparer is a Sender that can tell, before an attempt is recorded,
// that a notice must wait for an earlier one (Ready returns ErrWaiting).
// Such waits write nothing and back off.
type Preparer interface {
	Ready(n *state.Notice) error
}

// Sender sends one channel's notices.
type Sender interface {
	// Send delivers n; attempt counts from 1. An attempt after the first
	// must first look for what an earlier one may already have done.
	Send(ctx context.Context, n *state.Notice, attempt int) (state.SentRef, error)
	// Retry decides what follows a failed attempt.
	Retry(err error, attempt int, now time.Time) Retry
}

// Loop drains one channel.
type Loop struct {
	Store   Store
	Channel string
	Sender  Sender
	Log     *slog.Logger
	Now     func() time.Time
	// Count observes outcomes: sent, retried, failed (metrics).
	Count func(outcome string)
	// Parallel is how many PRs' notices are sent at once (default 16).
	Parallel int

	// Pace, when set, keeps sends within rate limits per budget, shared
	// fairly among PRs (GitHub's secondary rate limits).
	Pace *Pace

	mu          sync.Mutex
	pausedUntil time.Time
	wake        <-chan struct{}
	waits       map[uint64]waiting // notices waiting for an earlier one
	cursor      string             // the lane served first in the last paced pass
}

type waiting struct {
	n     int
	until time.Time
}

// Run drains until ctx ends, waking when notices are added or a retry is due.
func (l *Loop) Run(ctx context.Context) {
	if l.wake == nil {
		l.wake = l.Store.Subscribe()
	}
	for {
		next := l.Drain(ctx)
		wait := time.Minute
		if !next.IsZero() {
			wait = max(next.Sub(l.now()), 10*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (l *Loop) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

func (l *Loop) count(outcome string) {
	if l.Count != nil {
		l.Count(outcome)
	}
}

// lane is the notices sent one after another, in order: a PR's commit
// statuses go in a lane of their own, so a comment that must wait never
// holds back the gate's status (statuses stay in order among themselves).
type lane struct {
	key     string
	budget  int64 // the Pace budget its notices count against
	status  bool  // commit statuses: may use the budget's reserve
	notices []*state.Notice
	quota   int // how many it may send this pass (Pace); -1: no bound
}

func laneKey(n *state.Notice) string {
	if n.Kind == state.NoticeStatus {
		return n.Key() + "\x00status"
	}
	return n.Key()
}

// Drain makes one pass over the channel's notices and returns when the
// earliest held-back notice is due (zero when none waits). Lanes (see lane)
// are sent in parallel (Parallel at once, default 16), each in order,
// stopping at the first notice that waits. With a Pace, each pass shares
// the sends the budget allows now among the lanes that have a notice due,
// one at a time in turn (round robin, starting after the lane served last),
// so one busy PR cannot starve another's status.
func (l *Loop) Drain(ctx context.Context) time.Time {
	if at := l.paused(); !at.IsZero() {
		return at
	}
	notices, err := l.Store.Outbox(l.Channel)
	if err != nil {
		l.Log.Error("reading the outbox", "channel", l.Channel, "err", err)
		return l.now().Add(5 * time.Second)
	}
	var lanes []*lane
	byKey := map[string]*lane{}
	for i := range notices {
		n := &notices[i]
		k := laneKey(n)
		ln := byKey[k]
		if ln == nil {
			ln = &lane{key: k, quota: -1, status: n.Kind == state.NoticeStatus}
			if l.Pace != nil {
				ln.budget = l.Pace.key(n.Installation)
			}
			byKey[k] = ln
			lanes = append(lanes, ln)
		}
		ln.notices = append(ln.notices, n)
	}
	var mu sync.Mutex
	var next time.Time
	later := func(at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if l.Pace != nil {
		lanes = l.share(lanes, later)
	}
	par := l.Parallel
	if par <= 0 {
		par = 16
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, ln := range lanes {
		if ctx.Err() != nil || !l.paused().IsZero() {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(ln *lane) {
			defer func() { <-sem; wg.Done() }()
			for i, n := range ln.notices {
				if ctx.Err() != nil || !l.paused().IsZero() {
					return
				}
				if at := l.dueAt(n); at.After(l.now()) {
					later(at)
					return
				}
				if ln.quota >= 0 && i >= ln.quota {
					// The budget's share for this pass is spent: look
					// again when its window frees a send.
					if _, at := l.Pace.available(ln.budget, l.now(), ln.status); !at.IsZero() {
						later(at)
					} else {
						later(l.now())
					}
					return
				}
				r, ok := l.sendOne(ctx, n, ln.budget)
				if ok {
					continue
				}
				later(r.At)
				if r.Global {
					l.pause(r.At)
				}
				return
			}
		}(ln)
	}
	wg.Wait()
	if at := l.paused(); !at.IsZero() {
		return at
	}
	return next
}

// perPass bounds a lane's sends in one paced pass: a pass ends when its
// slowest lane is done, and a PR whose first notice arrives meanwhile waits
// for the next, so a backlog is sent a few at a time (at GitHub's latency,
// a pass is a few seconds at most).
const perPass = 4

// share gives each lane its quota of the Pace budget for this pass (at most
// perPass), one send at a time to each lane with a notice due, in turn,
// starting after the lane served first last time. It returns the lanes that
// send.
func (l *Loop) share(lanes []*lane, later func(time.Time)) []*lane {
	now := l.now()
	slices.SortFunc(lanes, func(a, b *lane) int { return strings.Compare(a.key, b.key) })
	l.mu.Lock()
	cursor := l.cursor
	l.mu.Unlock()
	start := sort.Search(len(lanes), func(i int) bool { return lanes[i].key > cursor })
	lanes = append(lanes[start:len(lanes):len(lanes)], lanes[:start]...)
	// Per budget: what statuses may use, and what the other notices may
	// (the same less the statuses' reserve).
	type pool struct {
		all, other         int
		freeAll, freeOther time.Time
	}
	pools := map[int64]*pool{}
	var ready []*lane
	for _, ln := range lanes {
		ln.quota = 0
		if at := l.dueAt(ln.notices[0]); at.After(now) {
			later(at)
			continue
		}
		if pools[ln.budget] == nil {
			p := &pool{}
			p.all, p.freeAll = l.Pace.available(ln.budget, now, true)
			p.other, p.freeOther = l.Pace.available(ln.budget, now, false)
			pools[ln.budget] = p
		}
		ready = append(ready, ln)
	}
	var first *lane
	for gave := true; gave; {
		gave = false
		for _, ln := range ready {
			p := pools[ln.budget]
			if ln.quota >= min(len(ln.notices), perPass) || ln.status && p.all <= 0 || !ln.status && p.other <= 0 {
				continue
			}
			// Every send counts in the windows, whoever makes it.
			p.all--
			p.other--
			ln.quota++
			gave = true
			if first == nil {
				first = ln
			}
		}
	}
	var out []*lane
	for _, ln := range ready {
		p := pools[ln.budget]
		free := p.freeOther
		if ln.status {
			free = p.freeAll
		}
		if ln.quota > 0 {
			out = append(out, ln)
		} else if free.After(now) {
			later(free)
		}
	}
	if first != nil {
		l.mu.Lock()
		l.cursor = first.key
		l.mu.Unlock()
	}
	return out
}

// dueAt is when a notice may next be tried: its recorded retry time, or the
// end of its current wait for an earlier notice.
func (l *Loop) dueAt(n *state.Notice) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.waits[n.ID]; ok && w.until.After(n.NextAt) {
		return w.until
	}
	return n.NextAt
}

// paused is when a channel-wide pause (a rate limit) ends, or zero.
func (l *Loop) paused() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pausedUntil.After(l.now()) {
		return l.pausedUntil
	}
	return time.Time{}
}

func (l *Loop) pause(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
}

func (l *Loop) sendOne(ctx context.Context, n *state.Notice, budget int64) (Retry, bool) {
	log := l.Log.With("channel", l.Channel, "notice", n.ID, "kind", n.Kind, "repo", n.Repo, "pr", n.PR)
	if p, ok := l.Sender.(Preparer); ok {
		// Asked before the attempt is recorded: waiting writes nothing.
		if err := p.Ready(n); errors.Is(err, ErrWaiting) {
			return Retry{At: l.wait(n.ID)}, false
		} else if err != nil {
			log.Error("checking whether a notice may be sent", "err", err)
			return Retry{At: l.now().Add(time.Second)}, false
		}
	}
	attempt, err := l.Store.BeginAttempt(n.ID)
	if err != nil {
		log.Error("recording a send attempt", "err", err)
		return Retry{At: l.now().Add(time.Second)}, false
	}
	ref, err := l.Sender.Send(ctx, n, attempt)
	if l.Pace != nil {
		// Counted when the answer is in, so never earlier than GitHub counts it.
		l.Pace.record(budget, l.now())
	}
	if err == nil {
		if err := l.Store.NoticeSent(n, ref); err != nil {
			log.Error("recording a sent notice", "err", err)
			return Retry{At: l.now().Add(time.Second)}, false
		}
		l.done(n.ID)
		l.count("sent")
		return Retry{}, true
	}
	if errors.Is(err, ErrWaiting) {
		return Retry{At: l.wait(n.ID)}, false
	}
	r := l.Sender.Retry(err, attempt, l.now())
	if r.GiveUp {
		log.Error("notice refused for good; kept among the failed notices", "err", err, "attempts", attempt)
		l.count("failed")
		if ferr := l.Store.NoticeFailed(n.ID, err.Error()); ferr != nil {
			log.Error("recording a failed notice", "err", ferr)
		}
		l.done(n.ID)
		return Retry{}, true
	}
	log.Warn("sending a notice failed; will retry", "err", err, "attempt", attempt, "at", r.At)
	l.count("retried")
	if rerr := l.Store.NoticeRetry(n.ID, r.At, err.Error()); rerr != nil {
		log.Error("recording a retry", "err", rerr)
	}
	return r, false
}

// wait notes one more wait of notice id for an earlier notice and returns
// when to look again: backing off from 100 ms to a minute, kept in memory
// (a wait records nothing).
func (l *Loop) wait(id uint64) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waits == nil {
		l.waits = map[uint64]waiting{}
	}
	w := l.waits[id]
	w.n++
	w.until = l.now().Add(Backoff(w.n, 100*time.Millisecond, time.Minute))
	l.waits[id] = w
	return w.until
}

func (l *Loop) done(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waits, id)
}
