package server

import (
	"crypto/subtle"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state/record"

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
	Saved(repo string, since time.Time) ([]state.SavedWeek, error)
	PRsWithActivePin(repo string) ([]int, error)
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
		"pull":   func(repo string, pr int) string { return a.web() + "/" + repo + "/pull/" + strconv.Itoa(pr) },
		"runURL": func(repo string, id int64) string {
			return a.web() + "/" + repo + "/actions/runs/" + strconv.FormatInt(id, 10)
		},
		"hours": runs.Hours,
		"words": words,
	}
	a.pages = map[string]*template.Template{}
	for _, name := range []string{"repos", "prs", "pr", "run", "records"} {
		a.pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	mux.Handle("GET /audit", a.authed(a.repos))
	mux.Handle("GET /audit/records", a.authed(a.records))
	mux.Handle("GET /audit/-/run/{id}", a.authed(a.run))
	mux.Handle("GET /audit/{owner}/{repo}", a.authed(a.prs))
	mux.Handle("GET /audit/{owner}/{repo}/{pr}", a.authed(a.pr))
}

// rawURL is a URL written out in a reason (GitHub's documentation_url in
// an error, say): the page says the reason in words.
var rawURL = regexp.MustCompile(`\s*\(?https?://[^\s)]+\)?`)

// words is a reason as the page shows it: without the raw URLs it quotes.
func words(s string) string { return strings.TrimSpace(rawURL.ReplaceAllString(s, "")) }

// Totals are a repository's header on the audit page.
type Totals struct {
	Skips, WeekSkips                 int
	Runner, GPU, WeekRunner, WeekGPU int64
	ActivePins                       int
	Week                             string
}

func (a *AuditWeb) totals(repo string) (Totals, error) {
	t := Totals{Week: state.Week(time.Now())}
	ws, err := a.Store.Saved(repo, time.Time{})
	if err != nil {
		return t, err
	}
	for _, w := range ws {
		t.Skips, t.Runner, t.GPU = t.Skips+w.Skips, t.Runner+w.RunnerSeconds, t.GPU+w.GPUSeconds
		if w.Week == t.Week {
			t.WeekSkips, t.WeekRunner, t.WeekGPU = w.Skips, w.RunnerSeconds, w.GPUSeconds
		}
	}
	prs, err := a.Store.PRsWithActivePin(repo)
	t.ActivePins = len(prs)
	return t, err
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
	tot, err := a.totals(repo)
	if err != nil {
		a.Log.Error("reading the totals", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	a.render(w, "prs", map[string]any{"Title": repo, "Repo": repo, "PRs": sums, "Next": next, "Totals": tot})
}

// Run is a run's page: every head it stood in for, on which PRs, who
// authorized it.
type runUse struct {
	Repo, HeadSHA, Actor, CommentURL, Reason string
	PR                                       int
	Time                                     time.Time
	RunnerSeconds, GPUSeconds                int64
}

func (a *AuditWeb) run(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "a run is its id: /audit/-/run/31147925932", http.StatusNotFound)
		return
	}
	var uses []runUse
	var pins []state.AuditRecord
	q := state.AuditQuery{RunID: id, Limit: 1000}
	read := 0
	for {
		recs, next, err := a.Store.Audit(q)
		read += len(recs)
		if err != nil {
			a.Log.Error("reading the audit", "err", err)
			http.Error(w, "could not read the database", http.StatusInternalServerError)
			return
		}
		for _, rec := range recs {
			if _, served := a.served(rec.Repo); !served {
				continue
			}
			switch {
			case rec.Kind == record.AuditDecision && rec.Outcome == string(state.Skip):
				uses = append(uses, runUse{Repo: rec.Repo, PR: rec.PR, HeadSHA: rec.HeadSHA, Actor: rec.ActorLogin, CommentURL: rec.CommentURL,
					Reason: rec.Reason, Time: rec.Time, RunnerSeconds: rec.RunnerSeconds, GPUSeconds: rec.GPUSeconds})
			case rec.Kind == record.AuditPin:
				pins = append(pins, rec)
			}
		}
		if next == 0 || read >= 5000 {
			break // anyone can add records to a run (a refused command names it): the page reads at most 5,000
		}
		q.After = next
	}
	repo := ""
	if len(uses) > 0 {
		repo = uses[0].Repo
	} else if len(pins) > 0 {
		repo = pins[0].Repo
	}
	a.render(w, "run", map[string]any{"Title": "Run " + strconv.FormatInt(id, 10), "RunID": id, "Repo": repo, "Uses": uses, "Pins": pins})
}

