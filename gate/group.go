package gate

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// A merge group is the commit GitHub's merge queue tests before it moves
// the base branch to it: the base's tip with the queued PRs' changes, on a
// branch gh-readonly-queue/<base>/pr-<N>-<base's tip>. Its sweep may be
// skipped only when its files are exactly those of a PR head whose sweep
// the gate skipped: the run that head reused covers them byte for byte.
// Any other group (the base moved since the PR was brought up to date, or
// the group holds more than one PR) sweeps.

// GroupReader reads what a merge group's answer needs of GitHub.
type GroupReader interface {
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
	CommitInfo(ctx context.Context, repo, sha string) (ghclient.Commit, error)
}

// Group answers for a merge group's commit sha of PR pr into the base
// branch base (as its group branch names them), with the PR's
// head as GitHub gave it ("" when it could not be read) (never stored: it
// is worked out anew from GitHub and the PR's decisions at each ask, so a
// Sweep anyway or a push since is seen). Skip only when the PR is open,
// its labels make its sweep full, the gate skipped its head's sweep, and
// the group's tree is the head's tree (and the PR merges into base).
func (g *Gate) Group(ctx context.Context, gh GroupReader, repo string, pr int, base, sha string) (d *state.Decision, head string, err error) {
	rc, ok := g.Cfg.Get().Repo(repo)
	if !ok {
		return nil, "", fmt.Errorf("%w: %s", ErrUnknownRepo, repo)
	}
	sweep := func(format string, args ...any) (*state.Decision, string, error) {
		return &state.Decision{Repo: rc.Name, PR: pr, HeadSHA: sha, Decision: state.Sweep,
			Reason: fmt.Sprintf("merge group %s of PR #%d: ", mdtext.ShortSHA(sha), pr) + fmt.Sprintf(format, args...)}, head, nil
	}
	p, err := gh.PullRequest(ctx, rc.Name, pr)
	if err != nil {
		return nil, head, fmt.Errorf("reading PR #%d of merge group %s: %w", pr, mdtext.ShortSHA(sha), err)
	}
	if p.GetState() != "open" {
		return sweep("the PR is %s, so nothing of it is queued", p.GetState())
	}
	if base != "" && p.GetBase().GetRef() != base {
		return sweep("the group's branch names the base %s, the PR merges into %s", base, p.GetBase().GetRef())
	}
	if rej := runs.LabelRejection(pr, rc.Reuse.Judge(runs.PRLabels(p), p.GetDraft())); rej != nil {
		return sweep("no reuse: %s", rej.Reason)
	}
	head = strings.ToLower(p.GetHead().GetSHA())
	d, err = g.Store.Decision(rc.Name, pr, head)
	if err != nil {
		return nil, head, err
	}
	d = Effective(d)
	if d == nil || (d.Decision != state.Skip && d.OverriddenBy == "") {
		// A head whose sweep was not skipped (undecided, or it swept
		// before a pin was granted at it): the PR's active pin, granted
		// at this head and checked again now as the merge will check it,
		// stands in (the merge's push consumes it; the group uses up
		// nothing). A skip overridden by Sweep anyway stays a sweep.
		pin, err := g.Store.ActivePin(rc.Name, pr)
		if err != nil {
			return nil, head, err
		}
		if pin == nil || !strings.EqualFold(pin.PRHeadAtGrant, head) {
			if d != nil {
				return sweep("the PR's head %s was not skipped (%s), and no pin was granted at it", mdtext.ShortSHA(head), d.Reason)
			}
			return sweep("opsbot decided nothing for the PR's head %s, and no pin was granted at it", mdtext.ShortSHA(head))
		}
		var inst int64
		if info, err := g.Store.PRInfo(rc.Name, pr); err != nil {
			return nil, head, err
		} else if info != nil {
			inst = info.Installation
		}
		v, err := g.Validators(inst)
		if err != nil {
			return nil, head, err
		}
		rules := runs.RulesFor(rc, runs.ForNamedPin)
		rules.NewHead = head
		rules.Attempt = pin.RunAttempt
		run, err := v.Validate(ctx, rules, pr, pin.RunID)
		if rej, ok := runs.IsRejection(err); ok {
			return sweep("the pin of run %d no longer qualifies: %s", pin.RunID, rej.Reason)
		}
		if err != nil {
			return nil, head, fmt.Errorf("checking the pin of run %d for merge group %s: %w", pin.RunID, mdtext.ShortSHA(sha), err)
		}
		d = &state.Decision{Repo: rc.Name, PR: pr, HeadSHA: head, Decision: state.Skip, PinID: pin.ID, RunID: run.ID, RunAttempt: run.Attempt,
			RunURL: run.URL, RunSHA: run.HeadSHA, ActorID: pin.ActorID, ActorLogin: pin.ActorLogin}
	}
	if d.Decision != state.Skip {
		return sweep("the PR's head %s was not skipped (%s)", mdtext.ShortSHA(head), d.Reason)
	}
	group, err := gh.CommitInfo(ctx, rc.Name, sha)
	if err != nil {
		return nil, head, fmt.Errorf("reading merge group %s: %w", mdtext.ShortSHA(sha), err)
	}
	own, err := gh.CommitInfo(ctx, rc.Name, head)
	if err != nil {
		return nil, head, fmt.Errorf("reading PR #%d's head %s: %w", pr, mdtext.ShortSHA(head), err)
	}
	if group.Tree == "" || !strings.EqualFold(group.Tree, own.Tree) {
		return sweep("its files are not those of the PR's head %s, whose sweep reused run %d (the base branch moved since the PR "+
			"was brought up to date, or the group holds other PRs too)", mdtext.ShortSHA(head), d.RunID)
	}
	out := *d
	out.HeadSHA = sha
	out.Reason = fmt.Sprintf("merge group %s of PR #%d has exactly the files of its head %s, whose sweep reused run %d, authorized by @%s",
		mdtext.ShortSHA(sha), pr, mdtext.ShortSHA(head), d.RunID, d.ActorLogin)
	if d.DecidedAt.IsZero() {
		out.Reason = fmt.Sprintf("merge group %s of PR #%d has exactly the files of its head %s, for which @%s pinned run %d",
			mdtext.ShortSHA(sha), pr, mdtext.ShortSHA(head), d.ActorLogin, d.RunID)
	}
	return &out, head, nil
}
