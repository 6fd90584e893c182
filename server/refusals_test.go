package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/metrics"
)

// syncBuffer is a log sink the handler goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON log lines written so far, decoded.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A delivery refused for its body (malformed JSON, too large, a content
// type GitHub does not send, a form without its payload) is logged with its
// delivery id, event, remote address and cause: the first of each cause at
// once, then at most one a minute per cause, which counts those left out.
func TestBodyRefusalsAreLoggedRateLimited(t *testing.T) {
	_, st, _ := newServer(t, nil)
	sink := &syncBuffer{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Commands: commandstest.Registry(), Store: st, Queue: &queue{}, Secrets: []auth.Secret{secret},
		MaxBody: 4096, RepoName: func(n string) (string, bool) { return n, true },
		Metrics: metrics.New(nil, nil, time.Now), Log: slog.New(slog.NewJSONHandler(sink, nil)), Now: func() time.Time { return now }})
	send := func(id, contentType string, body []byte) int {
		t.Helper()
		req := fixtures.SignedRequest(t, "/webhook", "issue_comment", id, body, secret)
		req.Header.Set("Content-Type", contentType)
		req.RemoteAddr = "198.51.100.7:4711"
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	type want struct{ cause, delivery, detail string }
	check := func(step string, wants []want, left map[string]float64) {
		t.Helper()
		var got []map[string]any
		for _, l := range sink.lines(t) {
			if l["msg"] == "webhook delivery refused for its body" {
				got = append(got, l)
			}
		}
		if len(got) != len(wants) {
			t.Fatalf("%s: %d refusal lines, want %d: %v", step, len(got), len(wants), got)
		}
		for i, w := range wants {
			g := got[i]
			if g["cause"] != w.cause || g["delivery"] != w.delivery || g["event"] != "issue_comment" ||
				g["remote"] != "198.51.100.7:4711" || g["level"] != "WARN" {
				t.Errorf("%s: line %d = %v, want cause %s, delivery %s, event and remote", step, i, g, w.cause, w.delivery)
			}
			if d, _ := g["detail"].(string); !strings.Contains(d, w.detail) {
				t.Errorf("%s: line %d detail %q, want it to say %q", step, i, d, w.detail)
			}
			n, _ := g["not_logged_since_last"].(float64)
			if n != left[w.delivery] {
				t.Errorf("%s: line %d says %v left out, want %v", step, i, n, left[w.delivery])
			}
		}
	}
	for i, c := range []struct {
		id, contentType string
		body            []byte
		code            int
	}{
		{"json-1", "application/json", []byte(`{"action":`), http.StatusBadRequest},
		{"json-2", "application/json", []byte(`not json`), http.StatusBadRequest},
		{"type-1", "text/plain", []byte(`{}`), http.StatusBadRequest},
		{"type-2", "text/plain", []byte(`{}`), http.StatusBadRequest},
		{"type-3", "application/xml", []byte(`{}`), http.StatusBadRequest},
		{"big-1", "application/json", bytes.Repeat([]byte("x"), 5000), http.StatusRequestEntityTooLarge},
		{"form-1", formContentType, []byte(`a=b`), http.StatusBadRequest},
	} {
		if got := send(c.id, c.contentType, c.body); got != c.code {
			t.Fatalf("case %d (%s): answered %d, want %d", i, c.id, got, c.code)
		}
	}
	check("first burst", []want{
		{causeBadJSON, "json-1", "delivery"}, {causeContentType, "type-1", `"text/plain"`},
		{causeTooLarge, "big-1", ""}, {causeFormPayload, "form-1", ""},
	}, nil)

	// Within the minute, more of a cause already logged stay out of the log.
	send("type-4", "text/plain", []byte(`{}`))
	now = now.Add(59 * time.Second)
	send("type-5", "text/plain", []byte(`{}`))
	check("same minute", []want{
		{causeBadJSON, "json-1", "delivery"}, {causeContentType, "type-1", `"text/plain"`},
		{causeTooLarge, "big-1", ""}, {causeFormPayload, "form-1", ""},
	}, nil)

	// A minute after the last line of its cause, the next is logged with
	// the count of those left out; other causes are not affected.
	now = now.Add(time.Second)
	send("type-6", "text/plain", []byte(`{}`))
	send("json-3", "application/json", []byte(`[`))
	check("a minute later", []want{
		{causeBadJSON, "json-1", "delivery"}, {causeContentType, "type-1", `"text/plain"`},
		{causeTooLarge, "big-1", ""}, {causeFormPayload, "form-1", ""},
		{causeContentType, "type-6", `"text/plain"`}, {causeBadJSON, "json-3", "delivery"},
	}, map[string]float64{"type-6": 4, "json-3": 1})
}

// One sender's flood of refusals does not hide another sender's refusal
// of the same cause, and signature rejections are limited the same way.
func TestRefusalsAreLimitedPerSender(t *testing.T) {
	sink := &syncBuffer{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newRefusalLog(slog.New(slog.NewJSONHandler(sink, nil)), func() time.Time { return now })
	for i := range 50 {
		l.refused(causeTooLarge, fmt.Sprintf("flood-%d", i), "push", "203.0.113.9:1000", "")
		l.refused(causeSignature, fmt.Sprintf("forged-%d", i), "push", "[2001:db8::1]:1000", "wrong signature")
		l.refused(causeSignature, fmt.Sprintf("forged-b-%d", i), "push", "[2001:db8::2]:1000", "wrong signature") // the same /64
	}
	l.refused(causeTooLarge, "real-github-1", "issue_comment", "140.82.115.10:443", "")
	var deliveries []string
	for _, line := range sink.lines(t) {
		deliveries = append(deliveries, fmt.Sprint(line["delivery"]))
	}
	want := []string{"flood-0", "forged-0", "real-github-1"}
	if strings.Join(deliveries, ",") != strings.Join(want, ",") {
		t.Fatalf("logged %v, want %v", deliveries, want)
	}
}
