package server

import (
	"net/http"
	"net/netip"
	"testing"
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
