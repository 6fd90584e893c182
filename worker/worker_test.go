package worker

import (
	"context"
	"errors"
	"fmt"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
)

type handlerFunc func(ctx context.Context, d *state.Delivery) (string, state.Write, error)

func (f handlerFunc) Handle(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
	return f(ctx, d)
}

func newStore(t *testing.T) *state.Store {
	t.Helper()
	s, err := state.Open(filepath.Join(t.TempDir(), "w.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func add(t *testing.T, s *state.Store, p *Pool, id string, pr int) *state.Delivery {
	t.Helper()
	// Each body is its own: the store answers the same event and body under another id as a duplicate.
	d := &state.Delivery{ID: id, Event: "issue_comment", Repo: "o/r", PR: pr, ReceivedAt: time.Now(), Body: []byte(`{"id":"` + id + `"}`)}
	if _, err := s.Append(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if p != nil {
		p.Enqueue(d)
	}
	return d
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Deliveries of one PR run in arrival order and never at once; other PRs
// run alongside.
func TestOrderPerPRParallelAcrossPRs(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	seen := map[int][]string{}
	running := map[int]bool{}
	concurrent := 0
	maxConcurrent := 0
	gate := make(chan struct{})
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		if running[d.PR] {
			t.Errorf("two deliveries of PR %d at once", d.PR)
		}
		running[d.PR] = true
		concurrent++
		maxConcurrent = max(maxConcurrent, concurrent)
		mu.Unlock()
		if d.PR == 1 && d.ID == "1-0" {
			<-gate // PR 1 is slow; PR 2 must not wait for it
		}
		mu.Lock()
		seen[d.PR] = append(seen[d.PR], d.ID)
		running[d.PR] = false
		concurrent--
		mu.Unlock()
		return "ok", nil, nil
	})
	p := New(s, h, quiet, Options{Workers: 4})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	for i := 0; i < 5; i++ {
		add(t, s, p, fmt.Sprintf("1-%d", i), 1)
	}
	for i := 0; i < 5; i++ {
		add(t, s, p, fmt.Sprintf("2-%d", i), 2)
	}
	// PR 2 finishes while PR 1's first delivery is still held.
	for deadline := testkit.Deadline(t); ; {
		mu.Lock()
		n := len(seen[2])
		mu.Unlock()
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("PR 2 processed only %d of 5 deliveries while PR 1 was held: one slow PR holds up another", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(gate)
	p.Wait()
	for pr := 1; pr <= 2; pr++ {
		for i, id := range seen[pr] {
			if want := fmt.Sprintf("%d-%d", pr, i); id != want {
				t.Fatalf("PR %d order: %v", pr, seen[pr])
			}
		}
	}
	if maxConcurrent < 2 {
		t.Errorf("never ran two PRs at once")
	}
}

// A panic is contained to its delivery, which is dead-lettered; the next
// delivery of the same PR still runs.
func TestPanicIsContained(t *testing.T) {
	s := newStore(t)
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		if d.ID == "bad" {
			panic("nil map")
		}
		return "ok", nil, nil
	})
	p := New(s, h, quiet, Options{Workers: 2})
	p.Start(context.Background())
	defer p.Stop()
	add(t, s, p, "bad", 1)
	good := add(t, s, p, "good", 1)
	p.Wait()
	dead, _ := s.DeadLetters()
	if len(dead) != 1 || dead[0].Delivery.ID != "bad" {
		t.Fatalf("dead letters = %+v", dead)
	}
	if st, err := s.DeliveryStatus(good.ID); err != nil || st.Outcome != "ok" {
		t.Fatalf("good delivery: %+v %v", st, err)
	}
}

// Transient failures retry with back-off and keep the PR's order; a
// delivery that keeps failing is dead-lettered with its reason.
func TestRetryThenDeadLetter(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	attempts := map[string]int{}
	var order []string
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts[d.ID]++
		switch {
		case d.ID == "flaky" && attempts[d.ID] < 3:
			return "", nil, errors.New("GitHub answered 502")
		case d.ID == "broken":
			return "", nil, errors.New("GitHub answered 500")
		}
		order = append(order, d.ID)
		return "ok", nil, nil
	})
	var delays []time.Duration
	var dmu sync.Mutex
	after := func(d time.Duration, f func()) { // retries at once, recording the asked delay
		dmu.Lock()
		delays = append(delays, d)
		dmu.Unlock()
		go f()
	}
	p := New(s, h, quiet, Options{Workers: 2, MaxAttempts: 4, BaseBackoff: 100 * time.Millisecond, After: after})
	p.Start(context.Background())
	defer p.Stop()
	add(t, s, p, "flaky", 1)
	add(t, s, p, "after-flaky", 1)
	add(t, s, p, "broken", 2)
	p.Wait()
	if got := attempts["flaky"]; got != 3 {
		t.Errorf("flaky tried %d times, want 3", got)
	}
	if len(order) < 2 || order[0] != "flaky" || order[1] != "after-flaky" {
		t.Errorf("order = %v: a retry must not let later deliveries of the PR overtake", order)
	}
	if got := attempts["broken"]; got != 4 {
		t.Errorf("broken tried %d times, want 4 (MaxAttempts)", got)
	}
	dead, _ := s.DeadLetters()
	if len(dead) != 1 || dead[0].Delivery.ID != "broken" || dead[0].Reason != "GitHub answered 500" || dead[0].Attempts != 4 {
		t.Fatalf("dead letters = %+v", dead)
	}
	for _, d := range delays {
		if d <= 0 || d > time.Minute {
			t.Errorf("retry delay %v out of bounds", d)
		}
	}
}

