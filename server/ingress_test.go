package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// limitedServer is serve.go's wiring on loopback, with scaled timeouts.
func limitedServer(t *testing.T, maxConns int, lim BodyLimits, readHdr, read time.Duration, perAddr ...int) (*Server, string) {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lim.ReadTimeout = read
	s := New(Config{Commands: commandstest.Registry(), Store: st, Queue: &queue{}, Secrets: []auth.Secret{secret}, MaxBody: 1 << 20, Body: lim,
		RepoName: func(n string) (string, bool) { return "Codertocat/Hello-World", true },
		Metrics:  metrics.New(nil, nil, time.Now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pa := 64
	if len(perAddr) > 0 {
		pa = perAddr[0]
	}
	cl := NewConnLimiter(ConnLimits{Max: maxConns, PerAddr: pa})
	hs := &http.Server{Handler: cl.Handler(s), ConnState: cl.ConnState, ConnContext: cl.ConnContext, ReadHeaderTimeout: readHdr, ReadTimeout: read,
		WriteTimeout: 2 * read, IdleTimeout: 2 * read, MaxHeaderBytes: 64 << 10}
	go hs.Serve(cl.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	return s, ln.Addr().String()
}

func signedDelivery(t *testing.T, addr, id string) (int, error) {
	t.Helper()
	body := fixtures.Webhook(t, "pull_request", "synchronize")
	req := fixtures.SignedRequest(t, "http://"+addr+"/webhook", "pull_request", id, body, secret)
	cli := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cli.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Requests whose body no handler reads (health, a 404, webhooks refused for
// their headers) are answered with "Connection: close" and give their
// connection back within the rate floor's grace plus the unread drain, not
// http.read_timeout: four of them cannot keep a signed delivery out of four
// slots.
func TestUnreadBodiesDoNotHoldConnectionSlots(t *testing.T) {
	// scaled: header timeout 1 s, grace 1 s, read timeout 8 s (prod: 10 s, 10 s, 60 s)
	_, addr := limitedServer(t, 4, BodyLimits{MinRate: 16 << 10, Grace: time.Second}, time.Second, 8*time.Second)
	reqs := []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n",
		"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nX-GitHub-Event: x\r\nX-GitHub-Delivery: y\r\nContent-Length: 1000\r\n\r\n",
		"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", // no event header: 400
	}
	start := time.Now()
	closed := make(chan error, len(reqs))
	for _, r := range reqs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, r)
		go func() {
			c.SetReadDeadline(testkit.Deadline(t))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				closed <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if !resp.Close {
				closed <- errors.New(r[:20] + "…: answered without Connection: close")
				return
			}
			_, err = br.ReadByte()
			if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				closed <- fmt.Errorf("%q: the connection was not closed after the answer: %v", r[:20], err)
				return
			}
			closed <- nil
		}()
	}
	for range reqs {
		if err := <-closed; err != nil {
			t.Error(err)
		}
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("connections with unread bodies closed after %s, want within the grace (1 s) + the drain (%s)", d, unreadDrain)
	}
	code, err := signedDelivery(t, addr, "g-1")
	if code != http.StatusAccepted || err != nil {
		t.Errorf("signed delivery after four requests that sent no body: %d %v, want 202", code, err)
	}
}

// The same slots held by stalled webhook bodies are cut by the rate floor
// after the grace, and the delivery gets in.
func TestStalledWebhookBodiesGiveWayToADelivery(t *testing.T) {
	_, addr := limitedServer(t, 4, BodyLimits{MinRate: 16 << 10, Grace: time.Second}, time.Second, 8*time.Second)
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: x\r\nX-GitHub-Delivery: y\r\nContent-Length: 1000\r\n\r\n")
	}
	deadline := testkit.Deadline(t)
	for {
		code, err := signedDelivery(t, addr, "g-2")
		if code == http.StatusAccepted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("signed delivery with four stalled webhook bodies past the grace: %d %v, want 202", code, err)
		}
		<-time.After(100 * time.Millisecond) // the poll's interval
	}
}

type fakeConn struct {
	net.Conn
	addr net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.addr }
func (f fakeConn) Close() error         { return nil }

