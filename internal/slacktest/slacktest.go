// Package slacktest is a fake Slack Web API for opsbot's tests: auth.test
// and chat.postMessage, recording every message, with injectable faults.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// Post is a chat.postMessage call that Slack accepted.
type Post struct {
	Channel   string
	Text      string
	Blocks    string // the blocks JSON as sent
	ThreadTS  string
	Broadcast bool
	TS        string
}

// Fault is an answer injected instead of the normal one.
type Fault struct {
	Status     int    // HTTP status (e.g. 429, 500); 0 means 200
	RetryAfter string // Retry-After header
	Error      string // Slack's error code in {"ok":false,"error":...}
	Times      int    // how many calls it applies to; 0 means until cleared
	Channel    string // the only channel it applies to; "" means every one
}

// Fake is the fake Slack.
type Fake struct {
	Server *httptest.Server
	URL    string // for slack.api_url

	mu        sync.Mutex
	posts     []Post
	responses []Response
	calls     int
	fault     *Fault
	used      int
	authOK    bool
	nextTS    int
}

// New starts a fake Slack; it is closed when the test (or the caller's cleanup) ends.
func New(t interface{ Cleanup(func()) }) *Fake {
	f := &Fake{authOK: true, nextTS: 1000}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth.test", f.authTest)
	mux.HandleFunc("POST /chat.postMessage", f.postMessage)
	mux.HandleFunc("POST /response/{id}", f.respond)
	f.Server = httptest.NewServer(mux)
	f.URL = f.Server.URL + "/"
	t.Cleanup(f.Server.Close)
	return f
}

// Fail injects a fault on chat.postMessage (nil clears it).
func (f *Fake) Fail(fl *Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault, f.used = fl, 0
}

// RejectToken makes auth.test fail.
func (f *Fake) RejectToken() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.authOK = false
}

// Posts returns the accepted messages, in order.
func (f *Fake) Posts() []Post {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Post(nil), f.posts...)
}

// Calls is how many chat.postMessage calls were made, accepted or not.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *Fake) authTest(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ok := f.authOK
	f.mu.Unlock()
	if !ok {
		reply(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	reply(w, map[string]any{"ok": true, "team": "benchmarks", "user": "opsbot", "user_id": "U0OPSBOT", "team_id": "T0"})
}

func (f *Fake) postMessage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if fl := f.fault; fl != nil && (fl.Times == 0 || f.used < fl.Times) && (fl.Channel == "" || fl.Channel == r.Form.Get("channel")) {
		f.used++
		if fl.RetryAfter != "" {
			w.Header().Set("Retry-After", fl.RetryAfter)
		}
		if fl.Status != 0 {
			w.WriteHeader(fl.Status)
			fmt.Fprint(w, `{"ok":false,"error":"ratelimited"}`)
			return
		}
		reply(w, map[string]any{"ok": false, "error": fl.Error})
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") && r.Form.Get("token") == "" {
		reply(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	f.nextTS++
	p := Post{Channel: r.Form.Get("channel"), Text: r.Form.Get("text"), Blocks: r.Form.Get("blocks"),
		ThreadTS: r.Form.Get("thread_ts"), Broadcast: r.Form.Get("reply_broadcast") == "true",
		TS: fmt.Sprintf("1700000000.%06d", f.nextTS)}
	f.posts = append(f.posts, p)
	reply(w, map[string]any{"ok": true, "channel": p.Channel, "ts": p.TS})
}

// Form decodes a URL-encoded body (for assertions on raw requests).
func Form(s string) url.Values { v, _ := url.ParseQuery(s); return v }

// Response is an answer posted to a click's response_url.
type Response struct {
	ID           string // the response_url's last part
	Text         string
	ResponseType string
}

// ResponseURL is a response_url on this fake for a click.
func (f *Fake) ResponseURL(id string) string { return f.URL + "response/" + id }

// Responses are the answers posted to response_urls, oldest first.
func (f *Fake) Responses() []Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Response(nil), f.responses...)
}

func (f *Fake) respond(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Text         string `json:"text"`
		ResponseType string `json:"response_type"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.responses = append(f.responses, Response{ID: r.PathValue("id"), Text: in.Text, ResponseType: in.ResponseType})
	f.mu.Unlock()
	w.Write([]byte("ok"))
}
