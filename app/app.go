package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/all"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/digest"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/idtoken"
	"github.com/SemiAnalysisAI/opsbot/metrics"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/outbox/ghsend"
	"github.com/SemiAnalysisAI/opsbot/outbox/slacksend"
	"github.com/SemiAnalysisAI/opsbot/reconcile"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/server"
	"github.com/SemiAnalysisAI/opsbot/slackmirror"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// Deps are what the app takes from where it runs: the log, the secrets
// resolved from the environment, and the version it was built as.
type Deps struct {
	Log     *slog.Logger
	Secrets config.Secrets
	// Version and Commit are opsbot's, as the binary was built (the
	// User-Agent, the build info metric, the audit page, the log).
	Version, Commit string
	// Modules are commands made after opsbot's own (commands/all) from the
	// same dependencies: a test's command, with its kinds and section.
	Modules []func(commands.Deps) commands.Module
	// Wait replaces the wait between tries to learn opsbot's own GitHub
	// account (tests step it); nil sleeps.
	Wait func(ctx context.Context, d time.Duration) error
	// GitHub adjusts the GitHub client's options (tests: its retries).
	GitHub func(*ghclient.Options)
	// SeqEvery is how often due sequences are woken (0: seq.Ticker's default).
	SeqEvery time.Duration
	// Now is the clock of the store's records and of what is due (tests
	// move it); nil is time.Now.
	Now func() time.Time
	// Worker adjusts the workers' options (tests: their back-off).
	Worker func(*worker.Options)
}

// App is opsbot's server wired from its configuration: the store, the
// GitHub and Slack clients, the workers, the outbox loops and the HTTP
// handler. New builds it apart from flag parsing; Start runs its
// workers, Serve answers HTTP until the context given to New ends.
type App struct {
	version, commit string
	// started holds what begin learns, for the commands: who opsbot is,
	// and the allow_users logins bound to accounts.
	started   started
	cfg       *config.Config // as the app was built; the settings a reload may change are live's
	live      *config.Live
	file      string               // the configuration file, read again on a reload
	overrides func(*config.Config) // the flags and environment that override the file
	log       *slog.Logger
	store     *state.Store
	digester  *digest.Digester // schedules the weekly Slack digests
	now       func() time.Time
	metrics   *metrics.Metrics
	clients   *ghclient.Clients
	dry       bool
	pool      *worker.Pool
	loops     []*outbox.Loop
	rec       *reconcile.Reconciler
	ticker    *seq.Ticker  // wakes the sequences that are due
	handler   http.Handler // the HTTP server's handler, connection limits included
	// metricsHandler serves GET /metrics on metrics.listen (nil: on listen).
	metricsHandler http.Handler
	// tls, when set, serves HTTPS with the certificate files (tls.*).
	tls   *tls.Config
	conns *server.ConnLimiter

	// ready says why nothing is processed yet; learn and begin make it
	// ready (start runs them, trying again with back-off).
	ready readiness
	learn func(context.Context) (ghclient.Identity, error)
	begin func(ghclient.Identity) error
	wait  func(context.Context, time.Duration) error

	ctx      context.Context // the app's lifetime: cancelled at shutdown
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	mu       sync.Mutex // orders stop after a begin under way
	stopping bool
}

