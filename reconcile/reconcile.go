// Package reconcile recovers what webhooks lost: command comments opsbot
// never saw are processed now, once (by comment id), and pins of PRs that
// were closed while opsbot was not listening are expired (or consumed, if
// merged). It does so by putting the missing events into the inbox, so they
// take the same path as any delivery.
package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"opsbot/commands"
	"opsbot/config"
	"opsbot/state"
)

// Reader is what reconciling reads from GitHub.
type Reader interface {
	CommentsSince(ctx context.Context, repo string, t time.Time, max int) ([]*github.IssueComment, error)
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
}

// Store is the state reconciling reads and writes.
type Store interface {
	CommentKnown(repo string, commentID int64) (bool, error)
	PRsWithActivePin(repo string) ([]int, error)
	ReconciledAt(repo string) (time.Time, error)
	SetReconciledAt(repo string, t time.Time) error
	PRInfo(repo string, pr int) (*state.PRInfo, error)
	Append(ctx context.Context, d *state.Delivery) (state.AppendResult, error)
}

// Queue takes the deliveries reconciling adds.
type Queue interface{ Enqueue(d *state.Delivery) }

// Reconciler reconciles repositories.
type Reconciler struct {
	Cfg     *config.Config
	Store   Store
	Queue   Queue
	Clients func(repo string) (Reader, error)
	Log     *slog.Logger
	Now     func() time.Time
	// SelfID is opsbot's own account: its comments are never commands.
	SelfID int64
	// FirstLookBack is how far back the first reconcile of a repository looks (default 7 days).
	FirstLookBack time.Duration
}

// Report is what a reconcile found.
type Report struct {
	Repo              string    `json:"repo"`
	Since             time.Time `json:"since"`
	CommentsChecked   int       `json:"comments_checked"`
	CommandsRecovered []int64   `json:"commands_recovered"` // comment ids queued for processing
	PinsOfClosedPRs   []int     `json:"pins_of_closed_prs"` // PRs whose pin is being expired or consumed
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Run reconciles one repository.
func (r *Reconciler) Run(ctx context.Context, repo string) (Report, error) {
	rc, ok := r.Cfg.Repo(repo)
	if !ok {
		return Report{}, fmt.Errorf("%s is not served by this opsbot", repo)
	}
	start := r.now()
	rep := Report{Repo: rc.Name, CommandsRecovered: []int64{}, PinsOfClosedPRs: []int{}}
	last, err := r.Store.ReconciledAt(rc.Name)
	if err != nil {
		return rep, err
	}
	look := r.FirstLookBack
	if look == 0 {
		look = 7 * 24 * time.Hour
	}
	rep.Since = start.Add(-look)
	if !last.IsZero() {
		rep.Since = last.Add(-time.Hour) // overlap: a late webhook is deduplicated by comment id
	}
	gh, err := r.Clients(rc.Name)
	if err != nil {
		return rep, err
	}
	comments, err := gh.CommentsSince(ctx, rc.Name, rep.Since, 5000)
	if err != nil {
		return rep, err
	}
	for _, c := range comments {
		rep.CommentsChecked++
		pr, isPR := prNumber(c)
		u := c.GetUser()
		if !isPR || (r.SelfID != 0 && u.GetID() == r.SelfID) {
			continue
		}
		if len(commands.Parse(c.GetBody(), commands.Options{Repo: rc.Name, Host: r.Cfg.WebHost()})) == 0 {
			continue
		}
		known, err := r.Store.CommentKnown(rc.Name, c.GetID())
		if err != nil {
			return rep, err
		}
		if known {
			continue
		}
		title := ""
		if info, _ := r.Store.PRInfo(rc.Name, pr); info != nil {
			title = info.Title
		}
		body := map[string]any{
			"action": "created",
			"issue": map[string]any{"number": pr, "state": "open", "title": title,
				"pull_request": map[string]any{"url": fmt.Sprintf("%srepos/%s/pulls/%d", r.Cfg.GitHub.APIURL, rc.Name, pr)}},
			"comment": map[string]any{"id": c.GetID(), "body": c.GetBody(), "html_url": c.GetHTMLURL(),
				"user": map[string]any{"login": u.GetLogin(), "id": u.GetID(), "type": u.GetType()}},
			"repository": map[string]any{"full_name": rc.Name},
			"sender":     map[string]any{"login": u.GetLogin(), "id": u.GetID(), "type": u.GetType()},
		}
		added, err := r.add(ctx, fmt.Sprintf("reconcile-comment-%d", c.GetID()), "issue_comment", "created", rc.Name, pr, body)
		if err != nil {
			return rep, err
		}
		if added {
			rep.CommandsRecovered = append(rep.CommandsRecovered, c.GetID())
		}
	}
	prs, err := r.Store.PRsWithActivePin(rc.Name)
	if err != nil {
		return rep, err
	}
	for _, n := range prs {
		p, err := gh.PullRequest(ctx, rc.Name, n)
		if err != nil {
			return rep, err
		}
		if p.GetState() != "closed" {
			continue
		}
		body := map[string]any{
			"action": "closed", "number": n,
			"pull_request": map[string]any{"number": n, "state": "closed", "merged": p.GetMerged(),
				"merge_commit_sha": p.GetMergeCommitSHA(), "title": p.GetTitle(),
				"head": map[string]any{"sha": p.GetHead().GetSHA(), "ref": p.GetHead().GetRef()},
				"user": map[string]any{"login": p.GetUser().GetLogin()}},
			"repository": map[string]any{"full_name": rc.Name},
			"sender":     map[string]any{"login": "opsbot-reconcile"},
		}
		added, err := r.add(ctx, fmt.Sprintf("reconcile-closed-%s-%d", strings.ToLower(rc.Name), n), "pull_request", "closed", rc.Name, n, body)
		if err != nil {
			return rep, err
		}
		if added {
			rep.PinsOfClosedPRs = append(rep.PinsOfClosedPRs, n)
		}
	}
	if err := r.Store.SetReconciledAt(rc.Name, start); err != nil {
		return rep, err
	}
	r.Log.Info("reconciled", "repo", rc.Name, "since", rep.Since, "comments", rep.CommentsChecked,
		"recovered", len(rep.CommandsRecovered), "closed", len(rep.PinsOfClosedPRs))
	return rep, nil
}

func (r *Reconciler) add(ctx context.Context, id, event, action, repo string, pr int, body map[string]any) (bool, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	d := &state.Delivery{ID: id, Event: event, Action: action, Repo: repo, PR: pr, ReceivedAt: r.now(), Body: raw}
	res, err := r.Store.Append(ctx, d)
	if err != nil || res == state.Duplicate {
		return false, err
	}
	r.Queue.Enqueue(d)
	return true, nil
}

// prNumber reads the PR a comment belongs to from its page URL (…/pull/N#issuecomment-…).
func prNumber(c *github.IssueComment) (int, bool) {
	u := c.GetHTMLURL()
	i := strings.Index(u, "/pull/")
	if i < 0 {
		return 0, false
	}
	rest := u[i+len("/pull/"):]
	if j := strings.IndexAny(rest, "#/?"); j >= 0 {
		rest = rest[:j]
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d", &n); err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