// After a stop, what was not processed is still in the inbox and runs at the next start.
func TestResumeFromInbox(t *testing.T) {
	s := newStore(t)
	add(t, s, nil, "left-1", 1)
	add(t, s, nil, "left-2", 2)
	var mu sync.Mutex
	var got []string
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		got = append(got, d.ID)
		mu.Unlock()
		return "ok", nil, nil
	})
	p := New(s, h, quiet, Options{Workers: 1})
	p.Start(context.Background())
	p.Wait()
	p.Stop()
	if len(got) != 2 {
		t.Fatalf("resumed %v, want both", got)
	}
	if pend, _ := s.Pending(); len(pend) != 0 {
		t.Fatalf("%d still pending", len(pend))
	}
}

// A write whose plan went stale (what the handler read changed before the
// commit) is decided again at once, from a fresh read, without a back-off
// or a counted failure; one that stays stale past MaxReplans in every
// attempt ends in the dead letters as any failure does.
func TestStalePlanIsDecidedAgainAtOnce(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	handled := map[string]int{}
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		defer mu.Unlock()
		handled[d.ID]++
		n := handled[d.ID]
		return "ok", func(tx *state.Tx) error {
			if d.ID == "stale-forever" || n <= 3 {
				return fmt.Errorf("%w: the active pin changed", plan.ErrStale)
			}
			return nil
		}, nil
	})
	var delays int
	after := func(_ time.Duration, f func()) { mu.Lock(); delays++; mu.Unlock(); go f() }
	p := New(s, h, quiet, Options{Workers: 1, MaxAttempts: 2, After: after})
	p.Start(context.Background())
	defer p.Stop()
	add(t, s, p, "stale-thrice", 1)
	p.Wait()
	mu.Lock()
	if handled["stale-thrice"] != 4 || delays != 0 {
		t.Fatalf("decided %d times with %d back-offs; want 4 decisions, none backed off", handled["stale-thrice"], delays)
	}
	mu.Unlock()
	if pending, _ := s.Pending(); len(pending) != 0 {
		t.Fatalf("still pending: %+v", pending)
	}
	add(t, s, p, "stale-forever", 2)
	p.Wait()
	dead, _ := s.DeadLetters()
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || dead[0].Delivery.ID != "stale-forever" || handled["stale-forever"] != 2*(MaxReplans+1) {
		t.Fatalf("dead letters %+v after %d decisions; want stale-forever after %d", dead, handled["stale-forever"], 2*(MaxReplans+1))
	}
}

