package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden"
	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/state"
)

type queue struct{ n atomic.Int64 }

func (q *queue) Enqueue(*state.Delivery) { q.n.Add(1) }

const secret = auth.Secret("s")

func newServer(t testing.TB, fail func() error) (*Server, *state.Store, *queue) {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{FailWrites: fail})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q := &queue{}
	s := New(Config{Commands: commandstest.Registry(), Store: st, Queue: q, Secrets: []auth.Secret{secret}, MaxBody: 25 << 20,
		RepoName: func(n string) (string, bool) {
			return "Codertocat/Hello-World", strings.EqualFold(n, "Codertocat/Hello-World")
		},
		Metrics: metrics.New(nil, nil, time.Now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return s, st, q
}

// A write that fails (a full disk) answers 503 so GitHub may redeliver,
// and leaves nothing behind; once storage works the same delivery is taken.
func TestStorageFaultAnswers503(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	s, st, q := newServer(t, func() error {
		if broken.Load() {
			return errors.New("no space left on device")
		}
		return nil
	})
	body := fixtures.Webhook(t, "pull_request", "synchronize")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "pull_request", "full-1", body, secret))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("with the disk full: %d %s", rec.Code, rec.Body)
	}
	if _, err := st.DeliveryStatus("full-1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("a failed write left the delivery id behind: %v", err)
	}
	if p, _ := st.Pending(); len(p) != 0 || q.n.Load() != 0 {
		t.Fatal("a failed write left a delivery in the inbox")
	}
	broken.Store(false)
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "pull_request", "full-1", body, secret))
	if rec.Code != http.StatusAccepted || q.n.Load() != 1 {
		t.Fatalf("after the disk recovered: %d", rec.Code)
	}
}

// Hostile JSON is refused with 400 and stores nothing.
func TestDeeplyNestedJSON(t *testing.T) {
	s, st, _ := newServer(t, nil)
	for name, body := range map[string]string{
		"nested arrays":  strings.Repeat("[", 200000) + strings.Repeat("]", 200000),
		"nested objects": strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000),
		"not an object":  `"just a string"`,
		"trailing junk":  `{"action":"opened"} {"again":1}`,
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "pull_request", "n-"+name, []byte(body), secret))
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusAccepted {
			t.Errorf("%s: %d", name, rec.Code)
		}
		if _, err := st.DeliveryStatus("n-" + name); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s: stored", name)
		}
	}
}

