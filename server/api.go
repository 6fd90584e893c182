package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/idtoken"
	"github.com/SemiAnalysisAI/opsbot/reconcile"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// ErrNotReady is what the gate and reconcile say while opsbot cannot
// process anything yet (it is learning its own GitHub account): answered
// 503, with why, so a workflow sweeps or asks again.
var ErrNotReady = errors.New("opsbot is not ready")

// GateAnswerer answers the workflow's asks.
type GateAnswerer interface {
	Answer(ctx context.Context, r gate.Request) (gate.Answer, error)
}

// AuditReader reads the audit and the dead letters.
type AuditReader interface {
	Audit(q state.AuditQuery) ([]state.AuditRecord, uint64, error)
	DeadLetters() ([]state.DeadLetter, error)
	FailedNotices() ([]state.Notice, error)
	BackupFile() (*os.File, int64, error)
	// Saved is what the skips saved, by repository and ISO week.
	Saved(repo string, since time.Time) ([]state.SavedWeek, error)
}

// Reconciler recovers lost webhooks for a repository (replaying from
// replaySince when it is not zero).
type Reconciler interface {
	Run(ctx context.Context, repo string, replaySince time.Time) (reconcile.Report, error)
}

// IDTokens verifies GitHub Actions ID tokens and says which gate asks they cover.
type IDTokens interface {
	Verify(ctx context.Context, raw string) (idtoken.Claims, error)
	Covers(ctx context.Context, c idtoken.Claims, r gate.Request) error
}

// API is the bearer-token API under /api/v1. Tokens come in classes: gate
// tokens (and GitHub Actions ID tokens, when IDTokens is set) may only ask
// the gate; admin tokens may only read the audit, the dead letters and the
// failed notices, back up and reconcile; legacy tokens may do both.
type API struct {
	Tokens      []auth.Secret // legacy: gate and admin
	GateTokens  []auth.Secret
	AdminTokens []auth.Secret
	IDTokens    IDTokens // nil: ID tokens are refused
	// AskOutcome counts gate asks by outcome (metrics); optional.
	AskOutcome func(outcome string)
	Gate       GateAnswerer
	// Reload reads the configuration file again (nil: not offered).
	Reload func() ReloadResult
	// AskLimit limits gate asks per credential (api.gate_rate); nil
	// limits nothing.
	AskLimit  *RateLimiter
	Reconcile Reconciler
	Audit     AuditReader
	// Served lists the repositories opsbot serves (nil: not known): an
	// audit filter naming another, with nothing of it in the audit, is
	// refused, saying so (a typo there looks like an empty audit).
	Served func() []string
	Log    *slog.Logger
	// Ctx is the server's lifetime context; decisions run on it (with a
	// timeout) so a client hanging up does not cut a decision in half.
	Ctx context.Context
}

// Routes registers the API's routes.
func (a *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/gate", a.gate)
	mux.Handle("GET /api/v1/audit", a.admin(a.audit))
	mux.Handle("GET /api/v1/dead-letters", a.admin(a.deadLetters))
	mux.Handle("GET /api/v1/failed-notices", a.admin(a.failedNotices))
	mux.Handle("GET /api/v1/saved", a.admin(a.saved))
	mux.Handle("GET /api/v1/backup", a.admin(a.backup))
	mux.Handle("POST /api/v1/reconcile", a.admin(a.reconcile))
	mux.Handle("POST /api/v1/reload", a.admin(a.reload))
}

type apiError struct {
	Error string `json:"error"`
}

// Token classes, as logged.
const (
	classGate   = "gate"
	classAdmin  = "admin"
	classLegacy = "legacy"
	classOIDC   = "oidc"
)

const noToken = "missing or wrong bearer token (set OPSBOT_API_TOKEN to one of the server's tokens: a gate token (api.gate_tokens_env) to ask the gate, an admin token (api.admin_tokens_env) for the rest)"

