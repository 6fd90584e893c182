package server

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// ConnLimits bounds the connections clients may hold.
type ConnLimits struct {
	// Max connections open at once.
	Max int
	// PerAddr connections open at once from one client address. Behind a
	// trusted proxy it bounds requests in flight per forwarded client
	// address instead (see Handler).
	PerAddr int
	// Trusted proxies: only a connection from one of these may name its
	// client in X-Forwarded-For, and its own connections are not counted
	// per address (every client behind it shares them).
	Trusted []netip.Prefix
	// IPv6PrefixLen is how many leading bits of an IPv6 address make one
	// client for PerAddr: a /64 is the smallest allocation any host gets, so
	// one host can use every address in it. 0 means DefaultIPv6PrefixLen;
	// 128 counts each address alone. IPv4 addresses count one each.
	IPv6PrefixLen int
	// PendingPerAddr bounds the connections from one client address that
	// have been sending their first request's header for longer than
	// SlowHeader: past it that address's oldest such connection is closed
	// for the new one. 0 means DefaultPendingPerAddr(PerAddr). Slow headers
	// from a few addresses can so hold only a few slots each, whatever they
	// hold of PerAddr, while a burst of new connections from one address
	// (whose headers arrive at once) loses none.
	PendingPerAddr int
	// SlowHeader is how long a connection may take over its first
	// request's header before it counts as slow (0 means SlowHeader).
	SlowHeader time.Duration
	// Now is the limiter's clock (default time.Now).
	Now func() time.Time
	// Refused is called for each connection or request refused, with the
	// reason: "too_many_connections" or "too_many_from_address"; and for
	// each connection closed while it was still sending its first header
	// to make room for another: "header_cut_for_room".
	Refused func(reason string)
}

// ConnLimiter enforces ConnLimits. Wrap the listener with Listener, set
// http.Server.ConnState to ConnState (it learns which connections are idle
// from it), http.Server.ConnContext to ConnContext, and wrap the handler
// with Handler (it learns which connections have sent a whole header).
//
// When a new connection would pass a limit, the oldest idle keep-alive
// connection (of the same address, for the per-address limit) is closed to
// make room; failing that, the oldest connection that has been sending its
// first request's header for longer than SlowHeader, of the address holding
// the most such connections (of the same address, for the per-address
// limit). Only when there is neither is the new connection answered "503
// Service Unavailable" (with Retry-After) and closed. An address holding
// PendingPerAddr slow headers loses its oldest to its newest connection. So thousands of idle clients, or
// a few addresses trickling headers and reconnecting when the header
// timeout cuts them, cannot keep GitHub's deliveries out, and a flood
// degrades into quick refusals instead of exhausted file descriptors. A
// connection whose request has reached the handler (a delivery being read
// or answered) is never closed for another: the body guards and the read
// timeout cut those. A request that reaches an idle connection just as it
// is closed is lost as it would be at the idle timeout.
type ConnLimiter struct {
	lim     ConnLimits
	mu      sync.Mutex
	open    int
	byAddr  map[netip.Addr]int
	idle    *list.List         // of *limitConn, oldest idle first
	pending *list.List         // of *limitConn not yet past their first header, oldest first
	byAddrP map[netip.Addr]int // of pending, per client
	// requests in flight per forwarded client address, behind a trusted proxy
	inFlight map[netip.Addr]int
}

// DefaultIPv6PrefixLen is ConnLimits.IPv6PrefixLen when 0.
const DefaultIPv6PrefixLen = 64

// DefaultPendingPerAddr is ConnLimits.PendingPerAddr when 0: a quarter of
// the per-address limit, between 1 and 8. A client sends one header at a
// time per connection, and GitHub's deliveries finish theirs at once.
func DefaultPendingPerAddr(perAddr int) int {
	return min(8, max(1, perAddr/4))
}

// SlowHeader is ConnLimits.SlowHeader when 0: how long a connection may
// take over its first request's header before it counts as a slow one that
// a new connection may evict. GitHub sends a delivery's header in its
// first packet.
const SlowHeader = time.Second

func (cl *ConnLimiter) slowHeader() time.Duration {
	if cl.lim.SlowHeader > 0 {
		return cl.lim.SlowHeader
	}
	return SlowHeader
}

func (cl *ConnLimiter) now() time.Time {
	if cl.lim.Now != nil {
		return cl.lim.Now()
	}
	return time.Now()
}

func (cl *ConnLimiter) pendingCap() int {
	if cl.lim.PendingPerAddr > 0 {
		return cl.lim.PendingPerAddr
	}
	return DefaultPendingPerAddr(cl.lim.PerAddr)
}

