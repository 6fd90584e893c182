package server

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// unreadDrain bounds how long a request body the handler did not read to its
// end may still hold the connection once the answer is written: Go's server
// reads up to 256 KiB of it to keep the connection, and without a bound
// that read waits for http.read_timeout. The answer already carries
// "Connection: close", so the client is not left waiting on a keep-alive.
const unreadDrain = time.Second

// floorBody is the body of any request under the rate floor: each
// Grace-long window must bring MinRate×Grace bytes or the read times out.
// The webhook's own reader (readBody) takes over the raw body and the
// connection's deadlines from it.
type floorBody struct {
	io.ReadCloser
	s     *Server
	setRD func(time.Time) error
	hard  time.Time
	mu    sync.Mutex
	mark  int64
	n     int64
	eof   bool
	owned bool // readBody reads the raw body and sets the deadlines itself
}

func (b *floorBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(n)
	if err == io.EOF {
		b.eof = true
	}
	if err == nil && !b.owned && b.s.floor() && b.n-b.mark >= b.s.quota() {
		b.mark = b.n
		b.setRD(b.at(time.Now().Add(b.s.limits.Grace)))
	}
	return n, err
}

// take hands the raw body to readBody, which sets the deadlines itself.
func (b *floorBody) take() io.Reader {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.owned = true
	return eofMark{b}
}

// eofMark reads the raw body and records its end in b.
type eofMark struct{ b *floorBody }

func (e eofMark) Read(p []byte) (int, error) {
	n, err := e.b.ReadCloser.Read(p)
	if err == io.EOF {
		e.b.mu.Lock()
		e.b.eof = true
		e.b.mu.Unlock()
	}
	return n, err
}

func (b *floorBody) done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

func (b *floorBody) at(t time.Time) time.Time {
	if !b.hard.IsZero() && t.After(b.hard) {
		return b.hard
	}
	return t
}

func (s *Server) floor() bool { return s.limits.MinRate > 0 && s.limits.Grace > 0 }

func (s *Server) quota() int64 {
	return max(1, int64(float64(s.limits.MinRate)*s.limits.Grace.Seconds()))
}

// closeUnread answers "Connection: close" when the answer is written
// before the request's body was read to its end.
type closeUnread struct {
	http.ResponseWriter
	body  *floorBody
	wrote bool
}

func (w *closeUnread) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if !w.body.done() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps streaming answers streaming.
func (w *closeUnread) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// ServeHTTP makes Server an http.Handler. Every request's body, on any route,
// is under the rate floor (webhook.min_body_rate after its grace), and a
// body the handler leaves unread holds the connection at most unreadDrain
// after the answer: a request that never sends its body (GET /healthz with
// Transfer-Encoding: chunked, a 404, a webhook refused for its headers)
// cannot keep a connection slot for http.read_timeout.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		s.mux.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	start := time.Now()
	b := &floorBody{ReadCloser: r.Body, s: s, setRD: rc.SetReadDeadline}
	if s.limits.ReadTimeout > 0 {
		b.hard = start.Add(s.limits.ReadTimeout)
	}
	if s.floor() {
		if err := rc.SetReadDeadline(b.at(start.Add(s.limits.Grace))); err != nil {
			// a ResponseWriter without a connection (a recorder in tests)
			s.mux.ServeHTTP(w, r)
			return
		}
	}
	r.Body = b
	cw := &closeUnread{ResponseWriter: w, body: b}
	s.mux.ServeHTTP(cw, r)
	if !b.done() {
		if !cw.wrote {
			cw.Header().Set("Connection", "close")
		}
		// What the server reads of the rest, after the answer, is bounded.
		rc.SetReadDeadline(b.at(time.Now().Add(unreadDrain)))
	}
}
