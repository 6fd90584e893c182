// Package outbox delivers the notices the state holds for one channel
// (GitHub or Slack): in order within a PR, each attempt recorded before it
// is made, with retries whose timing the channel's sender decides. Time is
// injected, so an outage can be replayed without waiting.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state"
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
	NoticesDropped(ids []uint64, reason string) error
	Subscribe() <-chan struct{}
}

// Retry is a sender's verdict on a failed attempt.
type Retry struct {
	At     time.Time // when to try again (at most Loop.MaxWait away)
	GiveUp bool      // the notice can never be sent: keep it among the failed
	// Global: every notice of the same pause scope (Loop.Scope: by default
	// its Pace budget, GitHub's installation) waits until At (a rate limit).
	Global bool
	// Wide, with Global: the whole channel waits (a bad token).
	Wide bool
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

// DryRunner is a Sender that may only log what it is given (a dry run):
// what it "sends" is counted logged, not sent.
type DryRunner interface {
	DryRun() bool
}

// Loop drains one channel.
type Loop struct {
	Store   Store
	Channel string
	Sender  Sender
	Log     *slog.Logger
	Now     func() time.Time
	// Count observes outcomes: sent, logged (a dry run), retried, failed
	// (metrics).
	Count func(outcome string)
	// Parallel is how many PRs' notices are sent at once (default 16).
	Parallel int

	// Pace, when set, keeps sends within rate limits per budget, shared
	// fairly among PRs (GitHub's secondary rate limits).
	Pace *Pace
	// Scope names the notices that wait together when one's Retry is
	// Global. Default: its Pace budget (GitHub's installation); without a
	// Pace, the whole channel.
	Scope func(n *state.Notice) string
	// MaxWait bounds every wait: a retry time a sender asks for, and one
	// stored by an earlier run (clamped when read). A longer wait is taken
	// to the cap, then the notice is tried again. Default an hour.
	MaxWait time.Duration
	// MaxReactions bounds a PR's queued reactions: beyond it, the oldest
	// are dropped (kept among the failed notices, audited). Default 50.
	MaxReactions int

	mu     sync.Mutex
	wide   time.Time            // when a channel-wide pause ends
	pauses map[string]time.Time // when each paused scope's pause ends
	wake   <-chan struct{}
	waits  map[uint64]waiting // notices waiting for an earlier one
	cursor string             // the last lane given a send in the last paced pass
}

// Defaults of Loop's bounds.
const (
	DefaultMaxWait      = time.Hour
	DefaultMaxReactions = 50
)

func (l *Loop) maxWait() time.Duration {
	if l.MaxWait > 0 {
		return l.MaxWait
	}
	return DefaultMaxWait
}

func (l *Loop) scopeOf(n *state.Notice) string {
	switch {
	case l.Scope != nil:
		return l.Scope(n)
	case l.Pace != nil:
		return strconv.FormatInt(l.Pace.key(n.Installation), 10)
	}
	return ""
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
// holds back the gate's status (statuses stay in order among themselves);
// its reactions go in one of their own too, so a flood of them never holds
// back the PR's decision comments and replies.
type lane struct {
	key     string
	scope   string // the pause scope (Loop.Scope)
	budget  int64  // the Pace budget its notices count against
	status  bool   // commit statuses: may use the budget's reserve
	notices []*state.Notice
	quota   int // how many it may send this pass (Pace); -1: no bound
}

func laneKey(n *state.Notice) string {
	switch n.Kind {
	case state.NoticeStatus:
		return n.Key() + "\x00status"
	case state.NoticeReaction:
		return n.Key() + "\x00reaction"
	}
	return n.Key()
}

// Drain makes one pass over the channel's notices and returns when the
// earliest held-back notice is due (zero when none waits). Lanes (see lane)
// are sent in parallel (Parallel at once, default 16), each in order,
// stopping at the first notice that waits. With a Pace, each pass shares
// the sends the budget allows now among the lanes that have a notice due,
// one at a time in turn (round robin, starting after the lane served last),
// so one busy PR cannot starve another's status. A lane whose pause scope
// waits (a rate limit of its installation) is skipped until the pause ends;
// other scopes go on. Retry times stored beyond MaxWait are capped first,
// and a PR's reaction backlog beyond MaxReactions is cut.
func (l *Loop) Drain(ctx context.Context) time.Time {
	if at := l.widePause(); !at.IsZero() {
		return at
	}
	notices, err := l.Store.Outbox(l.Channel)
	if err != nil {
		l.Log.Error("reading the outbox", "channel", l.Channel, "err", err)
		return l.now().Add(5 * time.Second)
	}
	l.forgetWaits(notices)
	var lanes []*lane
	byKey := map[string]*lane{}
	limit := l.now().Add(l.maxWait())
	for i := range notices {
		n := &notices[i]
		if n.NextAt.After(limit) {
			// Stored by an earlier run, or before waits were capped.
			if err := l.Store.NoticeRetry(n.ID, limit, n.LastError); err != nil {
				l.Log.Error("capping a stored retry time", "notice", n.ID, "err", err)
			}
			n.NextAt = limit
		}
		k := laneKey(n)
		ln := byKey[k]
		if ln == nil {
			ln = &lane{key: k, quota: -1, status: n.Kind == state.NoticeStatus, scope: l.scopeOf(n)}
			if l.Pace != nil {
				ln.budget = l.Pace.key(n.Installation)
			}
			byKey[k] = ln
			lanes = append(lanes, ln)
		}
		ln.notices = append(ln.notices, n)
	}
	for _, ln := range lanes {
		l.dropReactions(ln)
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
		if ctx.Err() != nil || !l.widePause().IsZero() {
			break
		}
		if at := l.paused(ln.scope); !at.IsZero() {
			later(at)
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(ln *lane) {
			defer func() { <-sem; wg.Done() }()
			for i, n := range ln.notices {
				if ctx.Err() != nil {
					return
				}
				if at := l.paused(ln.scope); !at.IsZero() {
					later(at)
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
					l.pause(r.Wide, ln.scope, r.At)
				}
				return
			}
		}(ln)
	}
	wg.Wait()
	if at := l.widePause(); !at.IsZero() {
		return at
	}
	return next
}

// dropReactions keeps a PR's reaction lane within MaxReactions: the oldest
// queued reactions beyond it are dropped (a flood of commands from
// outsiders), kept among the failed notices and audited.
func (l *Loop) dropReactions(ln *lane) {
	most := l.MaxReactions
	if most <= 0 {
		most = DefaultMaxReactions
	}
	if len(ln.notices) <= most || ln.notices[0].Kind != state.NoticeReaction {
		return
	}
	extra := ln.notices[:len(ln.notices)-most]
	ids := make([]uint64, len(extra))
	for i, n := range extra {
		ids[i] = n.ID
	}
	reason := fmt.Sprintf("dropped: more than %d reactions were queued on the PR", most)
	if err := l.Store.NoticesDropped(ids, reason); err != nil {
		l.Log.Error("dropping the oldest queued reactions", "repo", extra[0].Repo, "pr", extra[0].PR, "err", err)
		return
	}
	l.Log.Warn("dropped the oldest queued reactions of a PR", "channel", l.Channel, "repo", extra[0].Repo,
		"pr", extra[0].PR, "count", len(ids), "kept", most)
	for range ids {
		l.count("dropped")
	}
	ln.notices = ln.notices[len(extra):]
}

// perPass bounds a lane's sends in one paced pass: a pass ends when its
// slowest lane is done, and a PR whose first notice arrives meanwhile waits
// for the next, so a backlog is sent a few at a time (at GitHub's latency,
// a pass is a few seconds at most).
const perPass = 4

// share gives each lane its quota of the Pace budget for this pass (at most
// perPass), one send at a time to each lane with a notice due, in turn,
// starting after the last lane given a send last time (so every lane gets
// its turn however many more lanes there are than a window allows). It
// returns the lanes that send.
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
		if at := l.paused(ln.scope); !at.IsZero() {
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
	var last *lane
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
			last = ln
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
	if last != nil {
		l.mu.Lock()
		l.cursor = last.key
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

// widePause is when a channel-wide pause (a bad token) ends, or zero.
func (l *Loop) widePause() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wide.After(l.now()) {
		return l.wide
	}
	return time.Time{}
}

// paused is when the pause of scope (a rate limit), or a channel-wide one,
// ends; zero when neither holds.
func (l *Loop) paused(scope string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	at := l.pauses[scope]
	if l.wide.After(at) {
		at = l.wide
	}
	if at.After(now) {
		return at
	}
	return time.Time{}
}

// pause holds scope (or, wide, the whole channel) until until, at most MaxWait away.
func (l *Loop) pause(wide bool, scope string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if limit := now.Add(l.maxWait()); until.After(limit) {
		until = limit
	}
	if wide {
		if until.After(l.wide) {
			l.wide = until
		}
		return
	}
	if l.pauses == nil {
		l.pauses = map[string]time.Time{}
	}
	for k, at := range l.pauses {
		if !at.After(now) {
			delete(l.pauses, k)
		}
	}
	if until.After(l.pauses[scope]) {
		l.pauses[scope] = until
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
	if errors.Is(err, state.ErrNotFound) {
		// Withdrawn since the outbox was read (a stage request cancelled
		// before its dispatch): nothing to send, and the lane goes on.
		l.done(n.ID)
		return Retry{}, true
	}
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
		if d, ok := l.Sender.(DryRunner); ok && d.DryRun() {
			l.count("logged") // a dry run: written to the log, not sent
		} else {
			l.count("sent")
		}
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
	if limit := l.now().Add(l.maxWait()); r.At.After(limit) {
		r.At = limit // a longer wait is taken to the cap, then asked again
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

// forgetWaits clears the waits of notices no longer in the outbox (sent,
// given up or dropped another way), so the map does not grow.
func (l *Loop) forgetWaits(notices []state.Notice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waits) == 0 {
		return
	}
	present := make(map[uint64]bool, len(notices))
	for i := range notices {
		present[notices[i].ID] = true
	}
	for id := range l.waits {
		if !present[id] {
			delete(l.waits, id)
		}
	}
}

// Waiting is how many notices the loop holds a wait for (in memory).
func (l *Loop) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waits)
}

func (l *Loop) done(id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waits, id)
}
