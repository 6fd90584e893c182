package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// LabelEvent is a label added to or removed from a PR.
type LabelEvent struct {
	Label string
	Added bool
	At    time.Time
}

// LabelEvents reads a PR's label timeline, all pages.
func (c *Client) LabelEvents(ctx context.Context, repo string, n int) ([]LabelEvent, error) {
	o, r := split(repo)
	var out []LabelEvent
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("reading the timeline of PR #%d", n), opt, 20,
		func() ([]*github.Timeline, *github.Response, error) {
			return c.gh.Issues.ListIssueTimeline(ctx, o, r, n, opt)
		},
		func(page []*github.Timeline) bool {
			for _, e := range page {
				if (e.GetEvent() == "labeled" || e.GetEvent() == "unlabeled") && e.Label != nil {
					out = append(out, LabelEvent{Label: e.Label.GetName(), Added: e.GetEvent() == "labeled", At: e.GetCreatedAt().Time})
				}
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TimelineEvent is one event of a PR's timeline: its kind (closed,
// reopened, merged, base_ref_changed, head_ref_force_pushed, labeled, …)
// and when GitHub recorded it. Events GitHub dates by their commits
// (committed) have no time of GitHub's and are left out.
type TimelineEvent struct {
	Event string
	At    time.Time
}

// MaxTimelinePages is how many pages of a PR's timeline Timeline reads.
const MaxTimelinePages = 20

// Timeline reads a PR's timeline events, oldest first, every page up to
// MaxTimelinePages; a longer timeline is an error (what happened in it
// cannot be told, so whoever asked must fail closed).
func (c *Client) Timeline(ctx context.Context, repo string, n int) ([]TimelineEvent, error) {
	o, r := split(repo)
	var out []TimelineEvent
	opt := &github.ListOptions{PerPage: 100}
	for range MaxTimelinePages {
		evs, resp, err := c.gh.Issues.ListIssueTimeline(ctx, o, r, n, opt)
		if err := wrap(fmt.Sprintf("reading the timeline of PR #%d", n), resp, err); err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.CreatedAt == nil {
				continue
			}
			out = append(out, TimelineEvent{Event: e.GetEvent(), At: e.GetCreatedAt().Time})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
	return nil, fmt.Errorf("reading the timeline of PR #%d: more than %d pages", n, MaxTimelinePages)
}

// ReactedBy reports whether an account left one of opsbot's reactions
// (👍, 👎, 😕) on a PR comment. It reads every page of each of those kinds
// (others cannot hide it behind reactions of their own), up to 10 pages a
// kind; a comment with more than that of one kind counts as reacted to, so
// that a flood of reactions can never make an answered command look new.
func (c *Client) ReactedBy(ctx context.Context, repo string, commentID, userID int64) (bool, error) {
	o, r := split(repo)
	for _, content := range []string{"+1", "-1", "confused"} {
		found, full := false, true
		opt := &github.ListOptions{PerPage: 100}
		err := paginate(fmt.Sprintf("reading the reactions to comment %d", commentID), opt, 10,
			func() ([]*github.Reaction, *github.Response, error) {
				u := fmt.Sprintf("repos/%s/%s/issues/comments/%d/reactions?content=%s&per_page=%d&page=%d",
					url.PathEscape(o), url.PathEscape(r), commentID, url.QueryEscape(content), opt.PerPage, opt.Page)
				req, err := c.gh.NewRequest(http.MethodGet, u, nil)
				if err != nil {
					return nil, nil, err
				}
				var rs []*github.Reaction
				resp, err := c.gh.Do(ctx, req, &rs)
				if err == nil && resp.NextPage == 0 {
					full = false
				}
				return rs, resp, err
			},
			func(rs []*github.Reaction) bool {
				for _, x := range rs {
					if x.GetUser().GetID() == userID {
						found = true
						return false
					}
				}
				return true
			})
		if err != nil {
			return false, err
		}
		if found || full {
			return true, nil
		}
	}
	return false, nil
}

// CommentRef names a comment opsbot posted.
type CommentRef struct {
	ID  int64
	URL string
}

// CreateComment posts a PR comment.
func (c *Client) CreateComment(ctx context.Context, repo string, pr int, body string) (CommentRef, error) {
	if c.dryRun {
		c.log.Info("dry-run: would comment", "repo", repo, "pr", pr, "body", body)
		return CommentRef{}, nil
	}
	o, r := split(repo)
	cm, resp, err := c.gh.Issues.CreateComment(ctx, o, r, pr, &github.IssueComment{Body: github.String(body)})
	if err := wrap(fmt.Sprintf("commenting on PR #%d", pr), resp, err); err != nil {
		return CommentRef{}, err
	}
	return CommentRef{ID: cm.GetID(), URL: cm.GetHTMLURL()}, nil
}

// EditComment replaces a comment's body.
func (c *Client) EditComment(ctx context.Context, repo string, id int64, body string) error {
	if c.dryRun {
		c.log.Info("dry-run: would edit comment", "repo", repo, "comment", id, "body", body)
		return nil
	}
	o, r := split(repo)
	_, resp, err := c.gh.Issues.EditComment(ctx, o, r, id, &github.IssueComment{Body: github.String(body)})
	return wrap(fmt.Sprintf("editing comment %d", id), resp, err)
}

// FindComment looks for a comment of opsbot's on a PR whose body holds
// marker, newest first: GitHub lists a PR's comments oldest first, with no
// direction to ask for, so the pages are read from the last one the Link
// header names back to the first, at most 50 of them (the comment a retry
// looks for is recent). found is false when there is none. Only
// comments opsbot wrote count (Identity.Authored): a marker anyone else
// planted is ignored. Before opsbot knows its account it finds nothing.
func (c *Client) FindComment(ctx context.Context, repo string, pr int, marker string) (CommentRef, bool, error) {
	if c.dryRun {
		return CommentRef{}, false, nil
	}
	var self Identity
	if c.self != nil {
		if p := c.self.Load(); p != nil {
			self = *p
		}
	}
	if self.ID == 0 {
		return CommentRef{}, false, errors.New("ghclient: opsbot's own account is not known, so its earlier comment cannot be told from others'")
	}
	o, r := split(repo)
	get := func(page int) ([]listedComment, *github.Response, error) {
		req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/issues/%d/comments?per_page=100&page=%d",
			url.PathEscape(o), url.PathEscape(r), pr, page), nil)
		if err != nil {
			return nil, nil, err
		}
		var cs []listedComment
		resp, err := c.gh.Do(ctx, req, &cs)
		return cs, resp, wrap(fmt.Sprintf("listing the comments of PR #%d", pr), resp, err)
	}
	find := func(cs []listedComment) (CommentRef, bool) {
		for i := len(cs) - 1; i >= 0; i-- {
			if cm := cs[i]; self.Wrote(cm.User.ID, cm.viaApp()) && strings.Contains(cm.Body, marker) {
				return CommentRef{ID: cm.ID, URL: cm.HTMLURL}, true
			}
		}
		return CommentRef{}, false
	}
	first, resp, err := get(1)
	if err != nil {
		return CommentRef{}, false, err
	}
	const most = 50
	if resp.LastPage > 1 {
		for page := resp.LastPage; page > 1 && page > resp.LastPage-most+1; page-- {
			cs, _, err := get(page)
			if err != nil {
				return CommentRef{}, false, err
			}
			if ref, ok := find(cs); ok {
				return ref, true, nil
			}
		}
		ref, ok := find(first)
		return ref, ok, nil
	}
	// No last page named: read forward.
	for page, cs := 1, first; ; {
		if ref, ok := find(cs); ok {
			return ref, true, nil
		}
		if resp.NextPage == 0 || page >= most {
			return CommentRef{}, false, nil
		}
		page = resp.NextPage
		if cs, resp, err = get(page); err != nil {
			return CommentRef{}, false, err
		}
	}
}

// React adds a reaction (+1, -1, eyes, …) to a PR comment. Adding one that
// is there already is not an error.
func (c *Client) React(ctx context.Context, repo string, commentID int64, content string) error {
	if c.dryRun {
		c.log.Info("dry-run: would react", "repo", repo, "comment", commentID, "content", content)
		return nil
	}
	o, r := split(repo)
	_, resp, err := c.gh.Reactions.CreateIssueCommentReaction(ctx, o, r, commentID, content)
	return wrap(fmt.Sprintf("reacting to comment %d", commentID), resp, err)
}

// CommentBody reads a comment's body as GitHub has it now; ErrNotFound
// when the comment was deleted.
func (c *Client) CommentBody(ctx context.Context, repo string, id int64) (string, error) {
	o, r := split(repo)
	ic, resp, err := c.gh.Issues.GetComment(ctx, o, r, id)
	if err := wrap(fmt.Sprintf("reading comment %d", id), resp, err); err != nil {
		return "", err
	}
	return ic.GetBody(), nil
}

// CommentsSince lists the repository's issue and PR comments updated since t, oldest first, at most max.
func (c *Client) CommentsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.IssueComment, error) {
	o, r := split(repo)
	var out []*github.IssueComment
	opt := &github.IssueListCommentsOptions{Since: &t, Sort: github.String("created"), Direction: github.String("asc"),
		ListOptions: github.ListOptions{PerPage: 100}}
	if max <= 0 {
		return nil, nil
	}
	err := paginate("listing comments since "+t.UTC().Format(time.RFC3339), &opt.ListOptions, max,
		func() ([]*github.IssueComment, *github.Response, error) {
			return c.gh.Issues.ListComments(ctx, o, r, 0, opt)
		},
		func(page []*github.IssueComment) bool { out = append(out, page...); return len(out) < max })
	if err != nil {
		return nil, err
	}
	return out, nil
}
