// Package worker drains the inbox: deliveries of one PR are processed in
// arrival order, one at a time; different PRs are processed in parallel. A
// panic or an error in one delivery never stops the others: transient
// failures retry with back-off, and a delivery that keeps failing is moved to
// the dead-letter bucket with its reason.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

// Handler decides what a delivery changes. It may read from the network; it
// must not write state itself. The returned Write (nil for nothing) is
// committed in the same transaction that marks the delivery processed.
type Handler interface {
	Handle(ctx context.Context, d *state.Delivery) (outcome string, w state.Write, err error)
}

// Burier is a Handler that has something written when a delivery is given
// up (moved to the dead letters): in the same transaction, so what the
// delivery must not leave undone is done even though it failed.
type Burier interface {
	Buried(d *state.Delivery) state.Write
}

type logKey struct{}

// WithLogger carries the logger of one delivery (its id, repo and PR) to
// what handles it.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, logKey{}, l)
}

// Logger is the delivery's logger in ctx, else def: every line about a
// delivery names its delivery, repository and PR.
func Logger(ctx context.Context, def *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(logKey{}).(*slog.Logger); ok {
		return l
	}
	return def
}

// Permanent marks an error that retrying cannot fix: the delivery goes
// straight to the dead-letter bucket.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(permanentError)) }

// Store is what the pool needs of the state.
type Store interface {
	Pending() ([]*state.Delivery, error)
	Delivery(seq uint64) (*state.Delivery, error)
	Complete(d *state.Delivery, outcome string, w state.Write) error
	Bury(seq uint64, reason string, attempts int, also state.Write) error
}

// Observer is told about every finished delivery (metrics).
type Observer interface {
	Processed(event, outcome string, took time.Duration)
}

// Options tune a Pool.
type Options struct {
	Workers     int
	MaxAttempts int           // before dead-lettering; default 6
	BaseBackoff time.Duration // first retry delay; default 1s, doubling, with jitter
	MaxBackoff  time.Duration // default 1m
	Timeout     time.Duration // per attempt; default 2m
	Observer    Observer
	// After, when set, replaces time.AfterFunc for retry delays (tests step it).
	After func(d time.Duration, f func())
}

type item struct {
	seq   uint64
	event string
	// head is the delivery's header as it was stored, kept for a comment
	// with no command (the most common delivery): its handling needs
	// nothing else, so it is not read back from the store.
	head     *state.Delivery
	attempts int
	backoff  *backoff.ExponentialBackOff
}

// Pool is the set of workers.
type Pool struct {
	store Store
	h     Handler
	log   *slog.Logger
	opt   Options

	mu      sync.Mutex
	queues  map[string][]*item // pending per ordering key
	busy    map[string]bool    // key being processed or waiting for a retry
	ready   []string           // keys whose head may be processed, in turn
	wake    *sync.Cond         // signalled when ready grows or the pool closes
	pending int
	idle    *sync.Cond
	closed  bool
	started bool

	wg sync.WaitGroup
}

// New makes a pool; Start loads the inbox and starts the workers.
func New(store Store, h Handler, log *slog.Logger, opt Options) *Pool {
	if opt.Workers <= 0 {
		opt.Workers = 4
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 6
	}
	if opt.BaseBackoff <= 0 {
		opt.BaseBackoff = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = time.Minute
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Minute
	}
	if opt.After == nil {
		opt.After = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	p := &Pool{store: store, h: h, log: log, opt: opt,
		queues: map[string][]*item{}, busy: map[string]bool{}}
	p.idle = sync.NewCond(&p.mu)
	p.wake = sync.NewCond(&p.mu)
	return p
}

// Start queues every delivery in the inbox (left by a crash or a stop, or
// stored while the pool was not started), in the order they were stored,
// and starts the workers on ctx, the server's lifetime context. The inbox
// is read under the pool's lock: a delivery stored meanwhile is either in
// what Start reads (its Enqueue, waiting on the lock, then finds it queued)
// or enqueued after Start, behind the older ones of its PR.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("worker: the pool is stopped")
	}
	pending, err := p.store.Pending()
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("loading the inbox: %w", err)
	}
	p.started = true
	for _, d := range pending {
		p.enqueueLocked(d)
	}
	p.mu.Unlock()
	if len(pending) > 0 {
		p.log.Info("resuming deliveries left in the inbox", "count", len(pending))
	}
	for i := 0; i < p.opt.Workers; i++ {
		p.wg.Add(1)
		go p.run(ctx)
	}
	return nil
}

// Enqueue schedules a stored delivery. Before Start (opsbot waiting to
// learn its own account) and after Stop it does nothing: the delivery
// stays in the inbox, and Start loads it.
func (p *Pool) Enqueue(d *state.Delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enqueueLocked(d)
}

// enqueueLocked queues d behind its PR's deliveries, once. p.mu must be held.
func (p *Pool) enqueueLocked(d *state.Delivery) {
	if p.closed || !p.started {
		return // it stays in the inbox and is picked up at the next start
	}
	k := d.Key()
	for _, it := range p.queues[k] {
		if it.seq == d.Seq {
			return // queued already: Start read it from the inbox
		}
	}
	it := &item{seq: d.Seq, event: d.Event}
	if d.NoCommands && d.ID != "" {
		h := *d
		h.Body, h.Parsed = nil, nil
		it.head = &h
	}
	p.queues[k] = append(p.queues[k], it)
	p.pending++
	if !p.busy[k] {
		p.busy[k] = true
		p.makeReady(k)
	}
}

