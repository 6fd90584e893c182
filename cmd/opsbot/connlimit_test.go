package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// dialFrom opens a connection to the server from a loopback address (all
// of 127.0.0.0/8 is local on Linux).
func dialFrom(t *testing.T, from, serverURL string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(serverURL, "http://"))
	if err != nil {
		t.Fatalf("dialing from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// keepAlive is a client connection that has had one request answered and
// now sits idle, as a keep-alive client between requests.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

// get sends GET path on the connection and returns the response's status.
func (k *keepAlive) get(t *testing.T, path string, header ...string) (int, error) {
	t.Helper()
	fmt.Fprintf(k, "GET %s HTTP/1.1\r\nHost: opsbot\r\n%s\r\n", path, strings.Join(header, ""))
	k.SetReadDeadline(testkit.Deadline(t))
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func openIdle(t *testing.T, from, serverURL string) *keepAlive {
	t.Helper()
	c := dialFrom(t, from, serverURL)
	k := &keepAlive{Conn: c, r: bufio.NewReader(c)}
	if code, err := k.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz on a new connection from %s: %d %v", from, code, err)
	}
	return k
}

// signedDelivery posts a signed synchronize on a connection of its own.
func signedDelivery(t *testing.T, w *world, from string) (int, string) {
	t.Helper()
	return signedDeliveryOf(t, w, from, sha("c1"))
}

// signedDeliveryOf posts a signed synchronize of head on a connection of its own.
func signedDeliveryOf(t *testing.T, w *world, from, head string) (int, string) {
	t.Helper()
	body, err := json.Marshal(w.SyncPayload(head))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(
		fixtures.SignedRequest(t, w.Srv.URL+"/webhook", "pull_request", w.ID(), body, testSecret))
	if err != nil {
		// Not accepted: a connection cut while the request was written (the
		// server cutting a client it took for slow, on a loaded machine)
		// counts as GitHub would see it, a delivery to retry.
		return 0, fmt.Sprintf("signed delivery from %s: %v", from, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Idle keep-alive clients filling http.max_connections do not keep GitHub
// out: a new connection closes the oldest idle one and a signed delivery is
// stored; the newest idle client is still served.
func TestIdleConnectionsGiveWayToDeliveries(t *testing.T) {
	w := newWorldWith(t, "http:\n  max_connections: 20\n", "", nil)
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var idle []*keepAlive
	for range 20 {
		idle = append(idle, openIdle(t, "127.0.0.1", w.Srv.URL))
	}
	if code, body := signedDelivery(t, w, "127.0.0.1"); code != http.StatusAccepted {
		t.Fatalf("a signed delivery with the connection limit filled by idle clients: %d %s, want 202", code, body)
	}
	oldest := idle[0]
	oldest.SetReadDeadline(testkit.Deadline(t))
	if n, err := oldest.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the oldest idle connection is still open (read %d bytes)", n)
	}
	if code, err := idle[19].get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("the newest idle client was not served again: %d %v", code, err)
	}
	w.Settle()
}

// One address over http.max_connections_per_ip is refused while another
// address is served; an address at its limit with idle connections closes
// its own oldest idle one instead of being refused.
func TestPerAddressConnectionLimit(t *testing.T) {
	// Up to four headers in progress per address are left alone.
	w := newWorldWith(t, "http:\n  read_header_timeout: 10s\n  max_connections_per_ip: 4\n  max_pending_per_ip: 4\n", "", nil)
	// 127.0.0.2 holds four requests in flight (their bodies not yet sent).
	for range 4 {
		c := dialFrom(t, "127.0.0.2", w.Srv.URL)
		fmt.Fprint(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\n"+
			"X-GitHub-Delivery: d\r\nX-Hub-Signature-256: sha256="+strings.Repeat("0", 64)+"\r\nContent-Length: 100\r\n\r\n{")
	}
	testkit.Eventually(t, "a fifth connection from 127.0.0.2 is refused", func() bool {
		over := &keepAlive{Conn: dialFrom(t, "127.0.0.2", w.Srv.URL)}
		over.r = bufio.NewReader(over.Conn)
		code, err := over.get(t, "/healthz")
		over.Close()
		return err == nil && code == http.StatusServiceUnavailable
	})

	if code, body := signedDelivery(t, w, "127.0.0.1"); code != http.StatusAccepted {
		t.Fatalf("a signed delivery from 127.0.0.1 while 127.0.0.2 is at its limit: %d %s, want 202", code, body)
	}

	// 127.0.0.3 at its limit with idle connections: its oldest gives way.
	var idle []*keepAlive
	for range 4 {
		idle = append(idle, openIdle(t, "127.0.0.3", w.Srv.URL))
	}
	fifth := openIdle(t, "127.0.0.3", w.Srv.URL)
	idle[0].SetReadDeadline(testkit.Deadline(t))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("127.0.0.3's oldest idle connection is still open")
	}
	if code, err := fifth.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("127.0.0.3's newest connection: %d %v", code, err)
	}
	if m := w.Metrics(); m[`opsbot_webhook_deliveries_total{event="other",outcome="too_many_from_address"}`] == "0" {
		t.Errorf("refusals per address counted %q, want at least 1", m[`opsbot_webhook_deliveries_total{event="other",outcome="too_many_from_address"}`])
	}
	w.Settle()
}

// An address at its limit with connections still sending their first
// header (a few more than http.max_pending_per_ip) closes its oldest for a
// new connection instead of being refused.
func TestUnfinishedHeadersGiveWayPerAddress(t *testing.T) {
	w := newWorldWith(t, "http:\n  read_header_timeout: 10s\n  max_connections_per_ip: 4\n", "", nil) // max_pending_per_ip 1
	var slow []net.Conn
	for range 4 {
		c := dialFrom(t, "127.0.0.4", w.Srv.URL)
		fmt.Fprint(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\n") // and not the rest yet
		slow = append(slow, c)
	}
	fresh := &keepAlive{Conn: dialFrom(t, "127.0.0.4", w.Srv.URL)}
	fresh.r = bufio.NewReader(fresh.Conn)
	if code, err := fresh.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("a fifth connection from 127.0.0.4: %d %v, want 200", code, err)
	}
	slow[0].SetReadDeadline(testkit.Deadline(t))
	if _, err := slow[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("127.0.0.4's oldest unfinished header is still open")
	}
}

// Behind a trusted proxy every client shares the proxy's connections: the
// proxy is not limited per address, and requests in flight are limited per
// client address it forwards. X-Forwarded-For from anyone else is ignored.
func TestTrustedProxyForwardedClients(t *testing.T) {
	// The two requests below stay in flight however slowly a loaded
	// machine runs the test: the body-rate floor is off, and a request
	// still arriving counts as slow (and gives way to a new connection of
	// the proxy's) only after a minute, not the default second.
	w := newWorldWith(t, "http:\n  read_header_timeout: 10s\n  max_connections_per_ip: 2\n  trusted_proxies: [\"127.0.0.2/32\"]\n"+
		"  slow_header: 1m\nwebhook:\n  min_body_rate: -1\n", "", nil)
	// The proxy holds more connections than one address may.
	for range 3 {
		openIdle(t, "127.0.0.2", w.Srv.URL)
	}
	// Two requests of client 203.0.113.7 in flight (bodies not yet sent).
	for range 2 {
		c := dialFrom(t, "127.0.0.2", w.Srv.URL)
		// Signed (the signature is read after the body), so the server
		// reads the body and the request stays in flight.
		fmt.Fprint(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\nX-Forwarded-For: 203.0.113.7\r\nX-GitHub-Event: ping\r\n"+
			"X-GitHub-Delivery: d\r\nX-Hub-Signature-256: sha256="+strings.Repeat("0", 64)+"\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\n\r\n{")
	}
	// Once both have reached the server, a third is refused. The proxy
	// appends the peer it saw; a client may prepend anything.
	testkit.Eventually(t, "a third request in flight for 203.0.113.7 through the proxy is refused", func() bool {
		third := openIdleWithHeader(t, "127.0.0.2", w.Srv.URL)
		code, err := third.get(t, "/healthz", "X-Forwarded-For: 10.9.9.9, 203.0.113.7\r\n")
		third.Close()
		return err == nil && code == http.StatusServiceUnavailable
	})
	other := openIdleWithHeader(t, "127.0.0.2", w.Srv.URL)
	if code, err := other.get(t, "/healthz", "X-Forwarded-For: 203.0.113.8\r\n"); err != nil || code != http.StatusOK {
		t.Fatalf("another client through the proxy: %d %v, want 200", code, err)
	}
	// From an untrusted peer the header means nothing: its connections are
	// counted as its own.
	direct := openIdleWithHeader(t, "127.0.0.1", w.Srv.URL)
	if code, err := direct.get(t, "/healthz", "X-Forwarded-For: 203.0.113.7\r\n"); err != nil || code != http.StatusOK {
		t.Fatalf("a direct client naming 203.0.113.7: %d %v, want 200", code, err)
	}
}

func openIdleWithHeader(t *testing.T, from, serverURL string) *keepAlive {
	t.Helper()
	c := dialFrom(t, from, serverURL)
	return &keepAlive{Conn: c, r: bufio.NewReader(c)}
}

// Slow headers cannot fill http.max_connections: four addresses holding
// every slot with partial request headers, and reconnecting whenever one is
// cut, keep few slots each, and GitHub's signed deliveries get in.
func TestSlowHeadersDoNotKeepDeliveriesOut(t *testing.T) {
	w := newWorldWith(t, "http:\n  max_connections: 48\n  max_connections_per_ip: 12\n  read_header_timeout: 2s\n  slow_header: 20ms\n", "", nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	var held atomic.Int64
	for a := 2; a <= 5; a++ {
		from := fmt.Sprintf("127.0.0.%d", a)
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
					c, err := d.Dial("tcp", strings.TrimPrefix(w.Srv.URL, "http://"))
					if err != nil {
						continue
					}
					held.Add(1)
					fmt.Fprint(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\nX-GitHub-Event: pull_request\r\n") // and never the rest
					go func() { <-stop; c.Close() }()
					c.Read(make([]byte, 1)) // until the server cuts it
					c.Close()
				}
			}()
		}
	}
	testkit.Eventually(t, "the slow headers hold the slots", func() bool { return held.Load() >= 48 })
	accepted := 0
	for i := range 10 {
		if code, body := signedDeliveryOf(t, w, "127.0.0.9", sha(fmt.Sprintf("d%d", i))); code == http.StatusAccepted {
			accepted++
		} else {
			t.Logf("delivery: %d %s", code, body)
		}
	}
	if accepted < 9 {
		t.Fatalf("%d of 10 signed deliveries accepted while slow headers held the slots, want at least 9", accepted)
	}
}