// New opens the store and builds everything the server runs, asking
// GitHub nothing: start learns opsbot's own account and only then runs
// the workers. It asks Slack whether it takes the token; on error nothing
// is left open.
func New(parent context.Context, cfg *config.Config, d Deps) (_ *App, err error) {
	log, secrets := d.Log, d.Secrets
	live := config.NewLive(cfg)
	a := &App{cfg: cfg, live: live, log: log, version: d.Version, commit: d.Commit}
	if a.version == "" {
		a.version = "dev"
	}
	var m *metrics.Metrics // set below; the store reports commits to it
	now := d.Now
	if now == nil {
		now = time.Now
	}
	store, err := state.Open(cfg.StatePath, state.Options{Now: now, OnCommit: func(n int, d time.Duration) {
		if m != nil {
			m.Commit.Observe(d.Seconds())
			m.GroupSize.Observe(float64(n))
		}
	}})
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			return nil, fmt.Errorf("another opsbot holds %s: stop it first, or give this one another state_path", cfg.StatePath)
		}
		return nil, err
	}
	a.store = store
	ctx, cancel := context.WithCancel(parent)
	a.ctx, a.cancel = ctx, cancel
	defer func() {
		if err != nil {
			a.Close()
		}
	}()

	if err := expireUnservedPins(store, cfg, log); err != nil {
		return nil, err
	}

	m = metrics.New(func() (int, time.Time, int, error) {
		st, err := store.InboxStats()
		return st.Depth, st.Oldest, st.DeadLetter, err
	}, store.OutboxStats, time.Now)
	m.BuildInfo(a.version, a.commit)
	a.metrics = m

	dry := cfg.DryRun || (secrets.GitHubToken == "" && cfg.GitHub.App == nil)
	if dry {
		if !cfg.DryRun {
			log.Warn(NoTokenSaying(cfg), "reason", dryReason(cfg, secrets))
		}
		log.Warn("GitHub dry-run: notices are logged, not posted", "reason", dryReason(cfg, secrets))
	}
	a.dry = dry
	opt := ghclient.Options{APIURL: cfg.GitHub.APIURL, Token: secrets.GitHubToken, UserAgent: "opsbot/" + a.version,
		RequestTimeout: cfg.GitHub.RequestTimeout, Metrics: m, Log: log, DryRun: dry}
	if ga := cfg.GitHub.App; ga != nil {
		opt.AppID, opt.InstallationID, opt.AppKey = ga.ID, ga.InstallationID, secrets.AppPrivateKey
	}
	if d.GitHub != nil {
		d.GitHub(&opt)
	}
	factory, err := ghclient.NewFactory(opt)
	if err != nil {
		return nil, err
	}
	clients := ghclient.NewClients(factory, store)
	a.clients = clients
	a.ready.set("learning opsbot's own GitHub account from " + selfSource(cfg) + "; webhooks are stored and processed once it is known")
	if secrets.GitHubToken == "" && cfg.GitHub.App == nil {
		a.ready.set("starting")
	}
	a.learn = func(ctx context.Context) (ghclient.Identity, error) {
		return learnSelf(ctx, factory, cfg, secrets, log)
	}
	a.wait = d.Wait
	if a.wait == nil {
		a.wait = sleepCtx
	}
	web := notices.Web(cfg.GitHub.WebURL)
	builder := &notices.Notifier{Web: web, Mirror: &slackmirror.Mirror{Cfg: live, Web: web}, CheckRuns: cfg.GitHub.App != nil,
		Clicks: secrets.SlackSigningSecret != ""}
	slackSender := &slacksend.Sender{Log: log, PRInfo: store.PRInfo, APIURL: cfg.Slack.APIURL}
	if secrets.SlackToken != "" && !cfg.DryRun {
		slackSender.Client = slacksend.NewClient(secrets.SlackToken, cfg.Slack.APIURL)
		checkCtx, checkCancel := context.WithTimeout(ctx, 10*time.Second)
		if err := slackSender.Check(checkCtx); err != nil {
			m.SlackUp.Set(0)
			log.Error("Slack does not accept the token; messages wait in the outbox until it does", "err", err)
		} else {
			m.SlackUp.Set(1)
		}
		checkCancel()
	} else if secrets.SlackToken != "" {
		// The token is there: dry_run keeps Slack dry too.
		log.Warn("Slack dry-run: messages are logged, not posted, because dry_run is set (its token is there: set dry_run: false to post)")
	} else {
		log.Warn("Slack dry-run: messages are logged, not posted", "variable", cfg.Slack.TokenEnv)
	}
	validators := &runs.Validators{Clients: clients, Reused: store.ReusedRun, Approvals: approvalReader{store}}
	g := &gate.Gate{Cfg: live, Store: store, Notifier: builder, Log: log, Validators: validators.For,
		Observe: func(d string) { m.Decisions.WithLabelValues(d).Inc() },
		Saved: func(repo string, runner, gpu int64) {
			m.RunnerSaved.WithLabelValues(repo).Add(float64(runner))
			m.GPUSaved.WithLabelValues(repo).Add(float64(gpu))
		}}
	var appID int64
	if cfg.GitHub.App != nil {
		appID = cfg.GitHub.App.ID
	}
	// The commands, each a module of its own (commands/all), from the one
	// set of dependencies they share. Who opsbot is and the allow_users
	// accounts are known at begin, before the workers start.
	var reg *commands.Registry
	acts := &seq.Marks{} // the engine's: one set for every kind's acts
	shared := commands.Deps{Acts: acts, Cfg: live, Log: log, Now: now, Notices: builder, State: store, AppID: appID,
		GitHub:     func(inst int64) (*ghclient.Client, error) { return clients.For(inst) },
		Validators: func(inst int64) (*runs.Validator, error) { return validators.For(inst) },
		Self:       a.started.self, Users: a.started.directory, Registry: func() *commands.Registry { return reg }}
	mods := all.Modules(shared)
	for _, mk := range d.Modules {
		mods = append(mods, mk(shared))
	}
	reg, err = commands.RegistryOf(mods)
	if err != nil {
		return nil, err
	}
	kinds := commands.KindsOf(mods)
	routes, err := events.NewRoutes(reg.HasButtons(), kinds...)
	if err != nil {
		return nil, err
	}
	m.Events(routes.Used())
	handler := &events.Handler{Cfg: live, Log: log, Clients: clients, Commands: reg, Gate: g, Notices: builder,
		Marks: store, Acts: acts, State: store, Sequences: map[string]seq.Kind{}, Seqs: store, Now: now, Buttons: store, Routes: routes, SlackButtons: secrets.SlackSigningSecret != "", AppID: appID}
	if handler.Stage, err = commands.ReportsOf(mods); err != nil {
		return nil, err
	}
	digester := &digest.Digester{Cfg: live, Web: web.Base(), Now: now,
		Audit: func(repo string, since, until time.Time) ([]state.AuditRecord, error) {
			return auditSince(store, repo, since, until)
		},
		Send: func(tx digest.Tx, repo, channel, text, links string) error {
			return tx.Enqueue(&state.Notice{Channel: state.ChannelSlack, Kind: state.NoticeSlack, Repo: repo,
				Slack: &state.SlackMessage{Channel: channel, Text: slackmirror.FromMarkdown(text), Context: links}})
		}}
	a.digester, a.now = digester, now
	if err := store.Update(func(tx *state.Tx) error { return digester.Schedule(tx, now()) }); err != nil {
		return nil, fmt.Errorf("scheduling the weekly digests: %w", err)
	}
	for _, k := range append(kinds, digester.Kind()) {
		if _, dup := handler.Sequences[k.Name]; dup || k.Name == "" {
			return nil, fmt.Errorf("the sequence kind %q is registered twice (or has no name)", k.Name)
		}
		handler.Sequences[k.Name] = k
	}
	if n, err := events.UpgradeInbox(store, events.NewSchema(live, reg, time.Now), log); err != nil {
		return nil, fmt.Errorf("upgrading the inbox: %w", err)
	} else if n > 0 {
		log.Info("pending comment deliveries from an older opsbot given their parse", "deliveries", n)
	}
	wopt := worker.Options{Workers: cfg.Workers, Observer: observer{m}}
	if d.Worker != nil {
		d.Worker(&wopt)
	}
	pool := worker.New(store, handler, log, wopt)
	a.pool = pool
	wakeups := &events.Intake{Schema: events.NewSchema(live, reg, time.Now), Store: store, Queue: pool}
	a.ticker = &seq.Ticker{Due: store.DueSequences, Now: now, Log: log, Every: d.SeqEvery,
		Served:  func(repo string) bool { _, ok := live.Get().Repo(repo); return ok },
		Observe: func(due int) { m.SeqDue.Set(float64(due)) },
		Take: func(ctx context.Context, event, id string, body []byte) error {
			_, err := wakeups.Take(ctx, event, id, body, [32]byte{})
			return err
		}}
	a.loops = []*outbox.Loop{
		{Store: store, Channel: state.ChannelGitHub, Log: log,
			Sender: &ghsend.Sender{Clients: factory, SentRef: store.SentRef, Status: store.NoticeStatus},
			Pace: &outbox.Pace{Key: factory.Identity, Limits: []outbox.Limit{
				{N: cfg.GitHub.ContentRate.PerMinute, Per: cfg.GitHub.ContentRate.Minute},
				{N: cfg.GitHub.ContentRate.PerHour, Per: cfg.GitHub.ContentRate.Hour}}},
			Count: func(o string) { m.Notices.WithLabelValues("github", o).Inc() }},
		{Store: store, Channel: state.ChannelSlack, Log: log, Sender: slackSender, Scope: slacksend.Scope,
			Count: func(o string) {
				m.Notices.WithLabelValues("slack", o).Inc()
				if ok, _ := slackSender.Health(); ok {
					m.SlackUp.Set(1)
				} else {
					m.SlackUp.Set(0)
				}
			}},
	}

	rec := &reconcile.Reconciler{Cfg: live, Store: store, Queue: pool, Log: log, Commands: reg,
		Clients: func(repo string) (reconcile.Reader, error) { return clients.ForRepo(repo) }}
	a.rec = rec
	a.begin = func(self ghclient.Identity) error {
		// allow_users logins are bound to accounts with GitHub's answers:
		// after GitHub answered who opsbot is, not while it cannot.
		users, err := allowedUsers(ctx, cfg, store, log, func(repo string) (auth.UserLookup, error) { return clients.ForRepo(repo) })
		if err != nil {
			return err
		}
		// Read only by the workers and reconciles, which run after this.
		handler.Checker = &auth.Checker{SelfID: self.ID, SelfLogin: self.Login, TTL: cfg.GitHub.RoleCacheTTL}
		handler.SelfID, handler.SelfName, handler.Users = self.ID, self.Login, users
		a.started.set(self, users)
		rec.SelfID = self.ID
		return a.run()
	}
	api := &server.API{Tokens: secrets.APITokens, GateTokens: secrets.GateTokens, AdminTokens: secrets.AdminTokens,
		Audit: store, Log: log, Ctx: ctx, Served: func() []string {
			var out []string
			for _, r := range live.Get().Repos {
				out = append(out, r.Name)
			}
			return out
		}, Reconcile: readyReconciler{rec, &a.ready}, Reload: func() server.ReloadResult { return a.Reload() },
		AskLimit:   &server.RateLimiter{Burst: cfg.API.GateRate.Burst, PerMinute: cfg.API.GateRate.PerMinute},
		AskOutcome: func(o string) { m.GateAsks.WithLabelValues(o).Inc() },
		Gate: readyGate{&gate.API{Gate: g, QuietWait: cfg.API.GateWait,
			Quiet: func(ctx context.Context, repo string, pr int) error {
				return pool.WaitQuiet(ctx, (&state.Delivery{Repo: repo, PR: pr}).Key())
			},
			Finder: func(repo string) (gate.PRFinder, error) { return clients.ForRepo(repo) },
		}, &a.ready}}
	for _, o := range server.AskOutcomes {
		m.GateAsks.WithLabelValues(o) // every outcome is reported, at 0 until it happens
	}
	if o := cfg.API.GitHubOIDC; o.On() {
		api.IDTokens = struct {
			*idtoken.Verifier
			*idtoken.Scope
		}{&idtoken.Verifier{Issuer: o.Issuer, Audience: o.Audience, Served: func(repo string) bool { _, ok := cfg.Repo(repo); return ok }},
			&idtoken.Scope{Cfg: live, DefaultBranch: func(ctx context.Context, repo string) (string, error) {
				c, err := clients.ForRepo(repo)
				if err != nil {
					return "", err
				}
				return c.DefaultBranch(ctx, repo)
			}}}
	}
	if len(secrets.APITokens)+len(secrets.GateTokens) == 0 && !cfg.API.GitHubOIDC.On() {
		log.Warn("no gate tokens and GitHub Actions ID tokens are off: every gate ask is refused",
			"variables", []string{cfg.API.GateTokensEnv, cfg.API.TokensEnv})
	}
	if len(secrets.APITokens)+len(secrets.AdminTokens) == 0 {
		log.Warn("no admin tokens: the audit, backup and reconcile API is refused", "variables",
			slices.DeleteFunc([]string{cfg.API.AdminTokensEnv, cfg.API.TokensEnv}, func(v string) bool { return v == "" }))
	}
	if cfg.API.TokensEnv != "" {
		log.Warn("api.tokens_env is deprecated: split it into api.gate_tokens_env and api.admin_tokens_env", "variable", cfg.API.TokensEnv)
	}

	proxies, _ := cfg.HTTP.TrustedProxyPrefixes() // validated when the config was read
	a.conns = server.NewConnLimiter(server.ConnLimits{Max: cfg.HTTP.MaxConnections, PerAddr: cfg.HTTP.MaxConnectionsPerIP,
		IPv6PrefixLen: cfg.HTTP.IPv6PrefixLen, PendingPerAddr: cfg.HTTP.MaxPendingPerIP, SlowHeader: cfg.HTTP.SlowHeader, Trusted: proxies,
		Refused: func(reason string) { m.Webhooks.WithLabelValues("other", reason).Inc() }})
	clientAddr := a.conns.ClientKey
	srv := server.New(server.Config{
		Store: store, Queue: pool, Secrets: secrets.WebhookSecrets, MaxBody: cfg.Webhook.MaxBodyBytes,
		Body: server.BodyLimits{MaxInflight: cfg.Webhook.MaxInflightBytes, MinRate: max(0, cfg.Webhook.MinBodyRate),
			Grace: cfg.Webhook.MinBodyRateGrace, ReadTimeout: cfg.HTTP.ReadTimeout},
		RepoName: func(name string) (string, bool) {
			r, ok := live.Get().Repo(name)
			if !ok {
				return "", false
			}
			return r.Name, true
		},
		WebHost: cfg.WebHost(), Commands: reg, Heads: store.PRsOfCommit, Approvals: store.ApprovalPRFor, Routes: routes,
		SlackSecret:    secrets.SlackSigningSecret,
		SlackUserKnown: func(id string) bool { _, ok := live.Get().Slack.Users[id]; return ok },
		Metrics:        m, MetricsToken: secrets.MetricsToken, MetricsElsewhere: cfg.Metrics.Listen != "",
		Log: log, Ctx: context.WithoutCancel(ctx),
		Ready: func() (string, []string) {
			if _, err := store.InboxStats(); err != nil {
				return "database: " + err.Error(), nil
			}
			if why := a.ready.notReady(); why != "" {
				return "github: " + why, nil
			}
			if !pool.Running() {
				return "workers are not running", nil
			}
			if secrets.GitHubToken == "" && cfg.GitHub.App == nil {
				// It runs (webhooks are taken, commands answered), but it can
				// do nothing it is for: nothing is read from GitHub.
				return "github: no credentials (github.token_env's variable is empty and no github.app is set): nothing is read " +
					"from or written to GitHub, and every command is answered that its permission could not be checked", nil
			}

			if ok, problem := slackSender.Health(); !ok {
				return "", []string{"slack: " + problem}
			}
			return "", nil
		},
		Extra: func(mux *http.ServeMux) {
			api.Routes(mux)
			if cfg.AuditWeb.Enabled {
				var lines []server.RepoLine
				for _, r := range cfg.Repos {
					lines = append(lines, server.RepoLine{Name: r.Name, Workflow: r.SweepWorkflow, ReuseRole: r.Reuse.MinRole})
				}
				(&server.AuditWeb{Store: store, Repos: lines, User: secrets.AuditUser, Password: secrets.AuditPassword,
					Version: a.version, Log: log, Web: web.Base(), ClientAddr: clientAddr}).Routes(mux)
			}
		},
	})
	a.handler = a.conns.Handler(srv)
	if cfg.Metrics.Listen != "" {
		a.metricsHandler = srv.MetricsHandler()
	}
	return a, nil
}

