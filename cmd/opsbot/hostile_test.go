package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// A client that sends its headers slowly is cut off; many open connections
// past the limit are refused quickly with 503 and the server stays up.
func TestSlowClientsAndConnectionFlood(t *testing.T) {
	w := newWorldWith(t, "http:\n  read_header_timeout: 300ms\n  max_connections: 20\n", "", nil)
	host := strings.TrimPrefix(w.Srv.URL, "http://")

	slow, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.Write([]byte("POST /webhook HTTP/1.1\r\nHost: x\r\n")) // and never the rest
	slow.SetReadDeadline(testkit.Deadline(t))
	start := time.Now()
	io.ReadAll(slow) // returns when the server closes the connection
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a slow client held its connection for %s", took)
	}

	// A flood: open connections that say nothing (within the header timeout).
	w2 := newWorldWith(t, "http:\n  read_header_timeout: 5s\n  max_connections: 20\n", "", nil)
	host = strings.TrimPrefix(w2.Srv.URL, "http://")
	w = w2
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Past the limit a connection is refused (503), or, all from one
	// address saying nothing, closes the oldest of that address's.
	refused := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		line, err := bufio.NewReader(c).ReadString('\n')
		var ne net.Error
		if strings.HasPrefix(line, "HTTP/1.1 503") || (err != nil && !(errors.As(err, &ne) && ne.Timeout())) {
			refused++
		}
	}
	if refused < 15 || refused > 25 {
		t.Fatalf("%d of 40 connections refused or closed, want the ones past the limit of 20", refused)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	testkit.Eventually(t, "the server takes connections again", func() bool {
		resp, err := http.Get(w.Srv.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if m := w.Metrics(); m[`opsbot_webhook_deliveries_total{event="other",outcome="too_many_connections"}`] == "" &&
		m[`opsbot_webhook_deliveries_total{event="other",outcome="header_cut_for_room"}`] == "" {
		t.Error("refused connections are not counted")
	}
}

// GitHub failing to take a reply delays it; it is posted once when GitHub recovers.
func TestRepliesSurviveGitHubErrors(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.GH.Inject("POST /repos/{owner}/{repo}/issues/{n}/comments", githubtest.Fault{Status: 500, Times: 2})
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/opsbot help")
	announceComment(t, w, c.ID)
	testkit.Eventually(t, "the reply is posted after GitHub recovers", func() bool { return len(w.Replies()) == 1 })
	w.Settle()
	if n := len(w.Replies()); n != 1 {
		t.Fatalf("%d replies, want exactly 1", n)
	}
	if m := w.Metrics(); m[`opsbot_notices_total{channel="github",outcome="retried"}`] != "2" {
		t.Fatalf("retried notices metric = %q", m[`opsbot_notices_total{channel="github",outcome="retried"}`])
	}
}