// class says what a bearer is: a static token of a class (one listed both
// as a gate and as an admin token is legacy, both), a JWT (an ID token, not
// yet verified), or "" (no token, or a wrong one).
func (a *API) class(r *http.Request) (class, raw string) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return "", ""
	}
	isGate, isAdmin := auth.TokenMatches(tok, a.GateTokens), auth.TokenMatches(tok, a.AdminTokens)
	switch {
	case auth.TokenMatches(tok, a.Tokens) || (isGate && isAdmin):
		return classLegacy, tok // listed as both
	case isGate:
		return classGate, tok
	case isAdmin:
		return classAdmin, tok
	case idtoken.LooksLikeJWT(tok):
		return classOIDC, tok
	}
	return "", ""
}

// admin lets only admin (and legacy) tokens through; a gate token or an ID
// token is refused with 403, which says what to use instead.
func (a *API) admin(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch class, _ := a.class(r); class {
		case classAdmin, classLegacy:
			h(w, r)
		case classGate:
			writeJSON(w, http.StatusForbidden, apiError{"this is a gate token (api.gate_tokens_env): it may only ask the gate; " +
				"use an admin token (api.admin_tokens_env) to read the audit, back up or reconcile"})
		case classOIDC:
			writeJSON(w, http.StatusForbidden, apiError{"a GitHub Actions ID token may only ask the gate; " +
				"use an admin token (api.admin_tokens_env) to read the audit, back up or reconcile"})
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="opsbot"`)
			writeJSON(w, http.StatusUnauthorized, apiError{noToken})
		}
	})
}

// gateResult is everything one gate ask comes to: what is written back,
// what is logged and counted.
type gateResult struct {
	code    int
	ans     gate.Answer
	msg     string // for the asker, when code is not 200
	outcome string // a bounded label
	class   string
	req     gate.Request
	claims  idtoken.Claims // of a verified ID token
	err     error          // logged, when the fault is opsbot's
	after   time.Duration  // Retry-After of a 429
}

func (a *API) gate(w http.ResponseWriter, r *http.Request) {
	res := a.askGate(w, r)
	a.logAsk(res)
	if a.AskOutcome != nil {
		a.AskOutcome(res.outcome)
	}
	if res.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="opsbot"`)
	}
	if res.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	if res.code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, (res.after+time.Second-1)/time.Second))))
	}
	if wantsText(r.Header.Get("Accept")) {
		// Lines ready for $GITHUB_OUTPUT. An error keeps its status, so a
		// client fails closed on it; its lines, if a client uses them
		// anyway, say skip-pr-sweep=false.
		values := res.ans.Outputs()
		if res.code != http.StatusOK {
			values = gate.FailedOutputs(fmt.Sprintf("opsbot could not decide (HTTP %d): %s", res.code, res.msg))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(res.code)
		_, _ = io.WriteString(w, gate.OutputLines(values)) // the client went away; nothing to do
		return
	}
	if res.code != http.StatusOK {
		writeJSON(w, res.code, apiError{res.msg})
		return
	}
	writeJSON(w, http.StatusOK, res.ans)
}