func FuzzWebhook(f *testing.F) {
	for _, p := range fixtures.Webhooks(f) {
		if len(p.Body) < 8192 {
			f.Add(p.Event, p.Body)
		}
	}
	f.Add("issue_comment", []byte(`{"action":"created","issue":{"number":1,"pull_request":{}},"comment":{"body":"/use 1"},"repository":{"full_name":"Codertocat/Hello-World"}}`))
	f.Add("repository_dispatch", []byte(`{"action":"stage-results-completed","client_payload":{"pr-number":"7"},"repository":{"full_name":"codertocat/hello-world"}}`))
	s, st, _ := newServer(f, nil)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		rec := httptest.NewRecorder()
		req := fixtures.SignedRequest(t, "/webhook", event, "fuzz-"+strconv.FormatInt(n.Add(1), 10), body, secret)
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusOK, http.StatusBadRequest:
		default:
			t.Fatalf("status %d for event %q", rec.Code, event)
		}
		if rec.Code == http.StatusAccepted && strings.Contains(rec.Body.String(), `"stored"`) {
			d, err := st.Pending()
			if err != nil || len(d) == 0 {
				t.Fatalf("stored but not pending: %v", err)
			}
			last := d[len(d)-1]
			if last.Repo != "Codertocat/Hello-World" || last.PR < 0 {
				t.Fatalf("stored delivery %+v", last)
			}
			if err := st.Complete(last, "fuzz", nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Ingest stores every comment on a PR; the ones with no line starting with
// '/' are marked so the worker completes them without decoding. Any other
// goes to the worker, which reads its commands (out of the request). Payloads GitHub could
// send with duplicate names or invalid UTF-8 in a string are taken as before.
func TestIngestMarksCommentsWithoutCommands(t *testing.T) {
	s, st, _ := newServer(t, nil)
	payload := func(body string) []byte {
		return []byte(`{"action":"created","issue":{"number":4,"pull_request":{"url":"x"}},"comment":{"body":` +
			strconv.Quote(body) + `},"repository":{"full_name":"Codertocat/Hello-World"}}`)
	}
	for i, c := range []struct {
		body       []byte
		noCommands bool
	}{
		{payload("see https://github.com/o/r/actions/runs/1 and a/b"), true},
		{payload("```\n/reuse-sweep-run 1\n```"), false}, // the worker finds no command in the fence
		{payload("looks good\n/reuse-sweep-run 12345"), false},
		{payload("/use"), false}, // a malformed command still gets its usage reply
		{[]byte(`{"action":"created","action":"created","issue":{"number":4,"pull_request":{}},"comment":{"body":"ok ` + "\xff" + ` /x"},"Repository":{"full_name":"Codertocat/Hello-World"}}`), true},
	} {
		id := "mark-" + strconv.Itoa(i)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "issue_comment", id, c.body, secret))
		if rec.Code != http.StatusAccepted {
			t.Fatalf("case %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	pending, err := st.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 5 {
		t.Fatalf("%d deliveries stored, want 5", len(pending))
	}
	for i, d := range pending {
		want := []bool{true, false, false, false, true}[i]
		if d.NoCommands != want || d.PR != 4 {
			t.Errorf("delivery %s: no_commands=%v pr=%d, want %v and 4", d.ID, d.NoCommands, d.PR, want)
		}
	}
}

// A new comment with no command line (the most common delivery) is
// recorded processed at ingest: nothing waits in the inbox for it, and its
// comment is marked seen, so recovery never runs it after an edit.
func TestIngestCompletesACommentWithoutCommands(t *testing.T) {
	s, st, _ := newServer(t, nil)
	body := []byte(`{"action":"created","issue":{"number":4,"pull_request":{"url":"x"}},"comment":{"id":77,"body":"nice numbers"},"repository":{"full_name":"Codertocat/Hello-World"}}`)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "issue_comment", "plain-1", body, secret))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if p, err := st.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending = %d, %v; want none", len(p), err)
	}
	if ds, err := st.DeliveryStatus("plain-1"); err != nil || ds.Processed != 1 || ds.Outcome != "no-commands" {
		t.Fatalf("status = %+v, %v", ds, err)
	}
	if m, err := st.CommentMark("Codertocat/Hello-World", 77); err != nil || m != state.MarkProcessed {
		t.Fatalf("comment mark = %v, %v; want processed", m, err)
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "issue_comment", "plain-1", body, secret))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "duplicate") {
		t.Fatalf("redelivery: %d %s; want 200 duplicate", rec.Code, rec.Body)
	}
}

func TestWantsText(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false}, {"*/*", false}, {"text/plain", true}, {"Text/Plain; charset=utf-8", true},
		{"application/json, text/plain", false}, {"text/plain;q=0.9, application/json", true}, {"text/html, text/plain", true},
	} {
		if got := wantsText(tc.accept); got != tc.want {
			t.Errorf("wantsText(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// The webhook request reads no comment's commands: an edit of two 64 KiB
// bodies of nested quotes (seconds of goldmark's time each, when the
// request read them) is stored with who and where, and its commands are
// left to the worker.
func TestIngestLeavesCommandsToTheWorker(t *testing.T) {
	s, st, _ := newServer(t, nil)
	noise := strings.Repeat("> ", 32<<10)
	body := []byte(`{"action":"edited","issue":{"number":4,"pull_request":{"url":"x"}},"comment":{"id":9,"body":` +
		strconv.Quote(noise+"\n\n/use 1") + `},"changes":{"body":{"from":` + strconv.Quote(noise+"\n\n/use 2") +
		`}},"repository":{"full_name":"Codertocat/Hello-World"}}`)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, fixtures.SignedRequest(t, "/webhook", "issue_comment", "edit-1", body, secret))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	pending, err := st.Pending()
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %v, %v; want the edit", pending, err)
	}
	d, err := st.Delivery(pending[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	var rec2 struct {
		Comment map[string]json.RawMessage `json:"comment"`
	}
	if err := json.Unmarshal(d.Parsed, &rec2); err != nil || rec2.Comment == nil {
		t.Fatalf("stored record %s: %v", d.Parsed, err)
	}
	for _, k := range []string{"commands", "old_commands", "parser"} {
		if v, ok := rec2.Comment[k]; ok {
			t.Errorf("the request read the commands: %s = %s", k, v)
		}
	}
	if string(rec2.Comment["id"]) != "9" || d.PR != 4 || d.CommentID != 9 {
		t.Fatalf("stored %+v with %s", d, d.Parsed)
	}
}
