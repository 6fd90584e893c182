package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// Refusal is GitHub refusing a write for what it is (a 403 that is not a
// rate limit, 405, 409 or 422), with its message: trying again changes
// nothing.
type Refusal struct {
	Status  int
	Message string
	// GraphQL is a refusal GitHub's GraphQL API answered (HTTP 200 with
	// a typed error): GitHub's, with no status of its own. A Refusal with
	// neither is opsbot's own (a dry run).
	GraphQL bool
}

// NotTaken says that the act it answers was not taken: a refusal is
// GitHub's (or opsbot's own) clear no, whatever happened to the process
// that asked (seq.Wakeup.Send).
func (r *Refusal) NotTaken() bool { return true }

// Dry is opsbot's own refusal (a dry run), not GitHub's.
func (r *Refusal) Dry() bool { return r.Status == 0 && !r.GraphQL }

func (r *Refusal) Error() string {
	if r.GraphQL {
		return "GitHub refused: " + r.Message
	}
	if r.Status == 0 {
		return r.Message
	}
	return fmt.Sprintf("GitHub answered %d: %s", r.Status, r.Message)
}

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
		return &Refusal{Message: "opsbot runs with --dry-run and writes nothing to GitHub"}
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
		return "", &Refusal{Message: "opsbot runs with --dry-run and writes nothing to GitHub"}
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

// Check is one check on a commit: a check run, a GitHub Actions check
// suite (a workflow run, which exists before its jobs' check runs do), or
// a commit status.
type Check struct {
	Name string
	// Status is queued, in_progress or completed for a check run or a
	// suite (requested, waiting and pending too); a status's state
	// (pending, success, failure, error) otherwise.
	Status     string
	Conclusion string // a completed check run's or suite's
	AppID      int64  // the app that made a check run
	IsStatus   bool
	IsSuite    bool
	URL        string
}

// ErrTooManyChecks is a commit with more checks than opsbot reads (1,000
// check runs, 100 suites, 1,000 statuses): it cannot tell that they all
// passed.
var ErrTooManyChecks = errors.New("more checks on the commit than opsbot reads")

// HeadChecks lists the check runs (at most 10 pages of 100), the GitHub
// Actions check suites and the newest status of each context (at most 10
// pages) on commit sha. A commit with more than that is ErrTooManyChecks.
func (c *Client) HeadChecks(ctx context.Context, repo, sha string) ([]Check, error) {
	o, r := split(repo)
	var out []Check
	runs := 0
	opt := &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; ; page++ {
		if page == 10 {
			return nil, fmt.Errorf("listing the check runs of %s: %w", mdtext.ShortSHA(sha), ErrTooManyChecks)
		}
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, o, r, sha, opt)
		if err := wrap("listing the check runs of "+mdtext.ShortSHA(sha), resp, err); err != nil {
			return nil, err
		}
		for _, cr := range res.CheckRuns {
			out = append(out, Check{Name: cr.GetName(), Status: cr.GetStatus(), Conclusion: cr.GetConclusion(), URL: cr.GetHTMLURL(),
				AppID: cr.GetApp().GetID()})
		}
		runs += len(res.CheckRuns)
		if resp.NextPage == 0 {
			if res.GetTotal() > runs {
				return nil, fmt.Errorf("listing the check runs of %s: %d listed of %d: %w", mdtext.ShortSHA(sha), runs, res.GetTotal(), ErrTooManyChecks)
			}
			break
		}
		opt.Page = resp.NextPage
	}
	suites, resp, err := c.gh.Checks.ListCheckSuitesForRef(ctx, o, r, sha, &github.ListCheckSuiteOptions{AppID: nil,
		ListOptions: github.ListOptions{PerPage: 100}})
	if err := wrap("listing the check suites of "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return nil, err
	}
	if suites.GetTotal() > len(suites.CheckSuites) {
		return nil, fmt.Errorf("listing the check suites of %s: %w", mdtext.ShortSHA(sha), ErrTooManyChecks)
	}
	for _, cs := range suites.CheckSuites {
		// Another app's suite may stay queued for ever when the app makes
		// no check runs; GitHub Actions makes one per workflow run, before
		// its jobs exist, and ends it.
		if cs.GetApp().GetSlug() != "github-actions" {
			continue
		}
		out = append(out, Check{Name: "a workflow run (check suite " + fmt.Sprint(cs.GetID()) + ")", Status: cs.GetStatus(),
			Conclusion: cs.GetConclusion(), IsSuite: true})
	}
	sopt := &github.ListOptions{PerPage: 100}
	for page := 0; ; page++ {
		if page == 10 {
			return nil, fmt.Errorf("reading the statuses of %s: %w", mdtext.ShortSHA(sha), ErrTooManyChecks)
		}
		st, resp, err := c.gh.Repositories.GetCombinedStatus(ctx, o, r, sha, sopt)
		if err := wrap("reading the statuses of "+mdtext.ShortSHA(sha), resp, err); err != nil {
			return nil, err
		}
		for _, s := range st.Statuses {
			out = append(out, Check{Name: s.GetContext(), Status: s.GetState(), IsStatus: true, URL: s.GetTargetURL()})
		}
		if resp.NextPage == 0 {
			break
		}
		sopt.Page = resp.NextPage
	}
	return out, nil
}

// Commit is what opsbot reads of a commit: its parents in order, its
// tree, and whether GitHub signed it and names itself its committer (an
// update-branch merge; but also any commit made through the Git database
// API with an App's token: who signed it says nothing of its content).
type Commit struct {
	Parents  []string
	Tree     string
	ByGitHub bool
	// Verified is GitHub's word that the commit's signature is good
	// (whoever signed it).
	Verified bool
	Message  string
}

// GitHubCommitter is the committer email of the commits GitHub makes
// itself (web-flow: a merge by update-branch, an edit in the web editor).
const GitHubCommitter = "noreply@github.com"

// CommitInfo reads commit sha's parents and who made it.
func (c *Client) CommitInfo(ctx context.Context, repo, sha string) (Commit, error) {
	o, r := split(repo)
	cm, resp, err := c.gh.Git.GetCommit(ctx, o, r, sha)
	if err := wrap("reading commit "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return Commit{}, err
	}
	var out Commit
	for _, p := range cm.Parents {
		out.Parents = append(out.Parents, p.GetSHA())
	}
	out.Tree = strings.ToLower(cm.GetTree().GetSHA())
	out.Verified = cm.GetVerification().GetVerified()
	out.Message = cm.GetMessage()
	out.ByGitHub = out.Verified && strings.EqualFold(cm.GetCommitter().GetEmail(), GitHubCommitter)
	return out, nil
}

// BranchHead is the commit a branch points to.
func (c *Client) BranchHead(ctx context.Context, repo, branch string) (string, error) {
	o, r := split(repo)
	b, resp, err := c.gh.Repositories.GetBranch(ctx, o, r, branch, 1)
	if err := wrap("reading the branch "+branch, resp, err); err != nil {
		return "", err
	}
	return b.GetCommit().GetSHA(), nil
}