// reload reads the configuration file again and, when it is valid, puts it
// in use (repositories and notices at once; what shaped the running server
// at its next start, named in the result). On any problem the running
// configuration stays and every problem is logged, as Prow's config
// reload does.
func (a *App) Reload() server.ReloadResult {
	res := server.ReloadResult{File: a.file}
	next, err := config.Load(a.file)
	if err != nil {
		var probs config.Problems
		if !errors.As(err, &probs) {
			probs = config.Problems{err.Error()}
		}
		res.Problems = probs
		for _, p := range probs {
			a.log.Error("configuration reload refused; the running configuration stays", "file", a.file, "problem", p)
		}
		return res
	}
	a.overrides(next)
	res.Restart = config.RestartOnly(a.cfg, next)
	prev := a.live.Get()
	a.live.Swap(next)
	res.Applied = true
	a.log.Info("configuration reloaded", "file", a.file, "repos", len(next.Repos), "restart_needed_for", res.Restart)
	for _, r := range prev.Repos {
		if _, ok := next.Repo(r.Name); !ok {
			res.ExpiredPins += expireRemovedRepo(a.store, r.Name, "its repository was removed from opsbot's configuration (a reload of "+a.file+")", a.log)
		}
	}
	for _, r := range next.Repos {
		if _, ok := prev.Repo(r.Name); !ok {
			// A pin still active for a repository served again was given before
			// it was removed (a command in flight when it was): it covers no
			// later push.
			res.ExpiredPins += expireRemovedRepo(a.store, r.Name, "its repository was added back to opsbot's configuration (a reload of "+
				a.file+"): a pin from before it was removed covers no later push", a.log)
		}
	}
	if err := a.store.Update(func(tx *state.Tx) error { return a.digester.Schedule(tx, a.now()) }); err != nil {
		a.log.Error("scheduling the weekly digests after a reload failed; they follow the configuration at the next reload or start", "err", err)
	}
	for _, w := range next.Warnings() {
		a.log.Warn(w)
	}
	return res
}