func (a *API) askGate(w http.ResponseWriter, r *http.Request) gateResult {
	fail := func(code int, outcome, msg string) gateResult {
		return gateResult{code: code, outcome: outcome, msg: msg}
	}
	class, raw := a.class(r)
	var claims idtoken.Claims
	switch class {
	case classGate, classLegacy:
	case classAdmin:
		res := fail(http.StatusForbidden, "forbidden", "this is an admin token (api.admin_tokens_env): it may not ask the gate; "+
			"give the workflow a gate token (api.gate_tokens_env) or let it use its GitHub Actions ID token")
		res.class = class
		return res
	case classOIDC:
		if a.IDTokens == nil {
			return fail(http.StatusUnauthorized, "unauthorized", "GitHub Actions ID tokens are not accepted here "+
				"(api.github_oidc.enabled is false): send a gate token")
		}
		// On the asker's context, bounded: an asker that hangs up stops
		// waiting for the issuer, and no asker holds opsbot for long.
		vctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		var err error
		claims, err = a.IDTokens.Verify(vctx, raw)
		cancel()
		switch {
		case errors.Is(err, idtoken.ErrUnavailable):
			res := fail(http.StatusServiceUnavailable, "unavailable", "cannot verify the GitHub Actions ID token now: "+err.Error())
			res.class, res.err = class, err
			return res
		case err != nil:
			res := fail(http.StatusUnauthorized, "unauthorized", "the GitHub Actions ID token was refused: "+err.Error())
			res.class = class
			return res
		}
	default:
		return fail(http.StatusUnauthorized, "unauthorized", noToken)
	}
	req, err := readAsk(w, r)
	if err != nil {
		res := fail(http.StatusBadRequest, "bad_request", err.Error())
		res.class = class
		return res
	}
	res := gateResult{class: class, req: req, claims: claims}
	if class == classOIDC {
		if req.Event == "" {
			req.Event = "pull_request"
		}
		switch err := a.IDTokens.Covers(a.ctx(), claims, req); {
		case errors.Is(err, idtoken.ErrNotCovered):
			res.code, res.outcome, res.msg = http.StatusForbidden, "forbidden", err.Error()
			return res
		case err != nil:
			res.code, res.outcome, res.msg, res.err = http.StatusServiceUnavailable, "unavailable", "cannot check the ID token's claims now: "+err.Error(), err
			return res
		}
	}
	// A credential's asks are limited once it is known to cover the ask,
	// before anything reads GitHub for it: a leaked token cannot spend
	// opsbot's budget, and a token refused for another PR spends nothing.
	// ID tokens count per repository and ref (refs/pull/N/merge: per PR),
	// so one PR's jobs cannot use up another's asks.
	key := "token:" + tokenKey(raw)
	if class == classOIDC {
		key = "oidc:" + strings.ToLower(claims.Repository) + "\x00" + claims.Ref
	}
	if ok, wait := a.AskLimit.Take(key); !ok {
		res.code, res.outcome, res.after = http.StatusTooManyRequests, "rate_limited", wait
		res.msg = fmt.Sprintf("too many gate asks with this credential: at most %d at once and %d a minute (api.gate_rate); retry in %s",
			a.AskLimit.Burst, a.AskLimit.PerMinute, wait.Round(time.Second))
		return res
	}
	req.Asker = key // what one asker learned is not told to another (gate.API's misses)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx()), 90*time.Second)
	defer cancel()
	ans, err := a.Gate.Answer(ctx, req)
	switch {
	case errors.Is(err, gate.ErrBadAsk):
		res.code, res.outcome, res.msg = http.StatusBadRequest, "bad_request", err.Error()
	case errors.Is(err, gate.ErrBusy), errors.Is(err, ErrNotReady):
		res.code, res.outcome, res.msg = http.StatusServiceUnavailable, "unavailable", err.Error()
	case errors.Is(err, gate.ErrUnknownRepo):
		res.code, res.outcome, res.msg = http.StatusNotFound, "unknown_repo", err.Error()
	case err != nil:
		res.code, res.outcome, res.msg, res.err = http.StatusInternalServerError, "error", "could not decide: "+err.Error(), err
	default:
		res.code, res.ans = http.StatusOK, ans
		switch {
		case ans.UnknownPR:
			res.outcome = "unknown_pr"
		case ans.NotHead:
			res.outcome = "not_head"
		case ans.NotGated:
			res.outcome = "not_gated"
		case ans.Event == "push" && ans.ReuseEnabled:
			res.outcome = "reuse"
		case ans.Event == "push":
			res.outcome = "no_reuse"
		case ans.SkipPRSweep:
			res.outcome = "skip"
		default:
			res.outcome = "sweep"
		}
	}
	return res
}