// served is the configured name of a repository the page shows.
func (a *AuditWeb) served(name string) (string, bool) {
	for _, rl := range a.Repos {
		if strings.EqualFold(rl.Name, name) {
			return rl.Name, true
		}
	}
	return "", false
}

// records is the audit, filtered by the URL's query (repo, pr, run, user,
// outcome, kind, since, until), 100 a page.
func (a *AuditWeb) records(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	repo, ok := a.served(v.Get("repo"))
	if !ok {
		http.Error(w, "name a repository opsbot serves: /audit/records?repo=OWNER/REPO", http.StatusNotFound)
		return
	}
	f := recordFilter{Repo: repo, User: strings.TrimPrefix(v.Get("user"), "@"), Outcome: v.Get("outcome"), Kind: v.Get("kind")}
	f.PR, _ = strconv.Atoi(v.Get("pr"))
	f.Run, _ = strconv.ParseInt(v.Get("run"), 10, 64)
	var bad []string
	for _, k := range []string{"since", "until"} {
		if s := v.Get(k); s != "" {
			t, err := time.Parse("2006-01-02", s)
			if err != nil {
				bad = append(bad, k+" must be a date such as 2026-12-01")
				continue
			}
			if k == "since" {
				f.Since = t
			} else {
				f.Until = t.Add(24 * time.Hour)
			}
		}
	}
	after, _ := strconv.ParseUint(v.Get("after"), 10, 64)
	recs, next, err := a.filtered(f, after, 100)
	if err != nil {
		a.Log.Error("reading the audit", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	more := url.Values{}
	for k := range v {
		if k != "after" {
			more.Set(k, v.Get(k))
		}
	}
	more.Set("after", strconv.FormatUint(next, 10))
	a.render(w, "records", map[string]any{"Title": repo + " · audit", "Repo": repo, "F": f, "Bad": bad, "Trail": recs, "Next": next,
		"More": "/audit/records?" + more.Encode()})
}

// recordFilter is the records page's filters.
type recordFilter struct {
	Repo, User, Outcome, Kind string
	PR                        int
	Run                       int64
	Since, Until              time.Time
}

// filtered reads pages of the audit until limit records pass the filter
// (or 20 pages were read), and returns the cursor after the last one read.
func (a *AuditWeb) filtered(f recordFilter, after uint64, limit int) ([]state.AuditRecord, uint64, error) {
	q := state.AuditQuery{Repo: f.Repo, PR: f.PR, RunID: f.Run, Since: f.Since, After: after, Limit: 500, Kind: f.Kind}
	var out []state.AuditRecord
	for range 20 {
		recs, next, err := a.Store.Audit(q)
		if err != nil {
			return nil, 0, err
		}
		for i, rec := range recs {
			if !f.Until.IsZero() && !rec.Time.Before(f.Until) {
				return out, 0, nil // records are in time order: none after this one is before until
			}
			if (f.User != "" && !strings.EqualFold(rec.ActorLogin, f.User)) || (f.Outcome != "" && rec.Outcome != f.Outcome) {
				continue
			}
			out = append(out, rec)
			if len(out) == limit {
				if i == len(recs)-1 {
					return out, next, nil
				}
				return out, rec.Seq, nil
			}
		}
		if next == 0 {
			return out, 0, nil
		}
		q.After = next
	}
	return out, q.After, nil
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
	// After the merge: the merged PR's main-side run, followed, each step.
	followed, _, err := a.Store.Audit(state.AuditQuery{Repo: repo, PR: n, Kind: string(record.AuditAfterMerge), Limit: 50})
	if err != nil {
		a.Log.Error("reading the audit", "err", err)
		http.Error(w, "could not read the database", http.StatusInternalServerError)
		return
	}
	a.render(w, "pr", map[string]any{"Title": repo + " #" + strconv.Itoa(n), "Repo": repo, "PR": n, "T": tl, "Trail": trail,
		"Next": next, "PRURL": a.web() + "/" + repo + "/pull/" + strconv.Itoa(n), "After": followed})
}

func (a *AuditWeb) web() string {
	if a.Web == "" {
		return "https://github.com"
	}
	return strings.TrimSuffix(a.Web, "/")
}
