// Package server is opsbot's HTTP face: the webhook endpoint, the API the
// workflow and the CLI use, the audit page, health and metrics.
package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/metrics"
)

// Appender stores deliveries durably (events.Inbox).
type Appender = events.Inbox

// Queue takes stored deliveries for processing (events.Queue).
type Queue = events.Queue

// ReadyCheck reports a reason the server is not ready, or "" when it is.
// degraded parts (Slack) are reported but do not make it unready.
type ReadyCheck func() (unready string, degraded []string)

// Config is everything a Server needs.
type Config struct {
	Store   Appender
	Queue   Queue
	Secrets []auth.Secret
	MaxBody int64
	// Body bounds reading bodies before their signatures are checked.
	Body     BodyLimits
	RepoName func(fullName string) (canonical string, served bool)
	// WebHost is the host of run URLs in commands (default github.com).
	WebHost string
	// Commands are the commands opsbot reads; ingest stores comments
	// without reading them (the worker does).
	Commands *commands.Registry
	// Heads finds the PRs whose head is a commit, or whose live sequence
	// watches it (state.Store.PRsOfCommit),
	// for events that name only a commit.
	Heads func(repo, sha string) ([]int, error)
	// Approvals finds the PR of the approval a workflow run was dispatched
	// for (events.Schema.Approvals).
	Approvals func(repo string, run int64, title string) (int, error)
	// Routes are the sequence kinds' event routes (events.NewRoutes).
	Routes *events.Routes
	// SlackSecret is the Slack app's signing secret: with it, clicks on
	// opsbot's buttons are taken at POST /slack/interactions.
	SlackSecret auth.Secret
	// SlackUserKnown says whether slack.users maps a Slack user id.
	SlackUserKnown func(string) bool
	Metrics        *metrics.Metrics
	// MetricsToken, when set, is the bearer GET /metrics needs.
	MetricsToken auth.Secret
	// MetricsElsewhere leaves GET /metrics off this server's routes (it is
	// served on metrics.listen through MetricsHandler).
	MetricsElsewhere bool
	Log              *slog.Logger
	Ready            ReadyCheck
	Now              func() time.Time
	// Ctx is the server's lifetime context: work a request starts that must
	// outlive the request (storing a delivery) runs on it.
	Ctx context.Context
	// Extra registers more routes (the API, the audit page) on the same mux.
	Extra func(mux *http.ServeMux)
}

// Server answers HTTP.
type Server struct {
	intake      *events.Intake
	slackSecret auth.Secret
	repoOf      func(string) (string, bool)
	// slackUserKnown says whether slack.users maps a Slack user; clicks of
	// others are answered within slackUnknown's budget.
	slackUserKnown func(string) bool
	slackUnknown   *RateLimiter
	secrets        []auth.Secret
	maxBody        int64
	limits         BodyLimits
	bodies         *bodyBudget
	m              *metrics.Metrics
	log            *slog.Logger
	unserved       onceEvery // repositories not served, logged once a while each
	ready          ReadyCheck
	now            func() time.Time
	ctx            context.Context
	mux            *http.ServeMux
	// refusals logs deliveries refused for their bodies.
	refusals *refusalLog

	metricsToken     auth.Secret
	metricsElsewhere bool
}

// New builds a Server and registers every route.
func New(c Config) *Server {
	if c.Commands == nil {
		// The schema ingest classifies with carries them.
		panic("server: Config.Commands is required")
	}
	s := &Server{secrets: c.Secrets, maxBody: c.MaxBody, limits: c.Body, bodies: newBodyBudget(c.Body),
		m: c.Metrics, log: c.Log, ready: c.Ready, now: c.Now, ctx: c.Ctx, mux: http.NewServeMux(),
		metricsToken: c.MetricsToken, metricsElsewhere: c.MetricsElsewhere}
	if s.now == nil {
		s.now = time.Now
	}
	if s.ctx == nil {
		s.ctx = context.Background()
	}
	s.refusals = newRefusalLog(s.log, s.now)
	s.slackSecret, s.repoOf = c.SlackSecret, c.RepoName
	s.slackUserKnown, s.slackUnknown = c.SlackUserKnown, &RateLimiter{Burst: 3, PerMinute: 1, Now: s.now}
	s.intake = &events.Intake{Schema: &events.Schema{Repo: c.RepoName, WebHost: c.WebHost, Commands: c.Commands, Now: s.now, Heads: c.Heads, Approvals: c.Approvals, Routes: c.Routes},
		Store: c.Store, Queue: c.Queue}
	s.routes(c.Extra)
	return s
}

func (s *Server) routes(extra func(*http.ServeMux)) {
	s.mux.HandleFunc("POST /webhook", s.handleWebhook)
	s.mux.HandleFunc("POST /slack/interactions", s.handleSlack)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	if !s.metricsElsewhere {
		s.mux.Handle("GET /metrics", s.MetricsHandler())
	}
	if extra != nil {
		extra(s.mux)
	}
}

// MetricsHandler serves the Prometheus metrics, behind the metrics token
// when one is set.
func (s *Server) MetricsHandler() http.Handler {
	h := promhttp.HandlerFor(s.m.Registry, promhttp.HandlerOpts{})
	if s.metricsToken == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !auth.TokenMatches(strings.TrimSpace(tok), []auth.Secret{s.metricsToken}) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="opsbot metrics"`)
			writeJSON(w, http.StatusUnauthorized, apiError{"GET /metrics needs the metrics token (metrics.token_env) as a bearer token"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	unready, degraded := "", []string(nil)
	if s.ready != nil {
		unready, degraded = s.ready()
	}
	body := map[string]any{"status": "ready"}
	if len(degraded) > 0 {
		body["degraded"] = degraded
	}
	if unready != "" {
		body["status"] = "unready"
		body["reason"] = unready
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// WriteJSON writes v as the JSON body of a response with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}
