package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// Refusal is GitHub refusing a write for what it is (a 403 that is not a
// rate limit, 405, 409 or 422), with its message: trying again changes
// nothing.
type Refusal struct {
	Status  int
	Message string
}

func (r *Refusal) Error() string { return fmt.Sprintf("GitHub answered %d: %s", r.Status, r.Message) }

// refusal turns GitHub's answer to a write into a *Refusal where it is
// one, and wraps it as every call's error otherwise.
func refusal(what string, resp *github.Response, err error) error {
	if err == nil {
		return nil
	}
	var er *github.ErrorResponse
	var rl *RateLimitError
	var prl *github.RateLimitError
	var arl *github.AbuseRateLimitError
	if errors.As(err, &er) && !errors.As(err, &rl) && !errors.As(err, &prl) && !errors.As(err, &arl) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusUnprocessableEntity:
			msg := er.Message
			if msg == "" {
				msg = http.StatusText(er.Response.StatusCode)
			}
			return fmt.Errorf("%s: %w", what, &Refusal{Status: er.Response.StatusCode, Message: msg})
		}
	}
	return wrap(what, resp, err)
}

// UpdateBranch merges the PR's base branch into its head
// (PUT /pulls/{n}/update-branch), provided its head is still expectedHead.
// GitHub answers 202 and makes the merge commit shortly after; a head
// that moved, a branch not behind and a conflict are Refusals (422).
func (c *Client) UpdateBranch(ctx context.Context, repo string, n int, expectedHead string) error {
	if c.dryRun {
		c.log.Info("dry-run: would update the branch", "repo", repo, "pr", n, "expected_head_sha", expectedHead)
		return nil
	}
	req, err := c.gh.NewRequest(http.MethodPut, fmt.Sprintf("repos/%s/pulls/%d/update-branch", repo, n),
		map[string]string{"expected_head_sha": expectedHead})
	if err != nil {
		return err
	}
	resp, err := c.gh.Do(ctx, req, nil)
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil // 202: the update is under way
	}
	return refusal(fmt.Sprintf("updating the branch of PR #%d from %s", n, mdtext.ShortSHA(expectedHead)), resp, err)
}

// MergePR merges the PR with method (squash, merge, rebase) provided its
// head is still sha, and returns the merge commit. GitHub's refusals (405
// not mergeable, 409 the head moved, 422) are Refusals.
func (c *Client) MergePR(ctx context.Context, repo string, n int, sha, method string) (string, error) {
	if c.dryRun {
		c.log.Info("dry-run: would merge", "repo", repo, "pr", n, "sha", sha, "method", method)
		return "", nil
	}
	o, r := split(repo)
	res, resp, err := c.gh.PullRequests.Merge(ctx, o, r, n, "", &github.PullRequestOptions{SHA: sha, MergeMethod: method})
	if err := refusal(fmt.Sprintf("merging PR #%d at %s", n, mdtext.ShortSHA(sha)), resp, err); err != nil {
		return "", err
	}
	if !res.GetMerged() {
		return "", fmt.Errorf("merging PR #%d at %s: %w", n, mdtext.ShortSHA(sha), &Refusal{Status: resp.StatusCode, Message: res.GetMessage()})
	}
	return res.GetSHA(), nil
}

// Check is one check on a commit: a check run or a commit status.
type Check struct {
	Name string
	// Status is queued, in_progress or completed for a check run; a
	// status's state (pending, success, failure, error) otherwise.
	Status     string
	Conclusion string // a completed check run's
	IsStatus   bool
	URL        string
}

// HeadChecks lists the check runs (all pages, at most 10) and the newest
// status of each context on commit sha.
func (c *Client) HeadChecks(ctx context.Context, repo, sha string) ([]Check, error) {
	o, r := split(repo)
	var out []Check
	opt := &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for range 10 {
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, o, r, sha, opt)
		if err := wrap("listing the check runs of "+mdtext.ShortSHA(sha), resp, err); err != nil {
			return nil, err
		}
		for _, cr := range res.CheckRuns {
			out = append(out, Check{Name: cr.GetName(), Status: cr.GetStatus(), Conclusion: cr.GetConclusion(), URL: cr.GetHTMLURL()})
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	st, resp, err := c.gh.Repositories.GetCombinedStatus(ctx, o, r, sha, &github.ListOptions{PerPage: 100})
	if err := wrap("reading the statuses of "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return nil, err
	}
	for _, s := range st.Statuses {
		out = append(out, Check{Name: s.GetContext(), Status: s.GetState(), IsStatus: true, URL: s.GetTargetURL()})
	}
	return out, nil
}