// makeReady hands key k to a worker. p.mu must be held.
func (p *Pool) makeReady(k string) {
	p.ready = append(p.ready, k)
	p.wake.Signal()
}

// next waits for a ready key; ok is false when the pool is closing.
func (p *Pool) next(ctx context.Context) (k string, it *item, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) == 0 && !p.closed && ctx.Err() == nil {
		p.wake.Wait()
	}
	if p.closed || ctx.Err() != nil {
		return "", nil, false
	}
	k, p.ready = p.ready[0], p.ready[1:]
	return k, p.queues[k][0], true
}

// Wait blocks until no delivery is queued or in flight. Tests use it to step
// the pool; it is not needed in production.
func (p *Pool) Wait() {
	p.mu.Lock()
	for p.pending > 0 {
		p.idle.Wait()
	}
	p.mu.Unlock()
}

// WaitQuiet waits until no delivery with ordering key k is queued or in
// flight, or ctx ends.
func (p *Pool) WaitQuiet(ctx context.Context, k string) error {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.idle.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queues[k]) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.idle.Wait()
	}
	return nil
}

// Running reports whether the workers are started and not stopped.
func (p *Pool) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started && !p.closed
}

// Depth is the number of deliveries queued or in flight.
func (p *Pool) Depth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}

// Stop stops taking new work and waits for the workers to finish what they
// are doing; deliveries not yet processed stay in the inbox.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.closed = true
	p.wake.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Pool) run(ctx context.Context) {
	defer p.wg.Done()
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	for {
		k, it, ok := p.next(ctx)
		if !ok {
			return
		}
		done := p.process(ctx, it)

		p.mu.Lock()
		if done {
			p.queues[k] = p.queues[k][1:]
			if len(p.queues[k]) == 0 {
				delete(p.queues, k)
			}
			p.pending--
			p.idle.Broadcast() // Wait and WaitQuiet check their own conditions
			if len(p.queues[k]) > 0 {
				p.makeReady(k)
			} else {
				delete(p.busy, k)
			}
			p.mu.Unlock()
			continue
		}
		// Retry later; the key stays busy so later deliveries of the same PR wait.
		it.attempts++
		if it.backoff == nil {
			it.backoff = backoff.NewExponentialBackOff()
			it.backoff.InitialInterval = p.opt.BaseBackoff
			it.backoff.MaxInterval = p.opt.MaxBackoff
		}
		delay := it.backoff.NextBackOff()
		p.mu.Unlock()
		p.opt.After(delay, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.makeReady(k)
		})
	}
}

// MaxReplans is how many times one attempt decides a delivery again at once
// when its plan went stale before it was written; past it the attempt
// fails and is retried with back-off, as any failure.
const MaxReplans = 8

// process runs one attempt. It reports whether the delivery is finished
// (completed or dead-lettered); false means try again later.
func (p *Pool) process(ctx context.Context, it *item) (finished bool) {
	log := p.log.With("seq", it.seq, "event", it.event)
	start := time.Now()
	d, err := it.head, error(nil)
	if d == nil {
		d, err = p.store.Delivery(it.seq)
	}
	if errors.Is(err, state.ErrNotFound) {
		return true // completed already (a second enqueue of the same entry)
	}
	if err != nil {
		log.Error("loading a delivery", "err", err)
		return p.failed(log, it, nil, err)
	}
	log = log.With("delivery", d.ID, "repo", d.Repo, "pr", d.PR, "action", d.Action)
	var outcome string
	for replans := 0; ; replans++ {
		var w state.Write
		outcome, w, err = p.handle(WithLogger(ctx, log), d)
		if err != nil {
			log.Warn("processing failed", "err", err, "attempt", it.attempts+1)
			return p.failed(log, it, d, err)
		}
		err = p.store.Complete(d, outcome, w)
		if errors.Is(err, plan.ErrStale) && replans < MaxReplans {
			// What a handler read changed before its plan was written (another
			// PR's request in the shared staging slot, a pin the gate used):
			// decide again at once, from a fresh read, without counting a failure.
			log.Info("deciding again: what the plan was made on changed", "reason", err, "replan", replans+1)
			continue
		}
		break
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		log.Error("committing the result", "err", err)
		return p.failed(log, it, d, err)
	}
	log.Info("processed", "outcome", outcome, "took", time.Since(start))
	if p.opt.Observer != nil {
		p.opt.Observer.Processed(d.Event, outcome, time.Since(start))
	}
	return true
}

func (p *Pool) handle(ctx context.Context, d *state.Delivery) (outcome string, w state.Write, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, p.opt.Timeout)
	defer cancel()
	return p.h.Handle(ctx, d)
}

func (p *Pool) failed(log *slog.Logger, it *item, d *state.Delivery, err error) bool {
	if !IsPermanent(err) && it.attempts+1 < p.opt.MaxAttempts {
		return false
	}
	var also state.Write
	if b, ok := p.h.(Burier); ok && d != nil {
		also = b.Buried(d)
	}
	if berr := p.store.Bury(it.seq, err.Error(), it.attempts+1, also); berr != nil && !errors.Is(berr, state.ErrNotFound) {
		log.Error("moving a delivery to the dead letters", "err", berr)
		return false
	}
	log.Error("delivery moved to the dead letters", "reason", err, "attempts", it.attempts+1)
	if p.opt.Observer != nil {
		p.opt.Observer.Processed(it.event, "dead-letter", 0)
	}
	return true
}
