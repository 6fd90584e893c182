package ghclient

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// PullRequest reads a PR.
func (c *Client) PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error) {
	o, r := split(repo)
	pr, resp, err := c.gh.PullRequests.Get(AfterWebhook(ctx), o, r, n)
	return pr, wrap(fmt.Sprintf("reading PR #%d", n), resp, err)
}

// PRCommits lists the SHAs of a PR's commits, all pages (GitHub lists at most 250).
func (c *Client) PRCommits(ctx context.Context, repo string, n int) ([]string, error) {
	o, r := split(repo)
	var out []string
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("listing the commits of PR #%d", n), opt, 10,
		func() ([]*github.RepositoryCommit, *github.Response, error) {
			return c.gh.PullRequests.ListCommits(ctx, o, r, n, opt)
		},
		func(page []*github.RepositoryCommit) bool {
			for _, cm := range page {
				out = append(out, cm.GetSHA())
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Comparison is what the compare API says of base...head.
type Comparison struct {
	Status  string // identical, ahead, behind, diverged
	AheadBy int
	// MergeBase is the commit base and head last shared.
	MergeBase string
	Files     []string
	// FilesComplete is false when GitHub truncated the file list (300 files).
	FilesComplete bool
}

// Compare compares two commits.
func (c *Client) Compare(ctx context.Context, repo, base, head string) (Comparison, error) {
	o, r := split(repo)
	cmp, resp, err := c.gh.Repositories.CompareCommits(ctx, o, r, base, head, &github.ListOptions{PerPage: 100})
	if err := wrap(fmt.Sprintf("comparing %s...%s", mdtext.ShortSHA(base), mdtext.ShortSHA(head)), resp, err); err != nil {
		return Comparison{}, err
	}
	out := Comparison{Status: cmp.GetStatus(), AheadBy: cmp.GetAheadBy(), MergeBase: cmp.GetMergeBaseCommit().GetSHA(), FilesComplete: len(cmp.Files) < 300}
	for _, f := range cmp.Files {
		out.Files = append(out.Files, f.GetFilename())
		if f.GetPreviousFilename() != "" {
			out.Files = append(out.Files, f.GetPreviousFilename())
		}
	}
	return out, nil
}

// DefaultBranch reads a repository's default branch.
func (c *Client) DefaultBranch(ctx context.Context, repo string) (string, error) {
	o, r := split(repo)
	rp, resp, err := c.gh.Repositories.Get(ctx, o, r)
	if err := wrap("reading repository "+repo, resp, err); err != nil {
		return "", err
	}
	return rp.GetDefaultBranch(), nil
}

// PullsWithHead lists the repository's PRs, open and closed, whose head is
// label (OWNER:BRANCH), at most 5 pages of 100; more is an error (the caller
// cannot tell them all, and must fail closed).
func (c *Client) PullsWithHead(ctx context.Context, repo, label string) ([]*github.PullRequest, error) {
	o, r := split(repo)
	var out []*github.PullRequest
	opt := &github.PullRequestListOptions{State: "all", Head: label, ListOptions: github.ListOptions{PerPage: 100}}
	more := false
	err := paginate("listing the PRs of "+label, &opt.ListOptions, 5,
		func() ([]*github.PullRequest, *github.Response, error) {
			list, resp, err := c.gh.PullRequests.List(ctx, o, r, opt)
			if err == nil {
				more = resp.NextPage != 0
			}
			return list, resp, err
		},
		func(page []*github.PullRequest) bool { out = append(out, page...); return true })
	if err != nil {
		return nil, err
	}
	if more {
		return nil, fmt.Errorf("listing the PRs of %s: more than 500", label)
	}
	return out, nil
}

// PullRequestsForCommit lists the PRs a commit belongs to (or was merged by).
func (c *Client) PullRequestsForCommit(ctx context.Context, repo, sha string) ([]*github.PullRequest, error) {
	o, r := split(repo)
	prs, resp, err := c.gh.PullRequests.ListPullRequestsWithCommit(AfterWebhook(ctx), o, r, sha, nil)
	return prs, wrap("listing the PRs of "+mdtext.ShortSHA(sha), resp, err)
}

// ClosedPullsSince lists the repository's closed PRs updated at or after
// t, the most recently updated first, max at most: the closes a reconcile
// looks for among those opsbot still holds open.
func (c *Client) ClosedPullsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.PullRequest, error) {
	o, r := split(repo)
	var out []*github.PullRequest
	if max <= 0 {
		return nil, nil
	}
	opt := &github.PullRequestListOptions{State: "closed", Sort: "updated", Direction: "desc", ListOptions: github.ListOptions{PerPage: 100}}
	err := paginate("listing the PRs closed since "+t.UTC().Format(time.RFC3339), &opt.ListOptions, (max+99)/100,
		func() ([]*github.PullRequest, *github.Response, error) {
			return c.gh.PullRequests.List(ctx, o, r, opt)
		},
		func(page []*github.PullRequest) bool {
			for _, p := range page {
				if p.GetUpdatedAt().Before(t) || len(out) == max {
					return false
				}
				out = append(out, p)
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}
