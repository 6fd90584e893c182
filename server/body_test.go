package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// budgetServer serves webhooks on a real listener (read deadlines need a
// connection) with the given body limits.
func budgetServer(t *testing.T, lim BodyLimits) (*Server, *httptest.Server) {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := New(Config{Commands: commandstest.Registry(), Store: st, Queue: &queue{}, Secrets: []auth.Secret{secret}, MaxBody: 1 << 20, Body: lim,
		RepoName: func(n string) (string, bool) { return "Codertocat/Hello-World", true },
		Metrics:  metrics.New(nil, nil, time.Now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

// upload starts an unsigned POST declaring 1 MiB and sends n bytes of it.
func upload(t *testing.T, url string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\n"+
		"X-GitHub-Delivery: u\r\nContent-Length: %d\r\n\r\n%s", 1<<20, strings.Repeat("x", n))
	return c
}

func answerOf(t *testing.T, c net.Conn) (int, http.Header) {
	t.Helper()
	c.SetReadDeadline(testkit.Deadline(t))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// slowerThanHealthy is how many bodies being read arrive slower than the
// healthy rate, so that another may cut them.
func (b *bodyBudget) slowerThanHealthy() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, now := 0, time.Now()
	for r := range b.readers {
		if r.held > 0 && r.slow(now, b.healthy) {
			n++
		}
	}
	return n
}

// With the body budget spent by stalled uploads, a signed delivery cuts the
// largest of them (answered 503 with Retry-After) and is stored; a body that
// is itself the largest is refused with 503 instead of cutting a smaller one.
func TestBodyBudgetFavoursSmallBodies(t *testing.T) {
	s, hs := budgetServer(t, BodyLimits{MaxInflight: 256 << 10, HealthyRate: 1 << 20})
	// Each has sent 120 KiB and holds 8 chunks, the last part filled.
	a := upload(t, hs.URL, 120<<10)
	b := upload(t, hs.URL, 120<<10)
	testkit.Eventually(t, "the two uploads fill the budget", func() bool { return s.bodies.inUse() == 256<<10 })
	testkit.Eventually(t, "the two uploads have stalled below the healthy rate", func() bool { return s.bodies.slowerThanHealthy() == 2 })

	body := fixtures.Webhook(t, "pull_request", "synchronize")
	resp, err := http.DefaultClient.Do(fixtures.SignedRequest(t, hs.URL+"/webhook", "pull_request", "small-1", body, secret))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a signed small delivery with the budget spent: %d, want 202", resp.StatusCode)
	}
	// One of the two uploads gave way: it is answered, the other is not.
	type answer struct {
		c    net.Conn
		code int
		h    http.Header
	}
	answers := make(chan answer, 2)
	for _, c := range []net.Conn{a, b} {
		go func() {
			c.SetReadDeadline(testkit.Deadline(t))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			resp.Body.Close()
			answers <- answer{c, resp.StatusCode, resp.Header}
		}()
	}
	var cut answer
	select {
	case cut = <-answers:
	case <-testkit.Expired(t):
		t.Fatal("neither upload gave way to the signed delivery")
	}
	if cut.code != http.StatusServiceUnavailable || cut.h.Get("Retry-After") == "" {
		t.Fatalf("the upload cut: %d (Retry-After %q), want 503 with Retry-After", cut.code, cut.h.Get("Retry-After"))
	}
	// A third upload, arriving faster than the stalled one held, takes
	// its place even though it grows larger.
	c := upload(t, hs.URL, 200<<10)
	select {
	case held := <-answers:
		if held.code != http.StatusServiceUnavailable || held.h.Get("Retry-After") == "" {
			t.Fatalf("a stalled upload with a faster one needing room: %d (Retry-After %q), want 503", held.code, held.h.Get("Retry-After"))
		}
	case <-testkit.Expired(t):
		t.Fatal("the stalled upload did not give way to a faster one")
	}
	c.Close()
	testkit.Eventually(t, "the budget is given back", func() bool { return s.bodies.inUse() == 0 })
}

// A body whose read has just begun holds its first chunk with none of its
// bytes counted yet: another body that needs room does not take it for
// slow and cut it at once (a signed delivery on a busy machine was answered
// 503 so), nor is it refused: it waits until the young body has been read
// for youngBody, and cuts it then if nothing arrived, so a budget held by
// bodies kept young (connections opened again and again) still gives way.
func TestBodyJustBegunIsNotCutAsSlow(t *testing.T) {
	b := newBodyBudget(BodyLimits{MaxInflight: 2 * chunkSize, HealthyRate: 1 << 20})
	begun := &bodyRead{b: b, cutc: make(chan struct{}), start: time.Now()}
	if _, err := begun.grow(t.Context()); err != nil {
		t.Fatal(err)
	}
	fast := &bodyRead{b: b, cutc: make(chan struct{}), start: time.Now()}
	if _, err := fast.grow(t.Context()); err != nil {
		t.Fatal(err)
	}
	fast.n = chunkSize // it filled its chunk and needs another
	cutAt := make(chan time.Time, 1)
	go func() {
		<-begun.cutc
		cutAt <- time.Now()
		begun.release()
	}()
	if _, err := fast.grow(t.Context()); err != nil {
		t.Fatalf("a body needing room beside one just begun: %v, want the young one cut once it may be", err)
	}
	if at := <-cutAt; at.Sub(begun.start) < youngBody {
		t.Fatalf("the body just begun was cut as slow %v after it began, before %v", at.Sub(begun.start), youngBody)
	}
	fast.release()
	if b.inUse() != 0 {
		t.Fatalf("the budget holds %d bytes after both gave it back", b.inUse())
	}
}

// A body waiting in line for room has its bytes in, and its average rate
// would fall only because it waits: the time in line is left out of its
// rate, so another body needing room does not cut it as slow, meanwhile or
// after (it cuts the stalled one once that may be taken for slow).
func TestBodyWaitingForRoomIsNotCutAsSlow(t *testing.T) {
	b := newBodyBudget(BodyLimits{MaxInflight: 3 * chunkSize, HealthyRate: 64 << 10})
	stalled := &bodyRead{b: b, cutc: make(chan struct{}), start: time.Now()}
	if _, err := stalled.grow(t.Context()); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-stalled.cutc
		stalled.release()
	}()
	// Two healthy bodies (16 KiB in 100 ms) fill their chunks and wait
	// in line, for about a second, for the stalled one to be cut.
	var bodies []*bodyRead
	for range 2 {
		r := &bodyRead{b: b, cutc: make(chan struct{}), start: time.Now().Add(-100 * time.Millisecond)}
		if _, err := r.grow(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.n = chunkSize
		bodies = append(bodies, r)
	}
	got := make(chan error, 2)
	for _, r := range bodies {
		go func() {
			_, err := r.grow(t.Context())
			got <- err
		}()
	}
	var errs []error
	for range 2 {
		errs = append(errs, <-got)
	}
	for i, r := range bodies {
		if r.isCut() {
			t.Fatalf("body %d, healthy but for its time in line, was cut as slow (%v)", i, errs)
		}
	}
	if !stalled.isCut() || (errs[0] != nil) == (errs[1] != nil) {
		t.Fatalf("the stalled body cut: %v; the two in line: %v, want room for one and errBusy for the other", stalled.isCut(), errs)
	}
}

// A body that stalls past the grace period is cut with 408; the budget it
// held is given back.
func TestBodyRateFloor(t *testing.T) {
	s, hs := budgetServer(t, BodyLimits{MinRate: 64 << 10, Grace: time.Second})
	c := upload(t, hs.URL, 10)
	start := time.Now()
	if code, _ := answerOf(t, c); code != http.StatusRequestTimeout {
		t.Fatalf("a stalled body: %d, want 408", code)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a stalled body was cut after %s, want about the 1 s grace", took)
	}
	testkit.Eventually(t, "the budget is given back", func() bool { return s.bodies.inUse() == 0 })
}
