package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// BodyLimits bound what reading webhook bodies may cost before their
// signatures are checked.
type BodyLimits struct {
	// MaxInflight is the bytes of bodies being read at once, over all
	// requests. Past it the slowest body being read (bytes per second since
	// it began) is cut (answered 503) to make room for one arriving faster,
	// or else the largest, when it holds more than 1 MiB and more than the
	// one that needs room; with neither, the body that needs room is
	// answered 503 with Retry-After.
	MaxInflight int64
	// MinRate is the bytes per second a body must keep arriving at once
	// Grace has passed: each Grace-long window must bring MinRate×Grace
	// bytes, or the request is answered 408 and its connection closed. 0
	// turns the floor off.
	MinRate int64
	Grace   time.Duration
	// HealthyRate is the bytes per second (since its read began) at or
	// above which a body is never cut to make room for another, unless it
	// holds more than 1 MiB and the other is smaller: GitHub sends its
	// deliveries far faster. 0 means DefaultHealthyRate or 4 × MinRate,
	// whichever is higher.
	HealthyRate int64
	// ReadTimeout is the server's http.read_timeout: the deadlines the
	// rate floor sets never reach past it.
	ReadTimeout time.Duration
}

// DefaultMaxInflight is the body budget when BodyLimits leaves it 0.
const DefaultMaxInflight = 64 << 20

// chunkSize is the unit bodies are read and budgeted in. A client that has
// sent one byte holds one chunk: small enough that the connection limits
// bound what idle senders hold (2,000 × 16 KiB = 32 MiB), large enough that a
// typical delivery is one or two chunks.
const chunkSize = 16 << 10

// Errors of reading a body under the budget.
var (
	errBusy     = errors.New("server: body budget spent")
	errGiveWay  = errors.New("server: body cut to make room for a smaller one")
	errTooLarge = errors.New("server: body larger than the limit")
	errTooSlow  = errors.New("server: body arrived slower than the floor rate")
)

// bodyBudget is the global budget of body bytes being read. Chunks are
// recycled, so the memory bodies take before their signatures are checked
// never exceeds max, and no garbage is made while reading them.
type bodyBudget struct {
	max     int64
	healthy float64 // bytes per second below which a body may be cut
	mu      sync.Mutex
	used    int64
	free    [][]byte
	readers map[*bodyRead]struct{}
	// released is closed (and replaced) whenever chunks are returned.
	released chan struct{}
}

func newBodyBudget(l BodyLimits) *bodyBudget {
	limit := l.MaxInflight
	if limit <= 0 {
		limit = DefaultMaxInflight
	}
	healthy := l.HealthyRate
	if healthy <= 0 {
		healthy = DefaultHealthyRate
		if l.MinRate > 0 {
			healthy = max(healthy, 4*l.MinRate)
		}
	}
	return &bodyBudget{max: limit, healthy: float64(healthy), readers: map[*bodyRead]struct{}{}, released: make(chan struct{})}
}

// keepFree is how many bytes of free chunks are kept once nothing is being
// read; the rest go back to the collector after a burst.
const keepFree = 2 << 20

// bodyRead is one request's body being read.
type bodyRead struct {
	b      *bodyBudget
	chunks [][]byte
	n      int64
	start  time.Time
	got    int64 // n as of the last chunk asked for, under b.mu
	// set under b.mu; cutMu orders giving way against deadline changes
	held int64
	// waiting says r waits in grow for room (under b.mu): its bytes are
	// in, so it is never taken for slow meanwhile; waited is how long it
	// waited so, left out of its rate.
	waiting bool
	waited  time.Duration
	cutMu   sync.Mutex
	cut     bool
	cutc    chan struct{}         // closed when cut, to wake r if it waits for room itself
	setRD   func(time.Time) error // the connection's read deadline; nil when unsupported
}

// waitForRoom is how long a body waits for another, cut to make room, to
// give its chunks back.
const waitForRoom = 2 * time.Second

// protectedSize is the size up to which a body is never cut for being
// larger than the one that needs room, only for arriving slower: GitHub's
// deliveries are almost all below it, and an attacker's body, however
// small, cannot cut one that arrives faster.
const protectedSize = 1 << 20

// rateWindowMin is the least time a rate is measured over, so that a body
// that has just begun is not counted as infinitely fast.
const rateWindowMin = 100 * time.Millisecond