// AskOutcomes are every outcome a gate ask is counted under.
var AskOutcomes = []string{"skip", "sweep", "not_head", "not_gated", "unknown_pr", "reuse", "no_reuse", "bad_request", "unknown_repo",
	"unauthorized", "forbidden", "rate_limited", "unavailable", "error"}

// ReloadResult is what a configuration reload did.
type ReloadResult struct {
	Applied bool   `json:"applied"`
	File    string `json:"file"`
	// Problems are why the file was not applied (the running configuration stays).
	Problems []string `json:"problems,omitempty"`
	// Restart names settings that changed but take effect at the next start.
	Restart []string `json:"restart_needed_for,omitempty"`
	// ExpiredPins counts the active pins of the repositories the reload
	// removed, expired (audited) so none covers a later push.
	ExpiredPins int `json:"expired_pins,omitempty"`
}

func (a *API) reload(w http.ResponseWriter, r *http.Request) {
	if a.Reload == nil {
		writeJSON(w, http.StatusNotFound, apiError{"reload is not offered here"})
		return
	}
	res := a.Reload()
	if !res.Applied {
		writeJSON(w, http.StatusBadRequest, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// tokenKey names a static token in the ask limiter without keeping it.
func tokenKey(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:12])
}

func (a *API) logAsk(res gateResult) {
	attrs := []any{"repo", res.req.Repo, "pr", res.req.PR, "sha", res.req.SHA, "event", res.req.Event, "action", res.req.Action,
		"auth", res.class, "outcome", res.outcome, "status", res.code}
	if c := res.claims; c.Repository != "" {
		attrs = append(attrs, "token_repository", c.Repository, "token_ref", c.Ref, "token_workflow", c.WorkflowRef,
			"token_run_id", c.RunID, "token_actor", c.Actor)
	}
	switch {
	case res.err != nil:
		a.Log.Error("gate ask failed", append(attrs, "err", res.err)...)
	case res.code != http.StatusOK:
		a.Log.Warn("gate ask refused", append(attrs, "why", res.msg)...)
	default:
		a.Log.Info("gate ask", append(attrs, "reason", res.ans.Reason)...)
	}
}

// readAsk reads an ask from a JSON body or from form fields (repo, pr, sha,
// event, action, ref), as a shell step sends them with curl --data-urlencode.
// Unknown fields are errors.
func readAsk(w http.ResponseWriter, r *http.Request) (gate.Request, error) {
	var req gate.Request
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<16))
	if err != nil {
		return req, fmt.Errorf("reading the ask: %w", err)
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	isForm := strings.TrimSpace(strings.ToLower(ct)) == "application/x-www-form-urlencoded"
	if isForm && !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") { // curl -d sends JSON as a form too
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			return req, fmt.Errorf("the form does not parse: %w", err)
		}
		for k := range form {
			switch k {
			case "repo", "pr", "sha", "event", "action", "ref":
			default:
				return req, fmt.Errorf("unknown form field %q (send repo, pr, sha, event, action, ref)", k)
			}
		}
		req.Repo, req.SHA, req.Event, req.Action, req.Ref = form.Get("repo"), form.Get("sha"), form.Get("event"), form.Get("action"), form.Get("ref")
		if p := form.Get("pr"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return req, fmt.Errorf("pr %q is not a PR number", p)
			}
			req.PR = n
		}
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, errors.New("body must be JSON {\"repo\",\"pr\",\"sha\",\"event\",\"action\",\"ref\"} or a form with those fields: " + err.Error())
	}
	return req, nil
}

// wantsText reports whether an Accept header asks for text/plain before JSON.
func wantsText(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "text/plain":
			return true
		case "application/json":
			return false
		}
	}
	return false
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
	if aq.SHA != "" && err == nil && !shaPrefixRE.MatchString(aq.SHA) {
		err = fmt.Errorf("sha %q: give the commit's SHA, or at least its first 7 hex characters", aq.SHA)
	}
	return aq, err
}