// auditSince lists repo's audit records from since up to until, every
// page (records are in time order: the first at or past until ends it).
func auditSince(store *state.Store, repo string, since, until time.Time) ([]state.AuditRecord, error) {
	var out []state.AuditRecord
	q := state.AuditQuery{Repo: repo, Since: since, Limit: 1000}
	for {
		recs, next, err := store.Audit(q)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if !r.Time.Before(until) {
				return out, nil
			}
			out = append(out, r)
		}
		if next == 0 {
			return out, nil
		}
		q.After = next
	}
}

// start runs pruning and, in the background, learns opsbot's own GitHub
// account (trying again with back-off for as long as GitHub does not
// answer); once it is known the workers (recovering what the inbox
// holds), the outbox loops and periodic reconciles run. Until then
// webhooks are stored and nothing is processed: /readyz, the gate and the
// reconcile API say why.
func (a *App) Start() error {
	a.bg.Add(2)
	go func() { defer a.bg.Done(); retain(a.ctx, a.store, a.cfg.Retention.Processed, a.log) }()
	go func() {
		defer a.bg.Done()
		becomeReady(a.ctx, &a.ready, selfBackoff(), a.wait, a.log, a.learn, a.begin)
	}()
	return nil
}

// run starts the workers, the outbox loops and periodic reconciles, unless
// the app is stopping.
func (a *App) run() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return errStopping
	}
	if err := a.pool.Start(a.ctx); err != nil {
		return err
	}
	for _, l := range a.loops {
		a.bg.Add(1)
		go func() { defer a.bg.Done(); l.Run(a.ctx) }()
	}
	if a.cfg.Reconcile.Period > 0 {
		a.bg.Add(1)
		go func() { defer a.bg.Done(); reconcileEvery(a.ctx, a.rec, a.cfg, a.log) }()
	}
	a.bg.Add(1)
	go func() { defer a.bg.Done(); a.ticker.Run(a.ctx) }()
	return nil
}

