package gate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"opsbot/state"
)

// ErrBadAsk is an ask that lacks what a decision needs.
var ErrBadAsk = errors.New("gate: bad request")

// Request is what the workflow asks (POST /api/v1/gate, `opsbot gate`).
type Request struct {
	Repo   string `json:"repo"`
	PR     int    `json:"pr"`
	SHA    string `json:"sha"`
	Event  string `json:"event"`  // pull_request (default) or push
	Action string `json:"action"` // the pull_request action; default synchronize
}

// Answer is the decision as the workflow reads it.
type Answer struct {
	Repo         string    `json:"repo"`
	PR           int       `json:"pr,omitempty"`
	SHA          string    `json:"sha"`
	Event        string    `json:"event"`
	Decision     string    `json:"decision,omitempty"` // skip or sweep (pull_request)
	SkipPRSweep  bool      `json:"skip_pr_sweep"`
	ReuseEnabled bool      `json:"reuse_enabled"`
	Reason       string    `json:"reason"`
	RunID        int64     `json:"run_id,omitempty"`
	RunAttempt   int       `json:"run_attempt,omitempty"`
	RunURL       string    `json:"run_url,omitempty"`
	RunHeadSHA   string    `json:"run_head_sha,omitempty"`
	SourcePR     int       `json:"source_pr,omitempty"`
	PinID        uint64    `json:"pin_id,omitempty"`
	AuthorizedBy string    `json:"authorized_by,omitempty"`
	DecidedAt    time.Time `json:"decided_at,omitzero"`
}

// PRFinder finds the PRs of a commit (for a push to the default branch).
type PRFinder interface {
	PullRequestsForCommit(ctx context.Context, repo, sha string) ([]*github.PullRequest, error)
}

// API answers the workflow's asks.
type API struct {
	Gate *Gate
	// Quiet waits (bounded) until the PR's deliveries received so far are
	// processed, so an ask does not overtake a push or a comment already in
	// the inbox.
	Quiet func(ctx context.Context, repo string, pr int) error
	// Finder gives a PR finder for a repository (its installation's client).
	Finder func(repo string) (PRFinder, error)
}

var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// Answer decides (or reads) for a pull_request ask, or resolves a push.
func (a *API) Answer(ctx context.Context, r Request) (Answer, error) {
	if r.Event == "" {
		r.Event = "pull_request"
	}
	if r.Repo == "" || !shaRE.MatchString(r.SHA) {
		return Answer{}, fmt.Errorf("%w: repo and a commit sha are required", ErrBadAsk)
	}
	rc, ok := a.Gate.Cfg.Repo(r.Repo)
	if !ok {
		return Answer{}, fmt.Errorf("%w: %s", ErrUnknownRepo, r.Repo)
	}
	r.Repo = rc.Name
	switch r.Event {
	case "pull_request", "pull_request_target":
	case "push":
		return a.push(ctx, r)
	default:
		return Answer{}, fmt.Errorf("%w: event %q (use pull_request or push)", ErrBadAsk, r.Event)
	}
	if r.PR <= 0 {
		return Answer{}, fmt.Errorf("%w: a pull_request ask needs the PR number", ErrBadAsk)
	}
	if r.Action == "" {
		r.Action = "synchronize"
	}
	// A head already decided is answered from the store at once.
	if d, err := a.Gate.Store.Decision(r.Repo, r.PR, r.SHA); err != nil || d != nil {
		if err != nil {
			return Answer{}, err
		}
		return FromDecision(r, d), nil
	}
	if a.Quiet != nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = a.Quiet(qctx, r.Repo, r.PR) // after the wait, decide anyway
		cancel()
	}
	inst := int64(0)
	if info, err := a.Gate.Store.PRInfo(r.Repo, r.PR); err == nil && info != nil {
		inst = info.Installation
	}
	d, err := a.Gate.Decide(ctx, Ask{Repo: r.Repo, PR: r.PR, SHA: r.SHA, Action: r.Action, Source: "api", Installation: inst})
	if err != nil {
		return Answer{}, err
	}
	return FromDecision(r, d), nil
}

// FromDecision shapes a decision for the workflow.
func FromDecision(r Request, d *state.Decision) Answer {
	ans := Answer{Repo: d.Repo, PR: d.PR, SHA: d.HeadSHA, Event: r.Event, Decision: d.Decision, Reason: d.Reason,
		DecidedAt: d.DecidedAt}
	if d.Decision == Skip {
		ans.SkipPRSweep, ans.ReuseEnabled = true, true
		ans.RunID, ans.RunAttempt, ans.RunURL, ans.RunHeadSHA = d.RunID, d.RunAttempt, d.RunURL, d.RunSHA
		ans.SourcePR, ans.PinID, ans.AuthorizedBy = d.PR, d.PinID, d.ActorLogin
	}
	return ans
}

// push resolves a push to the default branch: the PR it merged, and the run
// that stood in for that PR's final head (or its merge commit).
func (a *API) push(ctx context.Context, r Request) (Answer, error) {
	ans := Answer{Repo: r.Repo, SHA: r.SHA, Event: "push"}
	if a.Finder == nil {
		return ans, errors.New("gate: no GitHub client to resolve a push")
	}
	f, err := a.Finder(r.Repo)
	if err != nil {
		return ans, err
	}
	prs, err := f.PullRequestsForCommit(ctx, r.Repo, r.SHA)
	if err != nil {
		return ans, fmt.Errorf("finding the PR merged by %s: %w", r.SHA, err)
	}
	var merged *github.PullRequest
	for _, p := range prs {
		if p.GetMergeCommitSHA() == r.SHA || (merged == nil && p.GetMerged()) {
			merged = p
		}
	}
	if merged == nil {
		ans.Reason = fmt.Sprintf("commit %s merged no pull request", shortSHA(r.SHA))
		return ans, nil
	}
	ans.PR = merged.GetNumber()
	for _, sha := range []string{r.SHA, merged.GetHead().GetSHA()} {
		d, err := a.Gate.Store.Decision(r.Repo, ans.PR, sha)
		if err != nil {
			return ans, err
		}
		if d == nil {
			continue
		}
		if d.Decision == Skip {
			out := FromDecision(r, d)
			out.SHA, out.Decision, out.SkipPRSweep = r.SHA, "", false
			out.Reason = fmt.Sprintf("PR #%d's final head %s reused run %d, authorized by @%s", ans.PR, shortSHA(d.HeadSHA), d.RunID, d.ActorLogin)
			return out, nil
		}
		ans.Reason = fmt.Sprintf("PR #%d's final head %s ran its own sweep (%s)", ans.PR, shortSHA(d.HeadSHA), d.Reason)
		return ans, nil
	}
	ans.Reason = fmt.Sprintf("opsbot made no decision for PR #%d's final head %s", ans.PR, shortSHA(merged.GetHead().GetSHA()))
	return ans, nil
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return strings.TrimSpace(s)
}
