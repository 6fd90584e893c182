package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
)

// learnSelf finds opsbot's own GitHub account, so it never runs a command it
// wrote and finds its earlier comments only among its own. With a token or
// an App it asks GitHub and refuses to start without an answer; in a dry run
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
		how := "the token in $" + cfg.GitHub.TokenEnv + " (GET /user)"
		if cfg.GitHub.App != nil {
			how = "the App's key and id (GET /app, then GET /users/<slug>[bot])"
		}
		return id, fmt.Errorf("%w\nopsbot must know its own account to never run a command it wrote; check %s and github.api_url, "+
			"or run with --dry-run and no credentials", err, how)
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