// DefaultHealthyRate is BodyLimits.HealthyRate when 0 (and 4 × MinRate is
// lower).
const DefaultHealthyRate = 64 << 10

// rate is the bytes per second r has brought since its read began, as
// of its last chunk, the time it waited in line for room left out (under
// b.mu).
func (r *bodyRead) rate(now time.Time) float64 {
	return float64(r.got) / max(now.Sub(r.start)-r.waited, rateWindowMin).Seconds()
}

// youngBody is how long a body's read is never taken for slow: until it
// asks for its next chunk its rate counts none of the bytes it is reading,
// so a delivery that has just begun (its first chunk handed out, its
// reader not yet scheduled on a busy machine) would read as the slowest of
// all and be cut to make room for an upload.
const youngBody = time.Second

// slow reports whether r may be cut for arriving slower than healthy
// (under b.mu).
func (r *bodyRead) slow(now time.Time, healthy float64) bool {
	return now.Sub(r.start) >= youngBody && r.rate(now) < healthy
}

// grow takes one more chunk for r from the budget. When the budget is
// spent it cuts, to make room, the slowest body being read that arrives
// slower than the healthy rate, once it has been read for youngBody (one
// younger is waited for, within waitForRoom, until it may be) (so a crowd of small, slow bodies cannot keep
// a larger, healthy delivery out, and no body can cut one arriving at a
// healthy rate for being larger), or failing that the largest body holding more than
// protectedSize and more than r would; and waits for its chunks. With no
// such body r gets errBusy.
func (r *bodyRead) grow(ctx context.Context) ([]byte, error) {
	b := r.b
	var timeout <-chan time.Time
	defer func() {
		if r.waiting { // only r's goroutine writes it
			b.mu.Lock()
			r.waiting = false // in line from its first wait until it has room, or gives up
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if r.isCut() {
			b.mu.Unlock()
			return nil, errGiveWay
		}
		r.got = r.n
		if b.used+chunkSize <= b.max {
			b.used += chunkSize
			r.held += chunkSize
			b.readers[r] = struct{}{}
			var c []byte
			if n := len(b.free); n > 0 {
				c, b.free = b.free[n-1], b.free[:n-1]
			}
			b.mu.Unlock()
			if c == nil {
				c = make([]byte, chunkSize)
			}
			r.chunks = append(r.chunks, c)
			return c, nil
		}
		now := time.Now()
		var slow, large *bodyRead
		var slowRate float64
		var matures time.Time // when the first young body below the healthy rate may be taken for slow
		for o := range b.readers {
			if o == r || o.held == 0 {
				continue
			}
			// A body waiting for room has its bytes in: its rate falls only
			// while it waits, so it is not taken for slow (it may still be
			// the largest).
			or := o.rate(now)
			if !o.waiting && o.slow(now, b.healthy) && (slow == nil || or < slowRate) {
				slow, slowRate = o, or
			}
			if at := o.start.Add(youngBody); !o.waiting && or < b.healthy && at.After(now) && (matures.IsZero() || at.Before(matures)) {
				matures = at
			}
			if o.held > protectedSize && o.held > r.held+chunkSize && (large == nil || o.held > large.held) {
				large = o
			}
		}
		victim := slow
		if victim == nil {
			victim = large
		}
		wait := b.released
		if victim == nil && matures.IsZero() {
			b.mu.Unlock()
			return nil, errBusy
		}
		r.waiting = true
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(waitForRoom)
			defer t.Stop()
			timeout = t.C
		}
		var grown *time.Timer
		var grownC <-chan time.Time
		if victim != nil {
			victim.giveWay()
		} else {
			// Only bodies too young to be taken for slow hold the room: wait
			// until the first of them may be, then look again.
			grown = time.NewTimer(matures.Sub(now))
			grownC = grown.C
		}
		var err error
		from := time.Now()
		select {
		case <-wait:
		case <-grownC:
		case <-r.cutc:
		case <-timeout:
			err = errBusy
		case <-ctx.Done():
			err = ctx.Err()
		}
		if grown != nil {
			grown.Stop()
		}
		b.mu.Lock()
		// Time in line is not time the body took to arrive; bytes it sent
		// meanwhile wait in the kernel and count when read, so no more than
		// one wait for room is left out of its rate.
		r.waited = min(r.waited+time.Since(from), waitForRoom)
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

func (r *bodyRead) isCut() bool {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	return r.cut
}

// giveWay cuts r: its read in progress returns at once.
func (r *bodyRead) giveWay() {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	if r.cut {
		return
	}
	r.cut = true
	close(r.cutc)
	if r.setRD != nil {
		r.setRD(time.Unix(1, 0))
	}
}

// deadline sets the connection's read deadline unless r was cut (while
// the body is being read).
func (r *bodyRead) deadline(t time.Time) {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	if !r.cut && r.setRD != nil {
		r.setRD(t)
	}
}

// release gives every chunk of r back to the budget.
func (r *bodyRead) release() {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.readers, r)
	if r.held == 0 {
		return
	}
	b.used -= r.held
	r.held = 0
	b.free = append(b.free, r.chunks...)
	r.chunks = nil
	if b.used == 0 && len(b.free)*chunkSize > keepFree {
		clear(b.free[keepFree/chunkSize:])
		b.free = b.free[:keepFree/chunkSize]
	}
	close(b.released)
	b.released = make(chan struct{})
}

// readBody reads the body of r, at most limit bytes, in budgeted chunks
// that grow as bytes arrive (never by the declared length), under the rate
// floor. It returns the chunks' contents (parts) and a release func that
// gives them back; the caller must call it. Errors: errTooLarge, errBusy
// and errGiveWay (503), errTooSlow (408), or the read's own.
func (s *Server) readBody(w http.ResponseWriter, req *http.Request, limit int64) (parts [][]byte, release func(), err error) {
	r := &bodyRead{b: s.bodies, cutc: make(chan struct{}), start: time.Now()}
	var body io.Reader = req.Body
	if fb, ok := req.Body.(*floorBody); ok {
		body = fb.take() // the floor below replaces ServeHTTP's
	}
	rc := http.NewResponseController(w)
	start := time.Now() // deadlines are the connection's: real time, not the injected clock
	var hard time.Time  // the server's own read deadline
	if s.limits.ReadTimeout > 0 {
		hard = start.Add(s.limits.ReadTimeout)
	}
	at := func(t time.Time) time.Time {
		if !hard.IsZero() && t.After(hard) {
			return hard
		}
		return t
	}
	floor := s.floor()
	// Without the floor the server's own read deadline stays as it is;
	// giveWay still moves it to cut the read.
	r.setRD = rc.SetReadDeadline
	if floor {
		if err := rc.SetReadDeadline(at(start.Add(s.limits.Grace))); err != nil {
			r.setRD = nil // a ResponseWriter without a connection (a recorder in tests)
		}
	}
	defer func() {
		if err != nil {
			r.release()
			parts = nil
			return
		}
		// The whole body is in: the rest of the request is under the
		// server's own timeout again, also if r was cut as it finished.
		r.cutMu.Lock()
		if r.setRD != nil && (floor || r.cut) {
			r.setRD(hard)
		}
		r.cutMu.Unlock()
	}()
	quota := s.quota()
	var mark int64
	var cur []byte
	for {
		if len(cur) == 0 {
			if r.n >= limit+1 {
				return nil, nil, errTooLarge
			}
			if r.n == req.ContentLength {
				break // all of it: no chunk for the EOF
			}
			if cur, err = r.grow(req.Context()); err != nil {
				return nil, nil, err
			}
		}
		room := cur
		if rest := limit + 1 - r.n; int64(len(room)) > rest {
			room = room[:rest]
		}
		n, rerr := body.Read(room)
		cur = cur[n:]
		r.n += int64(n)
		if r.n > limit {
			return nil, nil, errTooLarge
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			var ne net.Error
			switch {
			case r.isCut():
				return nil, nil, errGiveWay
			case errors.As(rerr, &ne) && ne.Timeout():
				return nil, nil, errTooSlow
			}
			return nil, nil, rerr
		}
		if floor && r.n-mark >= quota {
			mark = r.n
			r.deadline(at(time.Now().Add(s.limits.Grace)))
		}
	}
	parts = make([][]byte, len(r.chunks))
	left := r.n
	for i, c := range r.chunks {
		k := min(int64(len(c)), left)
		parts[i] = c[:k]
		left -= k
	}
	return parts, r.release, nil
}

// join copies parts into one slice of exactly their length.
func join(parts [][]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