// stop stops the workers and the background loops.
func (a *App) Stop() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.pool.Stop()
	a.cancel()
	a.bg.Wait()
}

// close releases the store; the app is not used after.
func (a *App) Close() {
	a.cancel()
	a.store.Close()
}

// serve answers HTTP on ln until the app's context ends, then drains
// requests and workers.
func (a *App) Serve(ln net.Listener) error {
	cfg, log := a.cfg, a.log
	ln = a.conns.Listener(ln)
	if a.tls != nil {
		ln = tls.NewListener(ln, a.tls) // the limiter counts the TCP connections under it
	}
	hs := &http.Server{
		Handler:           a.handler,
		ConnState:         a.conns.ConnState,
		ConnContext:       a.conns.ConnContext,
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return a.ctx },
		// net/http's own complaints (a TLS handshake that failed, a bad
		// request line) go to opsbot's log, not to stderr raw.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("opsbot serving", "addr", ln.Addr().String(), "state", cfg.StatePath, "github_dry_run", a.dry, "version", a.version)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-a.ctx.Done():
	case err := <-errc:
		a.Stop()
		return fmt.Errorf("serving: %w", err)
	}
	log.Info("shutting down: draining requests and workers")
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer shutCancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		log.Warn("requests still open at shutdown", "err", err)
	}
	a.Stop()
	log.Info("stopped")
	return nil
}

