package server

import (
	"crypto/subtle"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/state"
)

//go:embed templates/*.html
var templateFS embed.FS

// AuditViews is what the audit page reads.
type AuditViews interface {
	PRSummaries(repo string, before, limit int) ([]state.PRSummary, int, error)
	PRTimeline(repo string, pr int) (state.Timeline, error)
	Audit(q state.AuditQuery) ([]state.AuditRecord, uint64, error)
}

// RepoLine is a served repository on the audit page.
type RepoLine struct {
	Name      string
	Workflow  string
	ReuseRole string
}

// AuditWeb is the server-rendered audit page, behind HTTP basic auth.
type AuditWeb struct {
	Store    AuditViews
	Repos    []RepoLine
	User     auth.Secret
	Password auth.Secret
	Version  string
	Log      *slog.Logger
	Web      string // GitHub's web base, "https://github.com" by default
	// ClientAddr is the client a request comes from (the connection
	// limiter's ClientKey: X-Forwarded-For only from trusted proxies, an
	// IPv6 /64 as one client); nil: the peer's address.
	ClientAddr func(*http.Request) netip.Addr
	// Failures limits failed sign-ins per client address: past it the page
	// answers 429 without looking at the credentials. Nil:
	// DefaultSignInFailures.
	Failures *RateLimiter

	pages map[string]*template.Template
}

// DefaultSignInFailures allows 10 failed sign-ins from one address at once,
// then one more every 30 s.
func DefaultSignInFailures() *RateLimiter { return &RateLimiter{Burst: 10, PerMinute: 2} }

// Routes registers the page's routes.
func (a *AuditWeb) Routes(mux *http.ServeMux) {
	funcs := template.FuncMap{
		"short": func(s string) string {
			if len(s) > 7 {
				return s[:7]
			}
			return s
		},
		"fmtTime": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04")
		},
		"commit": func(repo, sha string) string { return a.web() + "/" + repo + "/commit/" + sha },
		"user":   func(login string) string { return a.web() + "/" + login },
	}
	a.pages = map[string]*template.Template{}
	for _, name := range []string{"repos", "prs", "pr"} {
		a.pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	mux.Handle("GET /audit", a.authed(a.repos))
	mux.Handle("GET /audit/{owner}/{repo}", a.authed(a.prs))
	mux.Handle("GET /audit/{owner}/{repo}/{pr}", a.authed(a.pr))
}

func (a *AuditWeb) authed(h http.HandlerFunc) http.Handler {
	if a.Failures == nil {
		a.Failures = DefaultSignInFailures()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := addrOf(r.RemoteAddr)
		if a.ClientAddr != nil {
			client = a.ClientAddr(r)
		}
		key := client.String()
		if empty, wait := a.Failures.Empty(key); empty {
			w.Header().Set("Retry-After", strconv.Itoa(int(max(1, (wait+time.Second-1)/time.Second))))
			http.Error(w, "too many failed sign-ins from your address; try again later", http.StatusTooManyRequests)
			return
		}
		u, p, ok := r.BasicAuth()
		userOK := subtle.ConstantTimeCompare([]byte(u), []byte(a.User.Reveal()))
		passOK := subtle.ConstantTimeCompare([]byte(p), []byte(a.Password.Reveal()))
		if !ok || a.User == "" || userOK&passOK != 1 {
			if ok { // a browser's first request carries no credentials: only a wrong one counts
				a.Failures.Take(key)
				if a.Log != nil {
					a.Log.Warn("audit page sign-in failed", "client", key)
				}
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="opsbot audit", charset="UTF-8"`)
			http.Error(w, "sign in with the audit page's user and password", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h(w, r)
	})
}

func (a *AuditWeb) render(w http.ResponseWriter, page string, data map[string]any) {
	data["Version"] = a.Version
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	if err := a.pages[page].ExecuteTemplate(&b, page+".html", data); err != nil {
		a.Log.Error("rendering the audit page", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Write([]byte(b.String()))
}

func (a *AuditWeb) repo(r *http.Request) (string, bool) {
	name := r.PathValue("owner") + "/" + r.PathValue("repo")
	for _, rl := range a.Repos {
		if strings.EqualFold(rl.Name, name) {
			return rl.Name, true
		}
	}
	return "", false
}

func (a *AuditWeb) repos(w http.ResponseWriter, r *http.Request) {
	a.render(w, "repos", map[string]any{"Title": "Repositories", "Repos": a.Repos})
}

func (a *AuditWeb) prs(w http.ResponseWriter, r *http.Request) {
	repo, ok := a.repo(r)
	if !ok {
		http.Error(w, "opsbot does not serve that repository", http.StatusNotFound)
		return
	}
	before, _ := strconv.Atoi(r.URL.Query().Get("before"))
	sums, next, err := a.Store.PRSummaries(repo, before, 50)
	if err != nil {
		a.Log.Error("listing PRs", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	a.render(w, "prs", map[string]any{"Title": repo, "PRs": sums, "Next": next})
}

func (a *AuditWeb) pr(w http.ResponseWriter, r *http.Request) {
	repo, ok := a.repo(r)
	n, err := strconv.Atoi(r.PathValue("pr"))
	if !ok || err != nil || n <= 0 {
		http.Error(w, "no such repository or PR", http.StatusNotFound)
		return
	}
	tl, err := a.Store.PRTimeline(repo, n)
	if err != nil {
		a.Log.Error("reading a PR timeline", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	trail, next, err := a.Store.Audit(state.AuditQuery{Repo: repo, PR: n, After: after, Limit: 200})
	if err != nil {
		a.Log.Error("reading the audit", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	a.render(w, "pr", map[string]any{"Title": repo + " #" + strconv.Itoa(n), "Repo": repo, "PR": n, "T": tl, "Trail": trail,
		"Next": next, "PRURL": a.web() + "/" + repo + "/pull/" + strconv.Itoa(n)})
}

func (a *AuditWeb) web() string {
	if a.Web == "" {
		return "https://github.com"
	}
	return strings.TrimSuffix(a.Web, "/")
}
