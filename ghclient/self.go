package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// Identity is opsbot's own GitHub account: the user a token belongs to, or a
// GitHub App's bot user (`<slug>[bot]`) and the App.
type Identity struct {
	Login string
	ID    int64
	AppID int64  // the App opsbot is; 0 with a token
	Type  string // the account's type: Bot for an App, User for a person's or a machine account's token
}

// Wrote reports whether a comment is opsbot's own: written by its account
// (by id) and, for an App, performed through opsbot's App when GitHub names
// the App that performed it (viaApp 0: none named).
func (i Identity) Wrote(authorID, viaApp int64) bool {
	if i.ID == 0 || authorID != i.ID {
		return false
	}
	return i.AppID == 0 || viaApp == 0 || viaApp == i.AppID
}

// listedComment is an issue comment as GitHub lists it, with the App that
// performed it (go-github's IssueComment lacks the field).
type listedComment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	User    struct {
		ID int64 `json:"id"`
	} `json:"user"`
	PerformedViaGithubApp *struct {
		ID int64 `json:"id"`
	} `json:"performed_via_github_app"`
}

func (c listedComment) viaApp() int64 {
	if c.PerformedViaGithubApp == nil {
		return 0
	}
	return c.PerformedViaGithubApp.ID
}

// selfRef is the identity the factory's clients share once it is learned.
type selfRef = atomic.Pointer[Identity]

// ErrUnknownSelf is why opsbot does not start: it could not learn its own
// account, so it could read its own comments as commands.
var ErrUnknownSelf = errors.New("ghclient: cannot learn opsbot's own GitHub account")

// LearnSelf asks GitHub who opsbot is: `GET /user` for a token; for an App,
// `GET /app` (as the App) for its slug, then `GET /users/{slug}[bot]` for its
// bot user, authenticated with an installation token (the configured
// installation, or else the App's first from `GET /app/installations`). The
// clients use the answer to find opsbot's own comments.
func (f *Factory) LearnSelf(ctx context.Context) (Identity, error) {
	var id Identity
	if f.opt.AppID == 0 {
		c, err := f.For(0)
		if err != nil {
			return id, err
		}
		u, resp, err := c.gh.Users.Get(ctx, "")
		if err := wrap("reading the token's account (GET /user)", resp, err); err != nil {
			return id, fmt.Errorf("%w: %w", ErrUnknownSelf, err)
		}
		id = Identity{Login: u.GetLogin(), ID: u.GetID(), Type: u.GetType()}
	} else {
		app, err := f.app(ctx)
		if err != nil {
			return id, fmt.Errorf("%w: %w", ErrUnknownSelf, err)
		}
		login := app.GetSlug() + "[bot]"
		inst := f.opt.InstallationID
		if inst == 0 {
			if inst, err = f.firstInstallation(ctx); err != nil {
				return id, fmt.Errorf("%w: %w", ErrUnknownSelf, err)
			}
		}
		c, err := f.For(inst)
		if err != nil {
			return id, err
		}
		u, resp, err := c.gh.Users.Get(ctx, login)
		if err := wrap("reading the App's bot user (GET /users/"+login+")", resp, err); err != nil {
			return id, fmt.Errorf("%w: %w", ErrUnknownSelf, err)
		}
		id = Identity{Login: u.GetLogin(), ID: u.GetID(), AppID: app.GetID(), Type: u.GetType()}
	}
	if id.ID == 0 || id.Login == "" {
		return id, fmt.Errorf("%w: GitHub answered no account id or login", ErrUnknownSelf)
	}
	f.self.Store(&id)
	return id, nil
}

// SetSelf records opsbot's identity when it cannot be learned (a dry run
// without a token, from github.bot_login and bot_user_id).
func (f *Factory) SetSelf(id Identity) { f.self.Store(&id) }

// appClient is a client authenticated as the App (a JWT).
func (f *Factory) appClient() (*github.Client, error) {
	tr, err := ghinstallation.NewAppsTransport(tokenTransport{base: http.DefaultTransport, ua: f.ua()}, f.opt.AppID, f.opt.AppKey)
	if err != nil {
		return nil, fmt.Errorf("github.app.private_key_file: %w", err)
	}
	tr.BaseURL = strings.TrimSuffix(f.opt.APIURL, "/")
	return f.withBase(github.NewClient(&http.Client{Transport: tr}))
}

// app reads the App as the App (a JWT).
func (f *Factory) app(ctx context.Context) (*github.App, error) {
	gh, err := f.appClient()
	if err != nil {
		return nil, err
	}
	app, resp, err := gh.Apps.Get(ctx, "")
	return app, wrap("reading the App (GET /app)", resp, err)
}

// firstInstallation reads the App's first installation (as the App).
func (f *Factory) firstInstallation(ctx context.Context) (int64, error) {
	gh, err := f.appClient()
	if err != nil {
		return 0, err
	}
	ins, resp, err := gh.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 1})
	if err := wrap("listing the App's installations (GET /app/installations)", resp, err); err != nil {
		return 0, err
	}
	if len(ins) == 0 || ins[0].GetID() == 0 {
		return 0, errors.New("the App has no installation: install it on the served repositories, or set github.app.installation_id")
	}
	return ins[0].GetID(), nil
}

func (f *Factory) ua() string {
	if f.opt.UserAgent == "" {
		return "opsbot"
	}
	return f.opt.UserAgent
}

func (f *Factory) withBase(gh *github.Client) (*github.Client, error) {
	u, err := url.Parse(f.opt.APIURL)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	gh.BaseURL = u
	gh.UserAgent = f.ua()
	return gh, nil
}