// Requests whose header is in but whose body stalls cannot fill
// http.max_connections either: a request is one that may give way until its
// body is all in, so GitHub's deliveries get in.
func TestStalledBodiesDoNotKeepDeliveriesOut(t *testing.T) {
	w := newWorldWith(t, "http:\n  max_connections: 16\n  max_connections_per_ip: 4\n  slow_header: 20ms\n", "", nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	var held atomic.Int64
	for a := 2; a <= 5; a++ {
		from := fmt.Sprintf("127.0.0.%d", a)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
					c, err := d.Dial("tcp", strings.TrimPrefix(w.Srv.URL, "http://"))
					if err != nil {
						continue
					}
					held.Add(1)
					fmt.Fprint(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\nContent-Type: application/json\r\nX-GitHub-Event: ping\r\n"+
						"X-GitHub-Delivery: d\r\nX-Hub-Signature-256: sha256="+strings.Repeat("0", 64)+"\r\nContent-Length: 100\r\n\r\n{")
					go func() { <-stop; c.Close() }()
					c.Read(make([]byte, 1)) // until the server cuts it
					c.Close()
				}
			}()
		}
	}
	testkit.Eventually(t, "the stalled bodies hold the slots", func() bool { return held.Load() >= 16 })
	accepted := 0
	for i := range 10 {
		if code, body := signedDeliveryOf(t, w, "127.0.0.9", sha(fmt.Sprintf("e%d", i))); code == http.StatusAccepted {
			accepted++
		} else {
			t.Logf("delivery: %d %s", code, body)
		}
	}
	if accepted < 9 {
		t.Fatalf("%d of 10 signed deliveries accepted while stalled bodies held the slots, want at least 9", accepted)
	}
}