// Deliveries stored before the pool starts (opsbot waiting to learn its own
// account) are not queued in memory: they wait in the inbox, and Start
// processes each once, also one enqueued again while Start reads the inbox.
func TestEnqueueBeforeStartWaitsInTheInbox(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	handled := map[string]int{}
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		handled[d.ID]++
		mu.Unlock()
		return "ok", nil, nil
	})
	p := New(s, h, quiet, Options{Workers: 2})
	a := add(t, s, p, "before-1", 1)
	add(t, s, p, "before-2", 2)
	if p.Depth() != 0 || p.Running() {
		t.Fatalf("before Start: depth %d, running %v; want nothing queued in memory", p.Depth(), p.Running())
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.Enqueue(a) // the server's enqueue of a delivery Start also read
	add(t, s, p, "after", 1)
	p.Wait()
	mu.Lock()
	defer mu.Unlock()
	if handled["before-1"] != 1 || handled["before-2"] != 1 || handled["after"] != 1 {
		t.Fatalf("handled %v, want each delivery once", handled)
	}
	if pend, _ := s.Pending(); len(pend) != 0 {
		t.Fatalf("%d still pending", len(pend))
	}
}

// blockingPending is a store whose first Pending read waits until it is
// released: the window in which a webhook is stored while Start reads the
// inbox.
type blockingPending struct {
	*state.Store
	reading, release chan struct{}
	once             sync.Once
}

func (b *blockingPending) Pending() ([]*state.Delivery, error) {
	pending, err := b.Store.Pending()
	b.once.Do(func() {
		close(b.reading)
		<-b.release
	})
	return pending, err
}

// A delivery stored while Start reads the inbox (a webhook taken the moment
// opsbot became ready) runs after the older deliveries of its PR, never
// before: a cancel stored after a pin is never run before the pin.
func TestStartKeepsOrderWithDeliveriesStoredMeanwhile(t *testing.T) {
	s := newStore(t)
	var mu sync.Mutex
	var order []string
	h := handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		mu.Lock()
		order = append(order, d.ID)
		mu.Unlock()
		return "ok", nil, nil
	})
	b := &blockingPending{Store: s, reading: make(chan struct{}), release: make(chan struct{})}
	p := New(b, h, quiet, Options{Workers: 2})
	add(t, s, p, "pin-during-outage", 1) // stored before the pool starts: in the inbox only
	started := make(chan error, 1)
	go func() { started <- p.Start(context.Background()) }()
	<-b.reading
	late := add(t, s, nil, "cancel-after-ready", 1) // stored after Start read the inbox
	enqueued := make(chan struct{})
	go func() { p.Enqueue(late); close(enqueued) }()
	close(b.release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	<-enqueued
	defer p.Stop()
	p.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "pin-during-outage" || order[1] != "cancel-after-ready" {
		t.Fatalf("order %v, want the pin stored first, then the cancel", order)
	}
}

// burying is a handler that always fails, and has a write done when its
// delivery is given up (Burier).
type burying struct{ handlerFunc }

func (burying) Buried(d *state.Delivery) state.Write {
	return func(tx *state.Tx) error {
		return tx.Audit(state.AuditRecord{Kind: "command", Outcome: "buried", Repo: d.Repo, PR: d.PR, Reason: "given up: " + d.ID})
	}
}

// What a Burier has written when a delivery is given up commits with the
// dead letter: a click that failed still uses its button up.
func TestBuriedDeliveryWritesWhatItsHandlerAsks(t *testing.T) {
	s := newStore(t)
	h := burying{handlerFunc(func(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
		return "", nil, Permanent(errors.New("GitHub answered 500"))
	})}
	p := New(s, h, quiet, Options{Workers: 1, MaxAttempts: 2})
	p.Start(context.Background())
	defer p.Stop()
	add(t, s, p, "click", 3)
	p.Wait()
	if dead, _ := s.DeadLetters(); len(dead) != 1 || dead[0].Delivery.ID != "click" {
		t.Fatalf("dead letters = %+v", dead)
	}
	recs, _, err := s.Audit(state.AuditQuery{Repo: "o/r"})
	if err != nil || len(recs) != 1 || recs[0].Outcome != "buried" || recs[0].Reason != "given up: click" {
		t.Fatalf("audit after the bury = %+v, %v; want the Burier's record", recs, err)
	}
}