// shaPrefixRE is an audit filter's commit: 7 to 64 hex digits.
var shaPrefixRE = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	q, err := ParseAuditQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"bad filter: " + err.Error()})
		return
	}
	recs, next, err := a.Audit.Audit(q)
	var amb *state.AmbiguousSHAError
	if errors.As(err, &amb) {
		writeJSON(w, http.StatusBadRequest, apiError{"bad filter: " + err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{err.Error()})
		return
	}
	if recs == nil {
		recs = []state.AuditRecord{}
	}
	if len(recs) == 0 && q.Repo != "" && q.After == 0 && a.Served != nil {
		served := a.Served()
		some, _, err := a.Audit.Audit(state.AuditQuery{Repo: q.Repo, Limit: 1})
		if err == nil && len(some) == 0 && !slices.ContainsFunc(served, func(r string) bool { return strings.EqualFold(r, q.Repo) }) {
			writeJSON(w, http.StatusNotFound, apiError{fmt.Sprintf("opsbot does not serve %s and its audit holds nothing of it; "+
				"it serves %s (check the name)", q.Repo, strings.Join(served, ", "))})
			return
		}
	}
	writeJSON(w, http.StatusOK, AuditPage{Records: recs, Next: next})
}

// saved lists what the skips saved by repository and ISO week: ?repo= one
// repository, ?since= (RFC 3339) from that time's week on.
func (a *API) saved(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"bad since: give an RFC 3339 time, such as 2026-12-01T00:00:00Z"})
			return
		}
		since = t
	}
	ws, err := a.Audit.Saved(r.URL.Query().Get("repo"), since)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{err.Error()})
		return
	}
	if ws == nil {
		ws = []state.SavedWeek{}
	}
	writeJSON(w, http.StatusOK, ws)
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

// backup writes the copy to a temporary file beside the database, then
// streams that file: the database's read transaction ends before the first
// byte is sent, so a slow client holds only its copy. The copy is removed
// when the response ends, however it ends.
func (a *API) backup(w http.ResponseWriter, r *http.Request) {
	f, n, err := a.Audit.BackupFile()
	if err != nil {
		a.Log.Error("backup failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{"could not copy the database: " + err.Error()})
		return
	}
	defer func() {
		f.Close()
		if err := os.Remove(f.Name()); err != nil {
			a.Log.Error("removing the backup's temporary copy", "file", f.Name(), "err", err)
		}
	}()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="opsbot.db"`)
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if _, err := io.Copy(w, f); err != nil {
		a.Log.Warn("backup not sent whole: the client went away or was too slow", "err", err)
	}
}

func (a *API) reconcile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Repo string `json:"repo"`
		// ReplaySince (RFC 3339) runs the unseen, unedited command comments
		// posted since then (at most reconcile.MaxReplay ago), even on a
		// repository's first reconcile.
		ReplaySince *time.Time `json:"replay_since"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.Repo == "" {
		writeJSON(w, http.StatusBadRequest, apiError{"body must be JSON {\"repo\": \"OWNER/REPO\"}, " +
			"optionally with \"replay_since\": \"RFC 3339 time\""})
		return
	}
	var since time.Time
	if req.ReplaySince != nil {
		since = *req.ReplaySince
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx()), 5*time.Minute)
	defer cancel()
	rep, err := a.Reconcile.Run(ctx, req.Repo, since)
	if errors.Is(err, reconcile.ErrReplayInFuture) {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error() + ": give a time in the past"})
		return
	}
	if errors.Is(err, reconcile.ErrReplayTooOld) {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	if errors.Is(err, ErrNotReady) {
		w.Header().Set("Retry-After", "30")
		writeJSON(w, http.StatusServiceUnavailable, apiError{"reconcile not run: " + err.Error()})
		return
	}
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
