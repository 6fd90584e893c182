package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// vmRSS is the resident memory of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// Fifty unsigned 25 MiB uploads that send slowly and stop short keep the
// server's resident memory under 150 MB: bodies are read into a global
// budget (webhook.max_inflight_bytes) that grows as bytes arrive, never by
// the declared length, and senders that stall are cut by the rate floor.
// Meanwhile signed small deliveries are accepted.
func TestUnsignedUploadsCostBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary and sends 300 MB")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startBinary(t, bin, writeConfig(t, dir, "webhook:\n  min_body_rate_grace: 2s\n"))
	pid := p.cmd.Process.Pid
	host := strings.TrimPrefix(p.url, "http://")

	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss := vmRSS(t, pid); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	const (
		uploads  = 50
		declared = 25 << 20
		sendEach = 6 << 20 // then stop short, as a slow client would
		block    = 128 << 10
	)
	var sent atomic.Int64
	answers := make([]string, uploads)
	var wg sync.WaitGroup
	for i := range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", host)
			if err != nil {
				answers[i] = "dial: " + err.Error()
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /webhook HTTP/1.1\r\nHost: opsbot\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\n"+
				"X-GitHub-Delivery: unsigned-%d\r\nX-Hub-Signature-256: sha256=%064d\r\nContent-Length: %d\r\n\r\n", i, 0, declared)
			buf := make([]byte, block)
			for j := range buf {
				buf[j] = 'x'
			}
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for n := 0; n < sendEach; n += block {
				c.SetWriteDeadline(testkit.Deadline(t))
				if _, err := c.Write(buf); err != nil {
					break // cut by the server
				}
				sent.Add(block)
				<-tick.C
			}
			c.SetReadDeadline(testkit.Deadline(t))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i] = "closed"
				return
			}
			io.Copy(io.Discard, resp.Body)
			answers[i] = strconv.Itoa(resp.StatusCode)
		}()
	}

	// With more sent than the budget holds, signed deliveries still get in.
	testkit.Eventually(t, "the uploads have sent 100 MiB", func() bool { return sent.Load() >= 100<<20 })
	body := fixtures.Webhook(t, "pull_request", "synchronize")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		// Each delivery says something new: the same body under another id is a duplicate.
		own := []byte(strings.Replace(string(body), `"number": 2,`, fmt.Sprintf(`"number": 2, "seq": %d,`, i), 1))
		resp, err := client.Do(fixtures.SignedRequest(t, p.url+"/webhook", "pull_request", fmt.Sprintf("signed-%d", i), own, testSecret))
		if err != nil {
			t.Fatalf("signed delivery %d during the uploads: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("signed delivery %d during the uploads: %d %s, want 202", i, resp.StatusCode, b)
		}
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-testkit.Expired(t):
		t.Fatal("the uploads were not all answered or cut")
	}
	close(stopSampling)
	<-sampled
	if got, limit := peak.Load(), int64(150e6); got > limit {
		t.Errorf("server resident memory peaked at %d MB, want under %d MB", got/1e6, limit/1e6)
	}
	counts := map[string]int{}
	for _, a := range answers {
		counts[a]++
	}
	for a := range counts {
		if a != "503" && a != "408" && a != "closed" {
			t.Errorf("an unsigned upload stopped short was answered %q: %v", a, counts)
		}
	}
	t.Logf("peak resident memory %d MB; uploads answered %v", peak.Load()/1e6, counts)
}
