package server

import (
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	cl := NewConnLimiter(ConnLimits{Max: 10, PerAddr: 2,
		Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}})
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"direct client, header ignored", "203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},
		{"trusted proxy, no header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"trusted proxy names the client", "10.1.2.3:4000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"client-prepended entries are skipped", "10.1.2.3:4000", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"a chain of trusted proxies", "10.1.2.3:4000", []string{"198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"several header lines read as one list", "10.1.2.3:4000", []string{"1.1.1.1", "198.51.100.1, 10.0.0.5"}, "198.51.100.1"},
		{"garbage stops at the last good hop", "10.1.2.3:4000", []string{"198.51.100.1, nonsense"}, "10.1.2.3"},
		{"IPv4 mapped in IPv6 is one address", "[::ffff:203.0.113.9]:4000", nil, "203.0.113.9"},
		{"IPv6 proxy", "[fd00::1]:4000", []string{"2001:db8::7"}, "2001:db8::7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := cl.ClientAddr(r); got.String() != tc.want {
				t.Fatalf("ClientAddr = %s, want %s", got, tc.want)
			}
		})
	}
}

// When every slot is taken, a new connection closes the oldest slow header
// of the address holding the most of them; an address past its share of
// slow headers closes its own oldest; a header still arriving (younger than
// SlowHeader) from an address with few of them is never closed.
func TestSlowHeadersGiveWay(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cl := NewConnLimiter(ConnLimits{Max: 6, PerAddr: 8, PendingPerAddr: 3, Now: func() time.Time { return now }})
	conn := func(ip string) *limitConn {
		t.Helper()
		lc, reason := cl.admit(fakeConn{addr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 40000))})
		if lc == nil {
			t.Fatalf("a connection from %s refused: %s", ip, reason)
		}
		return lc
	}
	a1, a2 := conn("192.0.2.1"), conn("192.0.2.1")
	b1 := conn("192.0.2.2")
	now = now.Add(2 * SlowHeader) // those three are slow now
	a3, c1 := conn("192.0.2.1"), conn("192.0.2.3")
	d1 := conn("192.0.2.4") // the sixth: every slot taken
	if a1.evicted || a2.evicted || b1.evicted || cl.open != 6 {
		t.Fatalf("closed before the limit: open %d", cl.open)
	}
	conn("192.0.2.5") // closes 192.0.2.1's oldest slow header
	if !a1.evicted || a2.evicted || b1.evicted || a3.evicted || c1.evicted || d1.evicted {
		t.Fatalf("evicted: a1 %v a2 %v b1 %v a3 %v c1 %v d1 %v; want a1 only", a1.evicted, a2.evicted, b1.evicted, a3.evicted, c1.evicted, d1.evicted)
	}
	// 192.0.2.6 has nothing slow to give; the slow ones left are a2 and b1:
	// a2's address still holds the most.
	conn("192.0.2.6")
	if !a2.evicted || b1.evicted {
		t.Fatalf("evicted a2 %v b1 %v, want a2", a2.evicted, b1.evicted)
	}
	// An address holding PendingPerAddr slow headers loses its oldest to
	// its newest connection, limits or not.
	cl = NewConnLimiter(ConnLimits{Max: 100, PerAddr: 8, PendingPerAddr: 2, Now: func() time.Time { return now }})
	x1, x2 := conn("198.51.100.1"), conn("198.51.100.1")
	now = now.Add(2 * SlowHeader)
	conn("198.51.100.1")
	if !x1.evicted || x2.evicted {
		t.Fatalf("evicted x1 %v x2 %v, want x1", x1.evicted, x2.evicted)
	}
}

// One IPv6 host is one client for per-client limits: every address of its
// /64 has the same key; behind a trusted proxy the forwarded one counts.
func TestClientKeyGroupsAnIPv6Prefix(t *testing.T) {
	cl := NewConnLimiter(ConnLimits{Max: 10, PerAddr: 2})
	key := func(remote string) netip.Addr {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.RemoteAddr = remote
		return cl.ClientKey(r)
	}
	if a, b := key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:2:ffff::9]:1"); a != b {
		t.Fatalf("two addresses of one /64: %v and %v", a, b)
	}
	if a, b := key("[2001:db8:1:2::1]:1"), key("[2001:db8:1:3::1]:1"); a == b {
		t.Fatalf("two /64s share a key: %v", a)
	}
}
