package ghclient

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// SetStatus sets a commit status. The description is cut to GitHub's 140 characters.
func (c *Client) SetStatus(ctx context.Context, repo, sha, state, description, targetURL, statusContext string) error {
	description = cutDescription(description)
	if c.dryRun {
		c.log.Info("dry-run: would set status", "repo", repo, "sha", sha, "state", state, "description", description)
		return nil
	}
	o, r := split(repo)
	st := &github.RepoStatus{State: github.String(state), Description: github.String(description), Context: github.String(statusContext)}
	if targetURL != "" {
		st.TargetURL = github.String(targetURL)
	}
	_, resp, err := c.gh.Repositories.CreateStatus(ctx, o, r, sha, st)
	return wrap("setting the status of "+mdtext.ShortSHA(sha), resp, err)
}

// cutDescription cuts a status description to GitHub's 140 characters,
// on a rune boundary (a cut inside a rune would reach GitHub as U+FFFD, and a
// retry's comparison with what it set would never match).
func cutDescription(d string) string {
	if len(d) <= 140 {
		return d
	}
	cut := 137
	for cut > 0 && !utf8.RuneStart(d[cut]) {
		cut--
	}
	return d[:cut] + "..."
}

// HasStatus reports whether the newest status of context on sha already
// says state and description (a retry after a crash finds the one it set).
func (c *Client) HasStatus(ctx context.Context, repo, sha, statusContext, state, description string) (bool, error) {
	if c.dryRun {
		return false, nil
	}
	description = cutDescription(description)
	o, r := split(repo)
	sts, resp, err := c.gh.Repositories.ListStatuses(ctx, o, r, sha, &github.ListOptions{PerPage: 100})
	if err := wrap("listing the statuses of "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return false, err
	}
	for _, st := range sts {
		if st.GetContext() == statusContext {
			return st.GetState() == state && st.GetDescription() == description, nil
		}
	}
	return false, nil
}

// CheckAction is a button on a check run.
type CheckAction struct {
	Label, Description, Identifier string
}

// CreateCheckRun creates a completed check run on sha (a GitHub App's):
// its name, conclusion, title and summary (Markdown), the reference
// externalID and its buttons (at most three).
func (c *Client) CreateCheckRun(ctx context.Context, repo, sha, name, conclusion, title, summary, externalID string, actions []CheckAction) error {
	if c.dryRun {
		c.log.Info("dry-run: would create a check run", "repo", repo, "sha", sha, "name", name, "conclusion", conclusion, "title", title)
		return nil
	}
	o, r := split(repo)
	opt := github.CreateCheckRunOptions{Name: name, HeadSHA: sha, Status: github.String("completed"), Conclusion: github.String(conclusion),
		CompletedAt: &github.Timestamp{Time: time.Now()},
		Output:      &github.CheckRunOutput{Title: github.String(cutText(title, 1000)), Summary: github.String(cutText(summary, 60000))}}
	if externalID != "" {
		opt.ExternalID = github.String(externalID)
	}
	for i, a := range actions {
		if i == 3 {
			break // GitHub takes at most three
		}
		opt.Actions = append(opt.Actions, &github.CheckRunAction{Label: cutText(a.Label, 20), Description: cutText(a.Description, 40),
			Identifier: cutText(a.Identifier, 20)})
	}
	_, resp, err := c.gh.Checks.CreateCheckRun(ctx, o, r, opt)
	return wrap("creating the check run "+name+" on "+mdtext.ShortSHA(sha), resp, err)
}

// cutText keeps s within n characters.
func cutText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
