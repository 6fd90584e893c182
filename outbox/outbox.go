// Package outbox delivers the notices the state holds for one channel
// (GitHub or Slack): in order within a PR, each attempt recorded before it
// is made, with retries whose timing the channel's sender decides. Time is
// injected, so an outage can be replayed without waiting.
package outbox

import (
	"context"
	"errors"
	"log/slog"
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

	mu          sync.Mutex
	pausedUntil time.Time
	wake        <-chan struct{}
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

// Drain makes one pass over the channel's notices and returns when the
// earliest held-back notice is due (zero when none waits). Notices of
// different PRs are sent in parallel (Parallel at once, default 16); those
// of one PR one after another, in order, stopping at the first that waits.
func (l *Loop) Drain(ctx context.Context) time.Time {
	if at := l.paused(); !at.IsZero() {
		return at
	}
	notices, err := l.Store.Outbox(l.Channel)
	if err != nil {
		l.Log.Error("reading the outbox", "channel", l.Channel, "err", err)
		return l.now().Add(5 * time.Second)
	}
	var keys []string
	byKey := map[string][]*state.Notice{}
	for i := range notices {
		k := notices[i].Key()
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], &notices[i])
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
	par := l.Parallel
	if par <= 0 {
		par = 16
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for _, k := range keys {
		if ctx.Err() != nil || !l.paused().IsZero() {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(list []*state.Notice) {
			defer func() { <-sem; wg.Done() }()
			for _, n := range list {
				if ctx.Err() != nil || !l.paused().IsZero() {
					return
				}
				if n.NextAt.After(l.now()) {
					later(n.NextAt)
					return
				}
				r, ok := l.sendOne(ctx, n)
				if ok {
					continue
				}
				later(r.At)
				if r.Global {
					l.pause(r.At)
				}
				return
			}
		}(byKey[k])
	}
	wg.Wait()
	if at := l.paused(); !at.IsZero() {
		return at
	}
	return next
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

func (l *Loop) sendOne(ctx context.Context, n *state.Notice) (Retry, bool) {
	log := l.Log.With("channel", l.Channel, "notice", n.ID, "kind", n.Kind, "repo", n.Repo, "pr", n.PR)
	attempt, err := l.Store.BeginAttempt(n.ID)
	if err != nil {
		log.Error("recording a send attempt", "err", err)
		return Retry{At: l.now().Add(time.Second)}, false
	}
	ref, err := l.Sender.Send(ctx, n, attempt)
	if err == nil {
		if err := l.Store.NoticeSent(n, ref); err != nil {
			log.Error("recording a sent notice", "err", err)
			return Retry{At: l.now().Add(time.Second)}, false
		}
		l.count("sent")
		return Retry{}, true
	}
	if errors.Is(err, ErrWaiting) {
		return Retry{At: l.now().Add(100 * time.Millisecond)}, false
	}
	r := l.Sender.Retry(err, attempt, l.now())
	if r.GiveUp {
		log.Error("notice refused for good; kept among the failed notices", "err", err, "attempts", attempt)
		l.count("failed")
		if ferr := l.Store.NoticeFailed(n.ID, err.Error()); ferr != nil {
			log.Error("recording a failed notice", "err", ferr)
		}
		return Retry{}, true
	}
	log.Warn("sending a notice failed; will retry", "err", err, "attempt", attempt, "at", r.At)
	l.count("retried")
	if rerr := l.Store.NoticeRetry(n.ID, r.At, err.Error()); rerr != nil {
		log.Error("recording a retry", "err", rerr)
	}
	return r, false
}