// allowedUsers binds the configuration's allow_users logins to accounts
// (auth.LoadDirectory), keeping the bindings in the store.
func allowedUsers(ctx context.Context, cfg *config.Config, store *state.Store, log *slog.Logger,
	client func(repo string) (auth.UserLookup, error)) (*auth.Directory, error) {
	var repos []auth.RepoLogins
	var slackLogins []string
	for _, login := range cfg.Slack.Users {
		slackLogins = append(slackLogins, login)
	}
	sort.Strings(slackLogins)
	for i := range cfg.Repos {
		// The accounts Slack users act as are bound like allow_users.
		repos = append(repos, auth.RepoLogins{Repo: cfg.Repos[i].Name, Logins: append(cfg.Repos[i].AllowUsers(), slackLogins...)})
	}
	return auth.LoadDirectory(ctx, repos, store, log, client)
}

func dryReason(cfg *config.Config, s config.Secrets) string {
	if cfg.DryRun {
		return "dry_run is set"
	}
	if cfg.GitHub.TokenEnv == "" {
		return "no github.token_env or github.app configured"
	}
	return "the environment variable " + cfg.GitHub.TokenEnv + " is empty"
}

type observer struct{ m *metrics.Metrics }

func (o observer) Processed(event, outcome string, took time.Duration) {
	o.m.ObserveProcessed(event, outcome, took)
}

