package githubtest

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

func (f *Fake) permission(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	login := r.PathValue("user")
	u := f.users[strings.ToLower(login)]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	role := repo.Roles[strings.ToLower(login)]
	if role == "" {
		role = "read" // public repository: everyone reads
	}
	legacy := map[string]string{"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none"}[role]
	if legacy == "" {
		legacy = "write" // a custom role built on write
	}
	rank := map[string]int{"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}[legacy]
	if r, ok := map[string]int{"triage": 2, "maintain": 4}[role]; ok {
		rank = r
	}
	perms := map[string]bool{"pull": rank >= 1, "triage": rank >= 2, "push": rank >= 3, "maintain": rank >= 4, "admin": rank >= 5}
	user := map[string]any{"login": u.GetLogin(), "id": u.GetID(), "type": u.GetType(), "permissions": perms}
	return http.StatusOK, map[string]any{"permission": legacy, "role_name": role, "user": user}
}

// user answers an account by login, as whoever holds the login now.
func (f *Fake) user(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	u := f.users[strings.ToLower(r.PathValue("user"))]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, u
}

func (f *Fake) teamMembership(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	team := strings.ToLower(r.PathValue("org") + "/" + r.PathValue("slug"))
	if !f.teams[team][strings.ToLower(r.PathValue("user"))] {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, map[string]any{"url": "", "role": "member", "state": "active"}
}

func (f *Fake) accessToken(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	f.tokens++
	f.appTokens[fmt.Sprintf("ghs_fake%d", f.tokens)] = true
	return http.StatusCreated, map[string]any{"token": fmt.Sprintf("ghs_fake%d", f.tokens),
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
}

// authenticatedUser answers GET /user: the token's account.
func (f *Fake) authenticatedUser(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	u := f.users[strings.ToLower(f.self)]
	if u == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, u
}

// getApp answers GET /app for a request signed as the App (a JWT).
func (f *Fake) getApp(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	return http.StatusOK, &github.App{ID: github.Int64(AppID), Slug: github.String(AppSlug), Name: github.String("opsbot")}
}

// SetInstallations sets the App's installations (default: one, id 1).
func (f *Fake) SetInstallations(ids ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs = ids
}

// listInstallations answers GET /app/installations for a request signed as the App.
func (f *Fake) listInstallations(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
		return http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"}
	}
	out := []*github.Installation{}
	for _, id := range f.installs {
		out = append(out, &github.Installation{ID: github.Int64(id), AppID: github.Int64(AppID)})
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

// TokensIssued is the number of installation tokens the fake issued.
func (f *Fake) TokensIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}
