package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opsbot/auth"
	"opsbot/gate"
	"opsbot/reconcile"
	"opsbot/state"
)

// GateAnswerer answers the workflow's asks.
type GateAnswerer interface {
	Answer(ctx context.Context, r gate.Request) (gate.Answer, error)
}

// AuditReader reads the audit and the dead letters.
type AuditReader interface {
	Audit(q state.AuditQuery) ([]state.AuditRecord, uint64, error)
	DeadLetters() ([]state.DeadLetter, error)
	FailedNotices() ([]state.Notice, error)
	Backup(w io.Writer) (int64, error)
}

// Reconciler recovers lost webhooks for a repository.
type Reconciler interface {
	Run(ctx context.Context, repo string) (reconcile.Report, error)
}

// API is the bearer-token API under /api/v1.
type API struct {
	Tokens    []auth.Secret
	Gate      GateAnswerer
	Reconcile Reconciler
	Audit     AuditReader
	Log       *slog.Logger
	// Ctx is the server's lifetime context; decisions run on it (with a
	// timeout) so a client hanging up does not cut a decision in half.
	Ctx context.Context
}

// Routes registers the API's routes.
func (a *API) Routes(mux *http.ServeMux) {
	mux.Handle("POST /api/v1/gate", a.authed(a.gate))
	mux.Handle("GET /api/v1/audit", a.authed(a.audit))
	mux.Handle("GET /api/v1/dead-letters", a.authed(a.deadLetters))
	mux.Handle("GET /api/v1/failed-notices", a.authed(a.failedNotices))
	mux.Handle("GET /api/v1/backup", a.authed(a.backup))
	mux.Handle("POST /api/v1/reconcile", a.authed(a.reconcile))
}

type apiError struct {
	Error string `json:"error"`
}

func (a *API) authed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !auth.TokenMatches(strings.TrimSpace(tok), a.Tokens) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="opsbot"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"missing or wrong bearer token (set OPSBOT_API_TOKEN to one of the server's api tokens)"})
			return
		}
		h(w, r)
	})
}

func (a *API) gate(w http.ResponseWriter, r *http.Request) {
	var req gate.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"body must be JSON {\"repo\",\"pr\",\"sha\",\"event\",\"action\"}: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx()), 90*time.Second)
	defer cancel()
	ans, err := a.Gate.Answer(ctx, req)
	switch {
	case errors.Is(err, gate.ErrBadAsk):
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
	case errors.Is(err, gate.ErrUnknownRepo):
		writeJSON(w, http.StatusNotFound, apiError{err.Error()})
	case err != nil:
		a.Log.Error("answering a gate ask", "repo", req.Repo, "pr", req.PR, "sha", req.SHA, "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{"could not decide: " + err.Error()})
	default:
		writeJSON(w, http.StatusOK, ans)
	}
}

func (a *API) ctx() context.Context {
	if a.Ctx == nil {
		return context.Background()
	}
	return a.Ctx
}

// AuditPage is one page of audit records.
type AuditPage struct {
	Records []state.AuditRecord `json:"records"`
	Next    uint64              `json:"next,omitempty"` // pass as ?after= for the next page
}

// ParseAuditQuery reads the audit filters from a URL query.
func ParseAuditQuery(q map[string][]string) (state.AuditQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var aq state.AuditQuery
	var err error
	aq.Repo, aq.SHA, aq.Kind = get("repo"), get("sha"), get("kind")
	num := func(k string, bits int) int64 {
		if err != nil || get(k) == "" {
			return 0
		}
		var v int64
		v, err = strconv.ParseInt(get(k), 10, bits)
		if err == nil && v < 0 {
			err = errors.New(k + " must not be negative")
		}
		return v
	}
	aq.PR = int(num("pr", 32))
	aq.RunID = num("run", 64)
	aq.After = uint64(num("after", 64))
	aq.Limit = int(num("limit", 32))
	if s := get("since"); s != "" && err == nil {
		aq.Since, err = time.Parse(time.RFC3339, s)
	}
	if aq.PR > 0 && aq.Repo == "" && err == nil {
		err = errors.New("pr needs repo")
	}
	return aq, err
}

func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	q, err := ParseAuditQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"bad filter: " + err.Error()})
		return
	}
	recs, next, err := a.Audit.Audit(q)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{err.Error()})
		return
	}
	if recs == nil {
		recs = []state.AuditRecord{}
	}
	writeJSON(w, http.StatusOK, AuditPage{Records: recs, Next: next})
}

func (a *API) deadLetters(w http.ResponseWriter, r *http.Request) {
	dl, err := a.Audit.DeadLetters()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{err.Error()})
		return
	}
	for i := range dl {
		dl[i].Body = nil // the list shows what and why; the payload stays in the database
	}
	if dl == nil {
		dl = []state.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, dl)
}

func (a *API) backup(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="opsbot.db"`)
	if _, err := a.Audit.Backup(w); err != nil {
		a.Log.Error("backup failed", "err", err)
	}
}

func (a *API) reconcile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Repo string `json:"repo"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.Repo == "" {
		writeJSON(w, http.StatusBadRequest, apiError{"body must be JSON {\"repo\": \"OWNER/REPO\"}"})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx()), 5*time.Minute)
	defer cancel()
	rep, err := a.Reconcile.Run(ctx, req.Repo)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{"reconcile failed: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (a *API) failedNotices(w http.ResponseWriter, r *http.Request) {
	ns, err := a.Audit.FailedNotices()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{err.Error()})
		return
	}
	if ns == nil {
		ns = []state.Notice{}
	}
	writeJSON(w, http.StatusOK, ns)
}
