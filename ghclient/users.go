package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/SemiAnalysisAI/opsbot/auth"
)

// Permission reads a user's permission on a repository, raw, for auth to rank.
func (c *Client) Permission(ctx context.Context, repo, login string) (auth.PermissionResponse, error) {
	o, r := split(repo)
	var out auth.PermissionResponse
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(o), url.PathEscape(r), url.PathEscape(login)), nil)
	if err != nil {
		return out, err
	}
	resp, err := c.gh.Do(ctx, req, &out)
	err = wrap("reading the permission of "+login, resp, err)
	if errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("%w: %w", auth.ErrNoSuchUser, err)
	}
	return out, err
}

// UserID reads the id of the account that holds login now; ErrNotFound
// when no account does.
func (c *Client) UserID(ctx context.Context, login string) (int64, error) {
	u, resp, err := c.gh.Users.Get(ctx, login)
	if err := wrap("reading the account "+login, resp, err); err != nil {
		return 0, err
	}
	return u.GetID(), nil
}

// TeamMember reports whether login is an active member of team ORG/SLUG
// (GitHub counts child teams' members).
func (c *Client) TeamMember(ctx context.Context, team, login string) (bool, error) {
	org, slug := split(team)
	m, resp, err := c.gh.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
	if err := wrap("reading team "+team, resp, err); err != nil {
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return m.GetState() == "active", nil
}
