package auth

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Bindings keeps allow_users logins bound to their accounts across
// restarts (the store).
type Bindings interface {
	AllowedUsers() ([]record.AllowedUser, error)
	PutAllowedUser(u record.AllowedUser) error
	DeleteAllowedUser(login string) error
}

// RepoLogins are the allow_users logins of one repository.
type RepoLogins struct {
	Repo   string
	Logins []string
}

// LoadDirectory binds every allow_users login to an account id and keeps
// each binding in the database. A login bound before (at an earlier start)
// keeps its stored account: when GitHub now names another account for it
// (renamed, and the login taken), the log says so loudly and the stored
// account stays the one allowed. Logins never bound are resolved, one read
// each; one that does not resolve allows nobody, and the log says so.
// Bindings of logins no allow_users list names any more are forgotten (how
// an operator re-binds a login: remove it, restart, add it back). A
// repository whose GitHub client is not known yet (an App installation
// learnt from webhooks) has its logins resolved at its first comment.
func LoadDirectory(ctx context.Context, repos []RepoLogins, store Bindings, log *slog.Logger,
	client func(repo string) (UserLookup, error)) (*Directory, error) {
	stored, err := store.AllowedUsers()
	if err != nil {
		return nil, fmt.Errorf("reading the stored allow_users accounts: %w", err)
	}
	listed := map[string]bool{}
	for _, r := range repos {
		for _, login := range r.Logins {
			listed[strings.ToLower(login)] = true
		}
	}
	bound := map[string]int64{}
	for _, u := range stored {
		switch {
		case !listed[strings.ToLower(u.Login)]:
			if err := store.DeleteAllowedUser(u.Login); err != nil {
				return nil, fmt.Errorf("forgetting allow_users login %s: %w", u.Login, err)
			}
			if u.ID > 0 {
				log.Warn("an allow_users login no longer configured: its account is forgotten", "login", u.Login, "account_id", u.ID)
			}
		case u.ID > 0:
			bound[strings.ToLower(u.Login)] = u.ID
			log.Info("allow_users login bound to its stored account", "login", u.Login, "account_id", u.ID, "since", u.ResolvedAt)
		}
	}
	d := &Directory{Record: func(login string, id int64, err error) {
		u := record.AllowedUser{Login: login, ID: id}
		if err != nil {
			u.Error = err.Error()
			log.Warn("an allow_users login could not be resolved to an account: it allows nobody until opsbot restarts",
				"login", login, "err", err)
		} else {
			log.Info("allow_users login resolved", "login", login, "account_id", id)
		}
		if err := store.PutAllowedUser(u); err != nil {
			log.Error("recording an allow_users login's account", "login", login, "err", err)
		}
	}, Stored: func(login string) (int64, bool) {
		id, ok := bound[strings.ToLower(login)]
		return id, ok
	}, Disagree: func(login string, stored, now int64, err error) {
		if err != nil {
			log.Warn("an allow_users login bound to a stored account could not be checked on GitHub; the stored account stays allowed",
				"login", login, "stored_account_id", stored, "err", err)
			return
		}
		log.Error("SECURITY: GitHub no longer names the stored account for an allow_users login (renamed, and the login taken?); "+
			"the stored account stays allowed and the login's holder now is not. To allow the new holder, remove the login from "+
			"allow_users, restart, add it back and restart", "login", login, "stored_account_id", stored, "github_account_id", now)
	}}
	for _, rc := range repos {
		logins := rc.Logins
		if len(logins) == 0 {
			continue
		}
		c, err := client(rc.Repo)
		if err != nil {
			log.Info("allow_users logins are resolved at the repository's first comment", "repo", rc.Repo, "reason", err)
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		d.Resolve(rctx, c, logins)
		cancel()
	}
	return d, nil
}