// clientKey is what PerAddr counts a (connection or forwarded) client
// address as: itself for IPv4, its IPv6PrefixLen prefix for IPv6.
func (cl *ConnLimiter) clientKey(a netip.Addr) netip.Addr {
	if !a.Is6() {
		return a
	}
	bits := cl.lim.IPv6PrefixLen
	if bits <= 0 || bits > 128 {
		bits = DefaultIPv6PrefixLen
	}
	p, err := a.WithZone("").Prefix(bits)
	if err != nil {
		return a
	}
	return p.Addr()
}

// NewConnLimiter makes a limiter; a PerAddr below 1 turns the per-address
// limit off.
func NewConnLimiter(l ConnLimits) *ConnLimiter {
	return &ConnLimiter{lim: l, byAddr: map[netip.Addr]int{}, idle: list.New(), pending: list.New(), byAddrP: map[netip.Addr]int{},
		inFlight: map[netip.Addr]int{}}
}

// Listener wraps l so that every connection it accepts is counted.
func (cl *ConnLimiter) Listener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, cl: cl}
}

type limitListener struct {
	net.Listener
	cl *ConnLimiter
}

const (
	reasonTotal = "too_many_connections"
	reasonAddr  = "too_many_from_address"
	reasonCut   = "header_cut_for_room"
)

func refusal(msg string) []byte {
	return []byte(fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: text/plain\r\n"+
		"Content-Length: %d\r\n\r\n%s", len(msg), msg))
}

var refusals = map[string][]byte{
	reasonTotal: refusal("too many connections; retry soon\n"),
	reasonAddr:  refusal("too many connections from your address; close idle ones or retry soon\n"),
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, reason := l.cl.admit(c)
		if lc != nil {
			return lc, nil
		}
		if l.cl.lim.Refused != nil {
			l.cl.lim.Refused(reason)
		}
		go refuse(c, refusals[reason])
	}
}

// A refused connection is held at most refuseDrain, and at most
// refuseDrainBytes are read from it. Its request's header is waited for at
// most refuseHeaderWait before the 503 is written (an answer that arrives
// before the request looks unsolicited to clients; a client that says
// nothing still gets its 503 at once after it); what else it sent is read
// after the 503, because closing a socket with unread bytes in it sends a
// reset, which makes the client lose the 503 before reading it.
const (
	refuseDrain      = 250 * time.Millisecond
	refuseHeaderWait = 50 * time.Millisecond
	refuseDrainBytes = 64 << 10
)

// refuse reads c's request header (or what arrives within
// refuseHeaderWait), writes answer, half-closes the write side so the client
// sees the end of the answer, reads the rest the client sent (bounded) and
// closes c.
func refuse(c net.Conn, answer []byte) {
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(refuseHeaderWait))
	buf := make([]byte, 4<<10)
	for n := 0; n < len(buf); {
		k, err := c.Read(buf[n:])
		n += k
		if bytes.Contains(buf[:n], []byte("\r\n\r\n")) || err != nil {
			break
		}
	}
	c.SetDeadline(start.Add(refuseDrain))
	if _, err := c.Write(answer); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.CopyN(io.Discard, c, refuseDrainBytes)
}

// admit counts c in, closing idle connections, or connections still
// sending their first header, to make room if it must. It returns nil and
// the reason when c is refused.
func (cl *ConnLimiter) admit(c net.Conn) (*limitConn, string) {
	peer := addrOf(c.RemoteAddr().String())
	perAddr := cl.lim.PerAddr > 0 && !cl.trusted(peer)
	addr := cl.clientKey(peer)
	for {
		now := cl.now()
		cl.mu.Lock()
		overAddr := perAddr && cl.byAddr[addr] >= cl.lim.PerAddr
		overAll := cl.open >= cl.lim.Max
		var slowOwn *limitConn // addr's oldest slow header, when addr holds its share of them
		if perAddr {
			if n, oldest := cl.slowOf(addr, now); n >= cl.pendingCap() {
				slowOwn = oldest
			}
		}
		if !overAddr && !overAll && slowOwn == nil {
			cl.open++
			cl.byAddr[addr]++
			lc := &limitConn{Conn: c, cl: cl, addr: addr, at: now}
			lc.pend = cl.pending.PushBack(lc)
			cl.byAddrP[addr]++
			cl.mu.Unlock()
			return lc, ""
		}
		reason := reasonTotal
		if overAddr {
			reason = reasonAddr
		}
		victim := slowOwn
		if victim == nil {
			victim = cl.idleVictim(overAddr, addr)
		}
		if victim == nil && overAddr {
			_, victim = cl.slowOf(addr, now)
			if victim == nil && cl.byAddrP[addr] > cl.pendingCap() {
				victim = cl.oldestPending(addr)
			}
		}
		if victim == nil && !overAddr {
			victim = cl.slowest(now)
			if victim == nil {
				victim = cl.crowded()
			}
			if victim == nil && cl.pending.Len() > 0 {
				// Every slot holds a request still arriving, none slow yet
				// and no address over its share (many addresses rotating
				// their connections): the one arriving longest gives way.
				victim = cl.pending.Front().Value.(*limitConn)
			}
		}
		if victim == nil {
			cl.mu.Unlock()
			return nil, reason
		}
		cut := victim.pend != nil
		cl.detach(victim)
		victim.evicted = true
		cl.mu.Unlock()
		victim.Close() // releases its count; then try again
		if cut && cl.lim.Refused != nil {
			cl.lim.Refused(reasonCut)
		}
	}
}