// One IPv6 host owns a whole /64: its addresses share the per-address
// limit; another /64 is another client; ipv6_prefix_len 128 counts each
// address alone.
func TestIPv6ClientsAreLimitedPerPrefix(t *testing.T) {
	// open is how many connections from n addresses of base's /64 are open
	// at once (a new one may close an older one of the same client).
	open := func(cl *ConnLimiter, base string, n int) int {
		for i := 0; i < n; i++ {
			b := netip.MustParseAddr(base).As16()
			b[14], b[15] = byte(i>>8), byte(i)
			a := netip.AddrFrom16(b)
			cl.admit(fakeConn{addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 40000))})
		}
		cl.mu.Lock()
		defer cl.mu.Unlock()
		k := 0
		for e := cl.pending.Front(); e != nil; e = e.Next() {
			if a := e.Value.(*limitConn).addr; a == cl.clientKey(netip.MustParseAddr(base)) || cl.lim.IPv6PrefixLen == 128 {
				k++
			}
		}
		return k
	}
	cl := NewConnLimiter(ConnLimits{Max: 2000, PerAddr: 64})
	if n := open(cl, "2001:db8:1:2::", 500); n != 64 {
		t.Errorf("one /64 (500 addresses) holds %d connections, want 64", n)
	}
	if n := open(cl, "2001:db8:1:3::", 10); n != 10 {
		t.Errorf("the next /64 holds %d of 10", n)
	}
	cl = NewConnLimiter(ConnLimits{Max: 2000, PerAddr: 64, IPv6PrefixLen: 128})
	if n := open(cl, "2001:db8:1:2::", 500); n != 500 {
		t.Errorf("with ipv6_prefix_len 128: %d of 500 open, want every one", n)
	}

	// Behind a trusted proxy, forwarded clients are keyed the same way.
	cl = NewConnLimiter(ConnLimits{Max: 2000, PerAddr: 1, Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	release := make(chan struct{})
	entered := make(chan struct{})
	h := cl.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	req := func(xff string) *http.Request {
		r, _ := http.NewRequest("GET", "http://x/healthz", nil)
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header.Set("X-Forwarded-For", xff)
		return r
	}
	go h.ServeHTTP(discard{}, req("2001:db8:1:2::1"))
	<-entered
	rec := &recorder{h: http.Header{}}
	h.ServeHTTP(rec, req("2001:db8:1:2::2"))
	close(release)
	if rec.code != http.StatusServiceUnavailable {
		t.Errorf("a second request in flight from the same forwarded /64: %d, want 503", rec.code)
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }

// A crowd of small bodies that stopped arriving cannot keep out a signed
// delivery larger than each of them plus a chunk: the slowest is cut for
// it.
func TestSmallSlowBodiesCannotStarveALargerDelivery(t *testing.T) {
	s, hs := budgetServer(t, BodyLimits{MaxInflight: 8 * chunkSize, HealthyRate: 1 << 20})
	for i := 0; i < 4; i++ {
		upload(t, hs.URL, chunkSize+1) // holds 2 chunks
	}
	testkit.Eventually(t, "budget full", func() bool { return s.bodies.inUse() == 8*chunkSize })
	testkit.Eventually(t, "the small bodies have stalled below the healthy rate", func() bool { return s.bodies.slowerThanHealthy() == 4 })
	payload := bytes.Repeat([]byte("a"), 40<<10) // a 40 KiB delivery: 3 chunks
	body := []byte(`{"action":"synchronize","number":1,"repository":{"full_name":"Codertocat/Hello-World"},"x":"` + string(payload) + `"}`)
	resp, err := http.DefaultClient.Do(fixtures.SignedRequest(t, hs.URL+"/webhook", "pull_request", "big-1", body, secret))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("a signed 40 KiB delivery with the budget held by stalled 2-chunk bodies: %d, want 202", resp.StatusCode)
	}
}

// A connection refused at the limit gets its 503 even when it has sent a
// request the server never reads: the server half-closes and drains
// briefly (up to refuseDrainBytes) instead of resetting the connection.
func TestRefusedConnectionReadsThe503(t *testing.T) {
	// One connection per address: a second from this one is refused, since
	// the one it holds is neither idle nor slow nor past its share.
	_, addr := limitedServer(t, 10, BodyLimits{}, time.Second, 8*time.Second, 1)
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	io.WriteString(hold, "POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	cli := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 5; i++ {
		resp, err := cli.Post("http://"+addr+"/webhook", "application/json", bytes.NewReader(make([]byte, 32<<10)))
		if err != nil {
			t.Fatalf("refused connection %d: %v, want to read a 503", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("refused connection %d: %d, want 503 with Retry-After", i, resp.StatusCode)
		}
	}
}

// A signed delivery arriving at a healthy rate is not cut for a smaller
// attacker body that needs room: the attacker body is refused, and the
// delivery, once all in, is stored.
func TestHealthyDeliveryIsNotCutForASmallerBody(t *testing.T) {
	s, hs := budgetServer(t, BodyLimits{MaxInflight: 8 * chunkSize})
	payload := bytes.Repeat([]byte("a"), 7*chunkSize)
	body := []byte(`{"action":"synchronize","number":1,"repository":{"full_name":"Codertocat/Hello-World"},"x":"` + string(payload) + `"}`)
	req := fixtures.SignedRequest(t, hs.URL+"/webhook", "pull_request", "healthy-1", body, secret)
	half := 6*chunkSize + 100
	pr, pw := io.Pipe()
	req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:half]), pr))
	req.ContentLength = int64(len(body))
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go req.Write(c)
	testkit.Eventually(t, "the delivery holds 7 chunks", func() bool { return s.bodies.inUse() == 7*chunkSize })

	small := upload(t, hs.URL, 2*chunkSize+1) // needs 3 chunks, 1 is free
	if code, _ := answerOf(t, small); code != http.StatusServiceUnavailable {
		t.Fatalf("a small body with the budget held by a healthy delivery: %d, want 503", code)
	}
	pw.Write(body[half:])
	pw.Close()
	if code, _ := answerOf(t, c); code != http.StatusAccepted {
		t.Fatalf("the healthy delivery: %d, want 202", code)
	}
}
