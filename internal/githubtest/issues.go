package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// issueComment is an issue comment as GitHub answers it, with the App that
// performed it (go-github's IssueComment has no such field).
type issueComment struct {
	*github.IssueComment
	PerformedViaGithubApp *github.App `json:"performed_via_github_app"`
}

func (f *Fake) commentJSON(c *Comment) issueComment {
	user := &github.User{Login: github.String(c.Login), ID: github.Int64(c.UserID), Type: github.String("User")}
	if u := f.users[strings.ToLower(c.Login)]; u != nil {
		user.Type = u.Type
	}
	out := issueComment{IssueComment: &github.IssueComment{ID: github.Int64(c.ID), Body: github.String(c.Body), User: user,
		HTMLURL:   github.String(fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", c.Repo, c.PR, c.ID)),
		CreatedAt: &github.Timestamp{Time: c.CreatedAt}, UpdatedAt: &github.Timestamp{Time: c.UpdatedAt}}}
	if c.ViaApp != 0 {
		out.PerformedViaGithubApp = &github.App{ID: github.Int64(c.ViaApp), Slug: github.String(AppSlug)}
	}
	return out
}

func (f *Fake) listComments(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	full := repo.Owner + "/" + repo.Name
	var cs []*Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, full) && c.PR == n {
			cs = append(cs, c)
		}
	}
	page := paginate(w, r, len(cs))
	out := []issueComment{}
	for _, c := range cs[page.from:page.to] {
		out = append(out, f.commentJSON(c))
	}
	return http.StatusOK, out
}

func (f *Fake) createComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	var in github.IssueComment
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.GetBody() == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	c := f.addComment(repo.Owner+"/"+repo.Name, n, f.self, in.GetBody())
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token "); ok && f.appTokens[tok] {
		c.ViaApp = AppID
	} else if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && f.appTokens[tok] {
		c.ViaApp = AppID
	}
	return http.StatusCreated, f.commentJSON(c)
}

func (f *Fake) findComment(repo *Repo, id int64) *Comment {
	for _, c := range f.comments {
		if c.ID == id && strings.EqualFold(c.Repo, repo.Owner+"/"+repo.Name) {
			return c
		}
	}
	return nil
}

func (f *Fake) getComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c := f.findComment(repo, id)
	if c == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.commentJSON(c)
}

func (f *Fake) editComment(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c := f.findComment(repo, id)
	if c == nil {
		return http.StatusNotFound, notFound()
	}
	var in github.IssueComment
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.GetBody() == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	c.Body, c.UpdatedAt = in.GetBody(), f.now()
	c.Edits++
	return http.StatusOK, f.commentJSON(c)
}

func (f *Fake) react(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if f.findComment(repo, id) == nil {
		return http.StatusNotFound, notFound()
	}
	var in struct {
		Content string `json:"content"`
	}
	json.NewDecoder(r.Body).Decode(&in)
	valid := map[string]bool{"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true}
	if !valid[in.Content] {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	for _, x := range f.reactions {
		if x.CommentID == id && x.Content == in.Content {
			return http.StatusOK, &github.Reaction{Content: github.String(in.Content)}
		}
	}
	f.reactions = append(f.reactions, Reaction{Repo: repo.Owner + "/" + repo.Name, CommentID: id, Content: in.Content, Login: f.self})
	return http.StatusCreated, &github.Reaction{ID: github.Int64(int64(len(f.reactions))), Content: github.String(in.Content)}
}

// listReactions answers a comment's reactions, each with the user who added it.
func (f *Fake) listReactions(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if f.findComment(repo, id) == nil {
		return http.StatusNotFound, notFound()
	}
	out := []*github.Reaction{}
	content := r.URL.Query().Get("content") // GitHub's filter by kind
	for i, x := range f.reactions {
		if x.CommentID == id && strings.EqualFold(x.Repo, repo.Owner+"/"+repo.Name) && (content == "" || x.Content == content) {
			u := f.users[strings.ToLower(x.Login)]
			if u == nil {
				u = &github.User{Login: github.String(x.Login)}
			}
			out = append(out, &github.Reaction{ID: github.Int64(int64(i + 1)), Content: github.String(x.Content), User: u})
		}
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

// timeline answers labeled events for the PR's current labels, dated at the
// PR's creation, then its closes and reopens.
func (f *Fake) timeline(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	out := []map[string]any{}
	// The labels it was created with: today's, less those added since, plus
	// those removed since (walking the history back).
	initial := append([]string(nil), p.Labels...)
	for i := len(p.LabelHistory) - 1; i >= 0; i-- {
		c := p.LabelHistory[i]
		if c.Added {
			initial = slices.DeleteFunc(initial, func(l string) bool { return l == c.Label })
		} else {
			initial = append(initial, c.Label)
		}
	}
	for _, l := range initial {
		out = append(out, map[string]any{"event": "labeled", "label": map[string]string{"name": l},
			"created_at": time.Unix(0, 0).UTC().Format(time.RFC3339)})
	}
	for _, c := range p.LabelHistory {
		ev := "unlabeled"
		if c.Added {
			ev = "labeled"
		}
		out = append(out, map[string]any{"event": ev, "label": map[string]string{"name": c.Label},
			"created_at": c.At.UTC().Format(time.RFC3339)})
	}
	for _, e := range p.States {
		out = append(out, map[string]any{"event": e.Event, "created_at": e.At.UTC().Format(time.RFC3339)})
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, out[page.from:page.to]
}

func (f *Fake) repoComments(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		since, _ = time.Parse(time.RFC3339, v)
	}
	var cs []*Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, full) && !c.UpdatedAt.Before(since) {
			cs = append(cs, c)
		}
	}
	page := paginate(w, r, len(cs))
	out := []issueComment{}
	for _, c := range cs[page.from:page.to] {
		ic := f.commentJSON(c)
		ic.IssueURL = github.String(fmt.Sprintf("https://api.github.com/repos/%s/issues/%d", full, c.PR))
		out = append(out, ic)
	}
	return http.StatusOK, out
}

// EditComment replaces a comment's body as a person would on GitHub's page
// (its updated_at moves to now; created_at stays).
func (f *Fake) EditComment(id int64, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		if c.ID == id {
			c.Body, c.UpdatedAt = body, f.now()
			c.Edits++
		}
	}
}

// DeleteComment deletes a comment as a person would on GitHub's page: it
// is gone from every list and read (404).
func (f *Fake) DeleteComment(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.comments = slices.DeleteFunc(f.comments, func(c *Comment) bool { return c.ID == id })
}

// SetCommentTime backdates a comment (a webhook opsbot never got).
func (f *Fake) SetCommentTime(id int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		if c.ID == id {
			c.CreatedAt, c.UpdatedAt = at, at
		}
	}
}