// idleVictim is the oldest idle connection (of addr, when own), or nil.
// Called with cl.mu held.
func (cl *ConnLimiter) idleVictim(own bool, addr netip.Addr) *limitConn {
	for e := cl.idle.Front(); e != nil; e = e.Next() {
		if lc := e.Value.(*limitConn); !own || lc.addr == addr {
			return lc
		}
	}
	return nil
}

// slowOf counts addr's connections that have been sending their first
// header for longer than SlowHeader, and returns the oldest. Called with
// cl.mu held.
func (cl *ConnLimiter) slowOf(addr netip.Addr, now time.Time) (int, *limitConn) {
	n := 0
	var oldest *limitConn
	for e := cl.pending.Front(); e != nil; e = e.Next() {
		lc := e.Value.(*limitConn)
		if now.Sub(lc.at) < cl.slowHeader() {
			break // the list is in the order of arrival
		}
		if lc.addr == addr {
			if oldest == nil {
				oldest = lc
			}
			n++
		}
	}
	return n, oldest
}

// oldestPending is addr's oldest connection still sending its first
// header, or nil. Called with cl.mu held.
func (cl *ConnLimiter) oldestPending(addr netip.Addr) *limitConn {
	for e := cl.pending.Front(); e != nil; e = e.Next() {
		if lc := e.Value.(*limitConn); lc.addr == addr {
			return lc
		}
	}
	return nil
}

// crowded is, when no header is slow yet, the oldest connection still
// sending its first header of the address holding the most such
// connections, if that is more than PendingPerAddr (an address reconnecting
// faster than headers turn slow); else nil. A client opening a few
// connections at once is never one. Called with cl.mu held.
func (cl *ConnLimiter) crowded() *limitConn {
	var most netip.Addr
	n := 0
	for a, k := range cl.byAddrP {
		if k > n || (k == n && a.Less(most)) {
			most, n = a, k
		}
	}
	if n <= cl.pendingCap() {
		return nil
	}
	return cl.oldestPending(most)
}

// slowest is the oldest slow header of the address holding the most slow
// headers, or nil when none is slow. Called with cl.mu held.
func (cl *ConnLimiter) slowest(now time.Time) *limitConn {
	count := map[netip.Addr]int{}
	first := map[netip.Addr]*limitConn{}
	var most netip.Addr
	for e := cl.pending.Front(); e != nil; e = e.Next() {
		lc := e.Value.(*limitConn)
		if now.Sub(lc.at) < cl.slowHeader() {
			break
		}
		count[lc.addr]++
		if first[lc.addr] == nil {
			first[lc.addr] = lc
		}
		if count[lc.addr] > count[most] || first[most] == nil {
			most = lc.addr
		}
	}
	return first[most]
}

// detach takes lc off the idle and pending lists. Called with cl.mu held.
func (cl *ConnLimiter) detach(lc *limitConn) {
	if lc.elem != nil {
		cl.idle.Remove(lc.elem)
		lc.elem = nil
	}
	cl.started(lc)
}

// started takes lc off the pending list: its first header is in (or it is
// going). Called with cl.mu held.
func (cl *ConnLimiter) started(lc *limitConn) {
	if lc.pend == nil {
		return
	}
	cl.pending.Remove(lc.pend)
	lc.pend = nil
	if cl.byAddrP[lc.addr]--; cl.byAddrP[lc.addr] <= 0 {
		delete(cl.byAddrP, lc.addr)
	}
}

type connCtxKey struct{}

// bodyEnd calls end once the body has been read to its end.
type bodyEnd struct {
	io.ReadCloser
	end  func()
	once sync.Once
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.end)
	}
	return n, err
}

// unwrapConn is the connection under a TLS one (the limiter counts the
// TCP connection the TLS listener was given).
func unwrapConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// ConnContext is the http.Server's ConnContext hook: it lets Handler find
// the connection a request came on.
func (cl *ConnLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := unwrapConn(c).(*limitConn); ok {
		return context.WithValue(ctx, connCtxKey{}, lc)
	}
	return ctx
}

