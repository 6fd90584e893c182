package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/gate"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/reconcile"
	"github.com/SemiAnalysisAI/opsbot/server"
)

// learnSelf finds opsbot's own GitHub account, so it never runs a command it
// wrote and finds its earlier comments only among its own. With a token or
// an App it asks GitHub (one try; the caller tries again); in a dry run
// without either it can ask no one, and takes github.bot_user_id and
// bot_login if given.
func learnSelf(ctx context.Context, clients *ghclient.Factory, cfg *config.Config, s config.Secrets, log *slog.Logger) (ghclient.Identity, error) {
	if s.GitHubToken == "" && cfg.GitHub.App == nil {
		id := ghclient.Identity{Login: cfg.GitHub.BotLogin, ID: cfg.GitHub.BotUserID}
		clients.SetSelf(id)
		log.Warn("no GitHub credentials: opsbot cannot learn its own account", "bot_login", id.Login, "bot_user_id", id.ID)
		return id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	id, err := clients.LearnSelf(ctx)
	if err != nil {
		return id, fmt.Errorf("%w (check %s and github.api_url)", err, selfSource(cfg))
	}
	if (cfg.GitHub.BotUserID != 0 && cfg.GitHub.BotUserID != id.ID) || (cfg.GitHub.BotLogin != "" && cfg.GitHub.BotLogin != id.Login) {
		log.Warn("github.bot_login/bot_user_id differ from the account GitHub names; using GitHub's",
			"configured_login", cfg.GitHub.BotLogin, "configured_id", cfg.GitHub.BotUserID, "login", id.Login, "id", id.ID)
	}
	log.Info("opsbot's own GitHub account", "login", id.Login, "id", id.ID, "app", id.AppID)
	if id.AppID == 0 && id.Type == "User" {
		log.Error("the GitHub token belongs to a person's account: opsbot treats "+id.Login+" as itself and will never run a command "+
			id.Login+" writes, and its replies and statuses appear as that person's; use a GitHub App or a machine account "+
			"(docs/credentials.md)", "login", id.Login, "id", id.ID)
	}
	return id, nil
}

// selfSource names what opsbot asks GitHub for its own account.
func selfSource(cfg *config.Config) string {
	if cfg.GitHub.App != nil {
		return "the App's key and id (GET /app, then GET /users/<slug>[bot])"
	}
	return "the token in $" + cfg.GitHub.TokenEnv + " (GET /user)"
}

// readiness is why opsbot does not process anything yet: it waits to know
// its own GitHub account (and what needs GitHub at start) before its
// workers, outbox senders and reconciles run. Webhooks are taken and
// stored meanwhile; /readyz, the gate and the reconcile API say why.
type readiness struct {
	why atomic.Pointer[string] // nil once ready
}

// notReady is why opsbot is not ready, or "" once it is.
func (r *readiness) notReady() string {
	if p := r.why.Load(); p != nil {
		return *p
	}
	return ""
}

func (r *readiness) set(why string) { r.why.Store(&why) }
func (r *readiness) ready()         { r.why.Store(nil) }

// selfBackoff is how often opsbot asks GitHub again for its own account:
// from 1 s, doubling, to once every 2 minutes, for as long as it takes.
func selfBackoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.MaxInterval = time.Second, 2, 2*time.Minute
	return b
}

// becomeReady learns opsbot's own account and runs what needs it, trying
// again with back-off until both succeed or ctx ends: the readiness says
// why meanwhile, and each failure is logged.
func becomeReady(ctx context.Context, r *readiness, b backoff.BackOff, wait func(context.Context, time.Duration) error,
	log *slog.Logger, learn func(context.Context) (ghclient.Identity, error), begin func(ghclient.Identity) error) {
	var self *ghclient.Identity
	for attempt := 1; ; attempt++ {
		var err error
		if self == nil {
			var id ghclient.Identity
			if id, err = learn(ctx); err == nil {
				self = &id
			}
		}
		if err == nil {
			if err = begin(*self); err == nil {
				r.ready()
				if attempt > 1 {
					log.Info("opsbot knows its own GitHub account: processing the deliveries stored meanwhile", "attempts", attempt)
				}
				return
			}
		}
		if ctx.Err() != nil || errors.Is(err, errStopping) {
			return
		}
		next := b.NextBackOff()
		if next == backoff.Stop {
			next = 2 * time.Minute
		}
		what := "cannot learn opsbot's own GitHub account"
		if self != nil {
			what = "cannot start processing"
		}
		r.set(fmt.Sprintf("%s (try %d failed, next in %s): %v; webhooks are stored and processed once it succeeds",
			what, attempt, next.Round(time.Second), err))
		log.Error(what+": nothing is processed until it succeeds (webhooks are stored meanwhile); trying again",
			"attempt", attempt, "next_in", next, "err", err)
		if wait(ctx, next) != nil {
			return
		}
	}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readyGate answers every gate ask with 503 (the workflow sweeps, or asks
// again) until opsbot is ready: decisions read pins and heads that the
// stored deliveries not yet processed may change.
type readyGate struct {
	server.GateAnswerer
	r *readiness
}

func (g readyGate) Answer(ctx context.Context, req gate.Request) (gate.Answer, error) {
	if why := g.r.notReady(); why != "" {
		return gate.Answer{}, fmt.Errorf("%w: nothing was decided; ask again (%s)", server.ErrNotReady, why)
	}
	return g.GateAnswerer.Answer(ctx, req)
}

// readyReconciler refuses to reconcile until opsbot is ready.
type readyReconciler struct {
	server.Reconciler
	r *readiness
}

func (rr readyReconciler) Run(ctx context.Context, repo string, since time.Time) (reconcile.Report, error) {
	if why := rr.r.notReady(); why != "" {
		return reconcile.Report{}, fmt.Errorf("%w: %s", server.ErrNotReady, why)
	}
	return rr.Reconciler.Run(ctx, repo, since)
}

var errStopping = errors.New("opsbot is stopping")
