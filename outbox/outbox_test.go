package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// clock is the test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sender records what it sent and fails as its plan says: a body mapped to
// errors fails with each in turn, then succeeds.
type sender struct {
	mu    sync.Mutex
	sent  []string
	plan  map[string][]error
	retry func(err error, attempt int, now time.Time) outbox.Retry
}

func (s *sender) Send(_ context.Context, n *state.Notice, attempt int) (state.SentRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if errs := s.plan[n.Body]; len(errs) > 0 {
		s.plan[n.Body] = errs[1:]
		return state.SentRef{}, errs[0]
	}
	s.sent = append(s.sent, n.Body)
	return state.SentRef{CommentID: int64(n.ID)}, nil
}

func (s *sender) Retry(err error, attempt int, now time.Time) outbox.Retry {
	if s.retry != nil {
		return s.retry(err, attempt, now)
	}
	return outbox.Retry{At: now.Add(time.Minute)}
}

func (s *sender) Sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// sentOf keeps the notices of one PR, in the order they were sent.
func sentOf(all []string, prefix string) []string {
	var out []string
	for _, b := range all {
		if b[:len(prefix)] == prefix {
			out = append(out, b)
		}
	}
	return out
}

func setup(t *testing.T, s *sender) (*state.Store, *outbox.Loop, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	st, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := &outbox.Loop{Store: st, Channel: state.ChannelGitHub, Sender: s, Now: c.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return st, l, c
}

func enqueue(t *testing.T, st *state.Store, pr int, bodies ...string) {
	t.Helper()
	err := st.Update(func(tx *state.Tx) error {
		for _, b := range bodies {
			if err := tx.Enqueue(&state.Notice{Channel: state.ChannelGitHub, Kind: state.NoticeComment,
				Repo: "o/r", PR: pr, Body: b}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var errDown = errors.New("503 from GitHub")

// A PR's notices go out in order: one that fails holds back the ones after
// it, not other PRs'; when its retry is due, all follow in order.
func TestOrderWithinPRAndRetry(t *testing.T) {
	s := &sender{plan: map[string][]error{"a1": {errDown}}}
	st, l, c := setup(t, s)
	enqueue(t, st, 1, "a1", "a2", "a3")
	enqueue(t, st, 2, "b1", "b2")

	next := l.Drain(t.Context())
	if got := s.Sent(); len(sentOf(got, "a")) != 0 || !slices.Equal(sentOf(got, "b"), []string{"b1", "b2"}) {
		t.Fatalf("after the first pass sent %v: PR 1 must wait for a1, PR 2 must not", got)
	}
	if want := c.Now().Add(time.Minute); !next.Equal(want) {
		t.Fatalf("next pass at %v, want a1's retry at %v", next, want)
	}
	pending, err := st.Outbox(state.ChannelGitHub)
	if err != nil || len(pending) != 3 || pending[0].LastError != errDown.Error() || pending[0].Attempts != 1 {
		t.Fatalf("outbox after the failure = %+v, %v", pending, err)
	}

	c.Add(30 * time.Second) // not yet due
	l.Drain(t.Context())
	if n := len(sentOf(s.Sent(), "a")); n != 0 {
		t.Fatalf("a1 was retried before its time (%d of PR 1 sent)", n)
	}
	c.Add(31 * time.Second)
	if next := l.Drain(t.Context()); !next.IsZero() {
		t.Fatalf("nothing should wait, next = %v", next)
	}
	if got := sentOf(s.Sent(), "a"); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("PR 1 sent %v, want a1 a2 a3", got)
	}
	if pending, _ := st.Outbox(state.ChannelGitHub); len(pending) != 0 {
		t.Fatalf("%d notices left in the outbox", len(pending))
	}
}

// A notice refused for good is kept among the failed ones with its reason,
// and the PR's later notices are not held back by it.
func TestGiveUpKeepsTheNotice(t *testing.T) {
	refused := errors.New("422 Validation Failed")
	s := &sender{plan: map[string][]error{"bad": {refused}},
		retry: func(err error, attempt int, now time.Time) outbox.Retry { return outbox.Retry{GiveUp: true} }}
	st, l, _ := setup(t, s)
	enqueue(t, st, 1, "bad", "after")
	l.Drain(t.Context())
	if got := s.Sent(); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("sent %v, want only the notice after the refused one", got)
	}
	failed, err := st.FailedNotices()
	if err != nil || len(failed) != 1 || failed[0].Body != "bad" || failed[0].LastError != refused.Error() {
		t.Fatalf("failed notices = %+v, %v", failed, err)
	}
	if pending, _ := st.Outbox(state.ChannelGitHub); len(pending) != 0 {
		t.Fatalf("%d notices left in the outbox", len(pending))
	}
}

// A channel-wide wait (a rate limit) stops every PR's notices until it ends.
func TestGlobalPause(t *testing.T) {
	limited := errors.New("rate limited")
	var reset time.Time
	s := &sender{plan: map[string][]error{"a1": {limited}}}
	st, l, c := setup(t, s)
	l.Parallel = 1 // PR 1 first, so the pause comes before PR 2 is tried
	reset = c.Now().Add(10 * time.Minute)
	s.retry = func(err error, attempt int, now time.Time) outbox.Retry { return outbox.Retry{At: reset, Global: true} }
	enqueue(t, st, 1, "a1")
	enqueue(t, st, 2, "b1")
	if next := l.Drain(t.Context()); !next.Equal(reset) {
		t.Fatalf("next pass at %v, want the reset %v", next, reset)
	}
	c.Add(5 * time.Minute)
	l.Drain(t.Context())
	if got := s.Sent(); len(got) != 0 {
		t.Fatalf("sent %v during the channel's wait", got)
	}
	c.Add(5*time.Minute + time.Second)
	l.Drain(t.Context())
	if got := s.Sent(); len(got) != 2 {
		t.Fatalf("after the wait sent %v, want both", got)
	}
}

// Run wakes when a notice is added, without waiting for a timer.
func TestRunWakesOnEnqueue(t *testing.T) {
	s := &sender{}
	st, l, _ := setup(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	enqueue(t, st, 1, "hello")
	deadline := testkit.Deadline(t)
	for len(s.Sent()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the loop did not wake for a new notice")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waiter is a sender whose notices with body "wait" must wait for an
// earlier one, as an edit waits for its comment.
type waiter struct {
	sender
	asked int
}

func (w *waiter) Ready(n *state.Notice) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n.Body == "wait" {
		w.asked++
		return outbox.ErrWaiting
	}
	return nil
}

func enqueueStatus(t *testing.T, st *state.Store, pr int, sha string) {
	t.Helper()
	if err := st.Update(func(tx *state.Tx) error {
		return tx.Enqueue(&state.Notice{Channel: state.ChannelGitHub, Kind: state.NoticeStatus, Repo: "o/r", PR: pr,
			SHA: sha, Body: "status " + sha})
	}); err != nil {
		t.Fatal(err)
	}
}

// A notice that waits records no attempt (no write) and is looked at again
// later and later; the PR's commit statuses, in their own lane, go out at
// once and in order.
func TestWaitingBacksOffAndBlocksNoStatus(t *testing.T) {
	s := &waiter{}
	st, l, c := setup(t, &s.sender)
	l.Sender = s
	enqueue(t, st, 1, "wait", "after")
	enqueueStatus(t, st, 1, "s1")
	enqueueStatus(t, st, 1, "s2")
	var gaps []time.Duration
	for range 8 {
		next := l.Drain(t.Context())
		if next.IsZero() {
			t.Fatal("the waiting notice was given no time to look again")
		}
		gaps = append(gaps, next.Sub(c.Now()))
		c.Add(next.Sub(c.Now()))
	}
	if got := s.Sent(); !slices.Equal(got, []string{"status s1", "status s2"}) {
		t.Fatalf("sent %v, want the two statuses in order, past the waiting comment", got)
	}
	if s.asked != 8 {
		t.Fatalf("the waiting notice was asked %d times in 8 passes", s.asked)
	}
	if gaps[len(gaps)-1] < 4*gaps[0] {
		t.Fatalf("waits did not back off: %v", gaps)
	}
	pending, err := st.Outbox(state.ChannelGitHub)
	if err != nil || len(pending) != 2 || pending[0].Attempts != 0 {
		t.Fatalf("outbox = %+v, %v: a wait must record no attempt", pending, err)
	}
}

// With a pace, the sends a window allows are shared among PRs in turn: a
// PR with a long backlog gets no more than another PR with one notice.
func TestPaceSharesFairly(t *testing.T) {
	s := &sender{}
	st, l, c := setup(t, s)
	l.Pace = &outbox.Pace{Limits: []outbox.Limit{{N: 4, Per: time.Minute}, {N: 100, Per: time.Hour}}}
	var noisy []string
	for i := range 20 {
		noisy = append(noisy, fmt.Sprintf("a%02d", i))
	}
	enqueue(t, st, 1, noisy...)
	next := l.Drain(t.Context())
	if got := s.Sent(); len(got) != 4 {
		t.Fatalf("sent %v in the first window, want 4", got)
	}
	if want := c.Now().Add(time.Minute); !next.Equal(want) {
		t.Fatalf("next pass at %v, want when the window frees a send, %v", next, want)
	}
	enqueueStatus(t, st, 2, "quiet")
	c.Add(time.Minute)
	l.Drain(t.Context())
	got := s.Sent()
	if len(got) != 8 || !slices.Contains(got[4:], "status quiet") {
		t.Fatalf("second window sent %v, want 4 more including PR 2's status", got[4:])
	}
	c.Add(30 * time.Second)
	l.Drain(t.Context())
	if n := len(s.Sent()); n != 8 {
		t.Fatalf("%d sent inside the window's limit of 4 a minute", n)
	}
}

// A fifth of each window is kept for commit statuses: a flood of comments
// stops at four fifths, and a status still goes out at once.
func TestPaceKeepsRoomForStatuses(t *testing.T) {
	s := &sender{}
	st, l, c := setup(t, s)
	l.Pace = &outbox.Pace{Limits: []outbox.Limit{{N: 10, Per: time.Minute}, {N: 50, Per: time.Hour}}}
	var noisy []string
	for i := range 60 {
		noisy = append(noisy, fmt.Sprintf("a%02d", i))
	}
	enqueue(t, st, 1, noisy...)
	for range 6 {
		drainNow(t, l, c)
		c.Add(time.Minute)
	}
	if n := len(s.Sent()); n != 40 {
		t.Fatalf("comments sent in the hour: %d, want 40 (four fifths of 50)", n)
	}
	enqueueStatus(t, st, 2, "quiet")
	drainNow(t, l, c)
	if got := s.Sent(); got[len(got)-1] != "status quiet" {
		t.Fatalf("the status did not go out in the statuses' reserve: %v", got[40:])
	}
}

// drainNow makes passes until nothing more is due at the clock's time.
func drainNow(t *testing.T, l *outbox.Loop, c *clock) {
	t.Helper()
	for range 100 {
		if next := l.Drain(t.Context()); next.IsZero() || next.After(c.Now()) {
			return
		}
	}
	t.Fatal("passes never ran out of notices due now")
}