// ConnState is the http.Server's ConnState hook: it keeps the list of idle
// connections, oldest first.
func (cl *ConnLimiter) ConnState(c net.Conn, st http.ConnState) {
	lc, ok := unwrapConn(c).(*limitConn)
	if !ok {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if st == http.StateIdle {
		cl.started(lc) // a request was answered on it
		if lc.elem == nil && !lc.evicted && !lc.closed {
			lc.elem = cl.idle.PushBack(lc)
		}
		return
	}
	if lc.elem != nil {
		cl.idle.Remove(lc.elem)
		lc.elem = nil
	}
}

func (cl *ConnLimiter) trusted(a netip.Addr) bool {
	for _, p := range cl.lim.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// addrOf is the address of "host:port", unmapped from IPv6 so that one
// IPv4 client is one address; the zero Addr when it cannot be parsed.
func addrOf(hostport string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ClientAddr is the address a request comes from: the connection's peer,
// or, when the peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not itself a trusted proxy (read right to left, as
// each proxy appends the address it saw). An entry that does not parse
// stops the walk at the last address known good, so a client cannot hide
// behind garbage.
func (cl *ConnLimiter) ClientAddr(r *http.Request) netip.Addr {
	addr := addrOf(r.RemoteAddr)
	if !cl.trusted(addr) {
		return addr
	}
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return addr
			}
			addr = a.Unmap()
			if !cl.trusted(addr) {
				return addr
			}
		}
	}
	return addr
}

// ClientKey is the client a request counts as for per-client limits: its
// address (ClientAddr), an IPv6 one as its IPv6PrefixLen prefix, since one
// host holds every address of its /64.
func (cl *ConnLimiter) ClientKey(r *http.Request) netip.Addr { return cl.clientKey(cl.ClientAddr(r)) }

// Handler wraps h: a request reaching it marks its connection as past its
// first header (no longer evicted for a new connection), and requests that
// arrive through a trusted proxy are held to the per-address limit per
// forwarded client address (ClientAddr) instead, since their connections
// all come from the proxy: past it a request is answered 503 with
// Retry-After. Requests from other peers pass straight through: their
// connections are already limited per address.
func (cl *ConnLimiter) Handler(h http.Handler) http.Handler {
	forwarded := cl.forwarded(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := r.Context().Value(connCtxKey{}).(*limitConn)
		if !ok {
			forwarded.ServeHTTP(w, r)
			return
		}
		done := func() {
			cl.mu.Lock()
			cl.started(lc)
			cl.mu.Unlock()
		}
		// The connection stays one that may give way while its request is
		// still arriving: its header, then its body. Once the body is all
		// in (or the handler is done with it) it is never closed for another.
		if r.Body == nil || r.Body == http.NoBody {
			done()
		} else {
			r.Body = &bodyEnd{ReadCloser: r.Body, end: done}
		}
		defer done()
		forwarded.ServeHTTP(w, r)
	})
}

func (cl *ConnLimiter) forwarded(h http.Handler) http.Handler {
	if len(cl.lim.Trusted) == 0 || cl.lim.PerAddr < 1 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cl.trusted(addrOf(r.RemoteAddr)) {
			h.ServeHTTP(w, r)
			return
		}
		client := cl.clientKey(cl.ClientAddr(r))
		cl.mu.Lock()
		ok := cl.inFlight[client] < cl.lim.PerAddr
		if ok {
			cl.inFlight[client]++
		}
		cl.mu.Unlock()
		if !ok {
			if cl.lim.Refused != nil {
				cl.lim.Refused(reasonAddr)
			}
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, "too many requests at once from your address; retry soon", http.StatusServiceUnavailable)
			return
		}
		defer func() {
			cl.mu.Lock()
			if cl.inFlight[client]--; cl.inFlight[client] <= 0 {
				delete(cl.inFlight, client)
			}
			cl.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

type limitConn struct {
	net.Conn
	cl   *ConnLimiter
	addr netip.Addr
	once sync.Once
	// under cl.mu
	elem    *list.Element // in cl.idle while idle
	pend    *list.Element // in cl.pending until its first header is in
	at      time.Time     // when it was accepted
	evicted bool          // closed to make room; never idle again
	closed  bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		cl := c.cl
		cl.mu.Lock()
		defer cl.mu.Unlock()
		c.closed = true
		cl.detach(c)
		cl.open--
		if cl.byAddr[c.addr]--; cl.byAddr[c.addr] <= 0 {
			delete(cl.byAddr, c.addr)
		}
	})
	return err
}