// retain prunes, every ten minutes, the processed delivery ids, sent
// notice records and failed notices older than the retention. The audit is never pruned.
func retain(ctx context.Context, store *state.Store, keep time.Duration, log *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		cutoff := time.Now().Add(-keep)
		for {
			n, err := store.PruneDeliveries(cutoff, 5000)
			if err != nil {
				log.Error("pruning delivery ids", "err", err)
				break
			}
			if n > 0 {
				log.Info("pruned processed delivery ids", "count", n, "older_than", cutoff)
			}
			if n < 5000 {
				break
			}
		}
		if n, err := store.PruneSent(cutoff, 5000); err != nil {
			log.Error("pruning sent notices", "err", err)
		} else if n > 0 {
			log.Info("pruned sent notice records", "count", n)
		}
		if n, err := store.PruneFailed(cutoff, 5000); err != nil {
			log.Error("pruning failed notices", "err", err)
		} else if n > 0 {
			log.Info("pruned failed notice records", "count", n)
		}
		if _, err := store.PruneReplies(time.Now().Add(-state.ReplyWindow), 5000); err != nil {
			log.Error("pruning reply counts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileEvery reconciles every repository on the configured period.
func reconcileEvery(ctx context.Context, rec *reconcile.Reconciler, cfg *config.Config, log *slog.Logger) {
	t := time.NewTicker(cfg.Reconcile.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range rec.Cfg.Get().Repos { // the repositories served now, after any reload
			rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			if _, err := rec.Run(rctx, r.Name, time.Time{}); err != nil {
				log.Warn("reconcile failed; it runs again next period", "repo", r.Name, "err", err)
			}
			cancel()
		}
	}
}

// expireRemovedRepo expires the active pins of a repository opsbot no
// longer serves (audited with why), so that none of them covers a push
// made after it is served again. It returns how many it expired; a
// failure is logged (the pins are expired at the next start).
func expireRemovedRepo(store *state.Store, repo, why string, log *slog.Logger) int {
	pins, err := store.ExpireRepoPins(repo, why)
	if err != nil {
		log.Error("could not expire the pins of a repository no longer served; they are expired at the next start",
			"repo", repo, "err", err)
		return 0
	}
	for _, p := range pins {
		log.Info("pin expired: its repository is no longer served", "repo", p.Repo, "pr", p.PR, "pin", p.ID, "run", p.RunID)
	}
	return len(pins)
}

// expireUnservedPins expires, at start, the active pins of repositories the
// configuration no longer lists (removed while opsbot was stopped), as a
// reload that removes one does.
func expireUnservedPins(store *state.Store, cfg *config.Config, log *slog.Logger) error {
	repos, err := store.ReposWithActivePins()
	if err != nil {
		return fmt.Errorf("reading the repositories with active pins: %w", err)
	}
	for _, repo := range repos {
		if _, ok := cfg.Repo(repo); ok {
			continue
		}
		pins, err := store.ExpireRepoPins(repo, "its repository is not in opsbot's configuration (found at start)")
		if err != nil {
			return fmt.Errorf("expiring the pins of %s, which the configuration no longer lists: %w", repo, err)
		}
		for _, p := range pins {
			log.Info("pin expired: its repository is no longer served", "repo", p.Repo, "pr", p.PR, "pin", p.ID, "run", p.RunID)
		}
	}
	return nil
}

// Store is the app's database (tests read what it recorded).
func (a *App) Store() *state.Store { return a.store }

// Clients are the app's GitHub clients (tests read the installation each
// repository's webhooks named).
func (a *App) Clients() *ghclient.Clients { return a.clients }

// started is what begin learns, read by the commands once the workers run
// (commands.Deps.Self, Users).
type started struct {
	mu    sync.Mutex
	id    int64
	login string
	users *auth.Directory
}

func (s *started) set(self ghclient.Identity, users *auth.Directory) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.login, s.users = self.ID, self.Login, users
}

func (s *started) self() (int64, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.login
}

func (s *started) directory() *auth.Directory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users
}
