// Package runs decides whether a workflow run may stand in for a PR's push
// (or be staged): the run validation rules, each failure a reason a
// maintainer can act on. It reads GitHub through a small interface and
// fails closed: a read that fails is an error, never a pass.
package runs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Reader is what validation reads from GitHub.
type Reader interface {
	WorkflowID(ctx context.Context, repo, workflowPath string) (int64, error)
	Run(ctx context.Context, repo string, id int64) (*github.WorkflowRun, error)
	Artifacts(ctx context.Context, repo string, runID int64) ([]*github.Artifact, error)
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
	PRCommits(ctx context.Context, repo string, n int) ([]string, error)
	Compare(ctx context.Context, repo, base, head string) (ghclient.Comparison, error)
	WorkflowRuns(ctx context.Context, repo string, workflowID int64, branch, event string, max int) ([]*github.WorkflowRun, error)
	Timeline(ctx context.Context, repo string, n int) ([]ghclient.TimelineEvent, error)
	LabelEvents(ctx context.Context, repo string, n int) ([]ghclient.LabelEvent, error)
	PullsWithHead(ctx context.Context, repo, label string) ([]*github.PullRequest, error)
	RunJobs(ctx context.Context, repo string, runID int64, attempt int) ([]ghclient.Job, error)
	CommitInfo(ctx context.Context, repo, sha string) (ghclient.Commit, error)
}

// Rule names, as audited.
const (
	RuleNotFound   = "not-found"
	RuleWorkflow   = "not-sweep"
	RuleEvent      = "not-pull-request"
	RuleIncomplete = "not-completed"
	RuleConclusion = "conclusion"
	RuleCommit     = "commit-not-in-pr"
	RuleArtifacts  = "no-artifacts"
	RulePaths      = "paths"
	RuleProtected  = "protected-paths"
	RuleAttempt    = "attempt"
	RuleNoRun      = "no-run"
	RuleBase       = "base-branch"
	RuleHead       = "not-pr-head" // the run's head repository or branch is not the PR's
	RuleAncestor   = "not-in-head"
	RuleSkipped    = "sweep-skipped"
	RuleLabels     = "labels" // the PR's labels make its sweep partial
	RuleCoverage   = "coverage"
	RuleApproval   = "not-approved" // a dispatched run no approval of this PR binds
)

// Rejection is a run failing a rule. Reason is written for the PR.
type Rejection struct {
	Rule   string
	Reason string
}

func (r *Rejection) Error() string { return r.Reason }

// IsRejection reports whether err is a rule failing (as opposed to GitHub
// not answering) and returns it.
func IsRejection(err error) (*Rejection, bool) {
	var r *Rejection
	ok := errors.As(err, &r)
	return r, ok
}

// Rules are what a run must satisfy.
type Rules struct {
	Repo            string
	SweepWorkflow   string
	Conclusions     []string // allowed conclusions; empty means success only
	ResultArtifacts []string // at least one unexpired artifact must match one pattern
	// RequiredArtifacts must each be present and unexpired (staging's changelog-metadata).
	RequiredArtifacts []string
	AllowedPaths      []string // when set, the diff from the run's commit to NewHead may touch only these
	// NewHead is the head being decided (a use, a merge): when set, the
	// run's commit must be an ancestor of it, and the path guard compares
	// with it; "" means the PR's head now.
	NewHead string
	// ListedPR lets a run whose pull_requests list names the PR qualify even
	// when its commit is no longer one of the PR's (staging).
	ListedPR bool
	// ProtectedPaths, when set, are paths the PR must not have changed up to
	// the run's commit: a pull_request run executes the PR's own workflow
	// files, so a PR that edits them can fabricate a "successful sweep".
	ProtectedPaths []string
	// DefaultBranch is the branch the protected paths rule compares with,
	// and the only base branch a PR may have for its runs to be used (a
	// pull_request run executes the workflow files of the PR's base branch
	// merged with the PR); "" means the one GitHub names on the PR's base
	// repository.
	DefaultBranch string
	// Attempt, when set, is the attempt the run must still be at: a re-run
	// after it replaced what the maintainer saw.
	Attempt int
	// Labels, when set, are the label rules the PR must pass, as GitHub
	// reads its labels now: a full sweep's label and none that make it
	// partial.
	Labels *config.Reuse
	// Coverage reads the run's jobs: how much of the sweep it covers and
	// what it cost (Run.Coverage); below MinCoverage (a fraction, 0: no
	// floor) the run is refused. GPUs maps runner label globs to GPUs a
	// runner.
	Coverage    bool
	MinCoverage float64
	GPUs        map[string]int
	// ExternalWorkflow is the trusted workflow /approve-sweep dispatches
	// for external PRs ("" none): a run of it counts only through the
	// approval it is bound to.
	ExternalWorkflow string
}

// Approval is opsbot's record of a maintainer's approval of one head of a
// PR from a fork, and the run dispatched for it: the run counts as a sweep
// of Head for PR only. The binding is the record's, never the run's own
// fields (a dispatched run's head is the default branch's).
type Approval struct {
	ID       string
	PR       int
	Head     string
	Workflow string
	RunID    int64
	// State is the approval's (record.ApprovalState): only a completed
	// approval's run counts, at the attempt that completed it (Attempt).
	State   string
	Attempt int
}

// Approvals reads opsbot's approvals of external PRs' heads.
type Approvals interface {
	// ApprovalOfRun is the approval run is bound to (nil: none).
	ApprovalOfRun(repo string, run int64) (*Approval, error)
	// ApprovedRuns are the runs bound to a PR's approvals, newest first.
	ApprovedRuns(repo string, pr int) ([]int64, error)
}

// Run is a validated run.
type Run struct {
	ID         int64     `json:"id"`
	Attempt    int       `json:"attempt"`
	HeadSHA    string    `json:"head_sha"`
	HeadBranch string    `json:"head_branch"`
	Conclusion string    `json:"conclusion"`
	URL        string    `json:"url"`
	CreatedAt  time.Time `json:"created_at"`
	Artifacts  []string  `json:"artifacts,omitempty"`
	PRHead     string    `json:"pr_head"` // the PR's head when the run was checked
	PRState    string    `json:"pr_state"`
	// Coverage is read when the rules ask for it.
	Coverage *Coverage `json:"coverage,omitempty"`
	// Approval is the approval the run was dispatched for (an external
	// PR's), whose head HeadSHA is.
	Approval string `json:"approval,omitempty"`
}

// maxApprovedRuns bounds the approved runs a bare command reads.
const maxApprovedRuns = 20

// checkMadeByPR requires a run of the sweep workflow made by a pull
// request. A run of the external PRs' workflow gets its own reason: it
// counts only through an approval.
func (v *Validator) checkMadeByPR(ctx context.Context, rules Rules, run *github.WorkflowRun) error {
	id := run.GetID()
	wf, err := v.GH.WorkflowID(ctx, rules.Repo, rules.SweepWorkflow)
	if err != nil {
		return err
	}
	notApproved := &Rejection{RuleApproval, fmt.Sprintf("run %d is a run of the external PRs' workflow %s that no maintainer's "+
		"`/approve-sweep` of this PR dispatched: only a run opsbot dispatched for an approved head counts", id, Code(rules.ExternalWorkflow))}
	if rules.ExternalWorkflow != "" && run.GetEvent() == "workflow_dispatch" {
		ext, err := v.GH.WorkflowID(ctx, rules.Repo, rules.ExternalWorkflow)
		if err != nil && !errors.Is(err, ghclient.ErrNotFound) {
			return err
		}
		if err == nil && run.GetWorkflowID() == ext {
			return notApproved
		}
	}
	if run.GetWorkflowID() != wf {
		return &Rejection{RuleWorkflow, fmt.Sprintf("run %d is not a run of the sweep workflow %s", id, Code(rules.SweepWorkflow))}
	}
	if run.GetEvent() != "pull_request" {
		return &Rejection{RuleEvent, fmt.Sprintf("run %d was triggered by %s, not by a pull request", id, Code(run.GetEvent()))}
	}
	return nil
}

// checkDispatched requires a run bound to an approval to be the approval's:
// of this PR, not revoked, a workflow_dispatch run of the approval's
// workflow.
func (v *Validator) checkDispatched(ctx context.Context, rules Rules, p *github.PullRequest, run *github.WorkflowRun, a *Approval) error {
	id := run.GetID()
	if a.PR != p.GetNumber() {
		return &Rejection{RuleApproval, fmt.Sprintf("run %d was dispatched for PR #%d's approved head, not for PR #%d: an approved run "+
			"counts for its own PR only", id, a.PR, p.GetNumber())}
	}
	switch a.State {
	case "completed":
	case "active", "dispatched":
		return &Rejection{RuleApproval, fmt.Sprintf("run %d was dispatched for an approval that has not completed yet (it is %s): it counts "+
			"once opsbot has seen it finish with its results", id, Code(a.State))}
	default:
		ended := map[string]string{"revoked": "was revoked", "expired": "expired", "failed": "failed"}[a.State]
		if ended == "" {
			ended = "ended " + Code(a.State)
		}
		return &Rejection{RuleApproval, fmt.Sprintf("run %d was dispatched for an approval that %s, so it counts for nothing", id, ended)}
	}
	if a.Attempt != 0 && run.GetRunAttempt() != a.Attempt {
		return &Rejection{RuleApproval, fmt.Sprintf("run %d was re-run after its approval completed: its attempt %d is not attempt %d, "+
			"the one opsbot saw finish for the approval (approve the head again for another run)", id, run.GetRunAttempt(), a.Attempt)}
	}
	wf, err := v.GH.WorkflowID(ctx, rules.Repo, a.Workflow)
	if err != nil {
		return err
	}
	if run.GetWorkflowID() != wf || run.GetEvent() != "workflow_dispatch" {
		return &Rejection{RuleApproval, fmt.Sprintf("run %d is not a dispatched run of the external PRs' workflow %s, as its approval says",
			id, Code(a.Workflow))}
	}
	return nil
}

// ReusedLookup tells which run opsbot reused for a head commit, if any: a
// run on that commit had its sweep skipped (until a maintainer asked to
// sweep it anyway: then an attempt started after that measured it).
type ReusedLookup func(repo, sha string) (record.SkippedHead, bool)

// Validator checks runs.
type Validator struct {
	GH     Reader
	Reused ReusedLookup
	// Approvals, when set, binds dispatched runs to approved heads.
	Approvals Approvals
	Now       func() time.Time
	// jobs keeps the jobs read (Validators shares one across validators).
	jobs *jobCache
}

// Validate checks run id against rules for PR pr. The error is a
// *Rejection when a rule fails, or another error when GitHub could not be
// read (the caller must then fail closed). When a rule fails after the PR
// was read, the Run returned holds only the PR's head and state.
func (v *Validator) Validate(ctx context.Context, rules Rules, pr int, id int64) (Run, error) {
	run, err := v.GH.Run(ctx, rules.Repo, id)
	if errors.Is(err, ghclient.ErrNotFound) {
		return Run{}, &Rejection{RuleNotFound, fmt.Sprintf("run %d was not found in %s", id, rules.Repo)}
	}
	if err != nil {
		return Run{}, err
	}
	p, err := v.GH.PullRequest(ctx, rules.Repo, pr)
	if err != nil {
		return Run{}, err
	}
	if rej := checkLabels(rules, pr, p); rej != nil {
		return Run{PRHead: p.GetHead().GetSHA(), PRState: p.GetState()}, rej
	}
	got, err := v.check(ctx, rules, p, run)
	if err != nil {
		// The PR as read, for a caller that decides for a head: a rule
		// failing for a commit that is not the PR's head may be left for the head.
		return Run{PRHead: p.GetHead().GetSHA(), PRState: p.GetState()}, err
	}
	return got, nil
}

// Newest resolves a bare command: the newest completed sweep run of the
// PR's branch that passes every rule with conclusion success.
func (v *Validator) Newest(ctx context.Context, rules Rules, pr int) (Run, error) {
	p, err := v.GH.PullRequest(ctx, rules.Repo, pr)
	if err != nil {
		return Run{}, err
	}
	if rej := checkLabels(rules, pr, p); rej != nil {
		return Run{PRHead: p.GetHead().GetSHA(), PRState: p.GetState()}, rej
	}
	wf, err := v.GH.WorkflowID(ctx, rules.Repo, rules.SweepWorkflow)
	if err != nil {
		return Run{}, err
	}
	list, err := v.GH.WorkflowRuns(ctx, rules.Repo, wf, p.GetHead().GetRef(), "pull_request", 100)
	if err != nil {
		return Run{}, err
	}
	// The runs dispatched for this PR's approved heads are its sweeps too.
	approved := map[int64]bool{}
	if v.Approvals != nil {
		ids, err := v.Approvals.ApprovedRuns(rules.Repo, pr)
		if err != nil {
			return Run{}, err
		}
		for _, id := range ids[:min(len(ids), maxApprovedRuns)] {
			run, err := v.GH.Run(ctx, rules.Repo, id)
			if errors.Is(err, ghclient.ErrNotFound) {
				continue
			}
			if err != nil {
				return Run{}, err
			}
			approved[id] = true
			list = append(list, run)
		}
	}
	slices.SortStableFunc(list, func(a, b *github.WorkflowRun) int {
		return b.GetCreatedAt().Time.Compare(a.GetCreatedAt().Time)
	})
	var firstReason string
	headRepo := p.GetHead().GetRepo().GetID()
	v = &Validator{GH: &onceLabels{Reader: v.GH}, Reused: v.Reused, Approvals: v.Approvals, Now: v.Now, jobs: v.jobs} // one label timeline read for every candidate
	for _, run := range list {
		if run.GetStatus() != "completed" || !slices.Contains(allowed(rules.Conclusions), run.GetConclusion()) {
			continue
		}
		if run.GetHeadRepository().GetID() != headRepo && !approved[run.GetID()] {
			continue // the same branch name in another fork: not this PR's run
		}
		got, err := v.check(ctx, rules, p, run)
		if err == nil {
			return got, nil
		}
		rej, ok := IsRejection(err)
		if !ok {
			return Run{}, err
		}
		if firstReason == "" {
			firstReason = rej.Reason
		}
	}
	reason := fmt.Sprintf("no completed sweep run on a commit of PR #%d passes the checks", pr)
	if firstReason != "" {
		reason += " (the newest: " + firstReason + ")"
	}
	return Run{}, &Rejection{RuleNoRun, reason + "; pin a run explicitly with `/reuse-sweep-run <run-id>`"}
}

// checkLabelsAt applies rules.Labels to the labels the PR had when the run
// was created (from its label timeline): a partial sweep's run stays one
// after its labels change.
func (v *Validator) checkLabelsAt(ctx context.Context, rules Rules, p *github.PullRequest, run *github.WorkflowRun) error {
	evs, err := v.GH.LabelEvents(ctx, rules.Repo, p.GetNumber())
	if err != nil {
		return err
	}
	made := run.GetCreatedAt().Time
	on := map[string]bool{}
	for _, e := range evs {
		if e.At.After(made) {
			continue
		}
		on[strings.ToLower(e.Label)] = e.Added
	}
	var then []string
	for l, ok := range on {
		if ok {
			then = append(then, l)
		}
	}
	slices.Sort(then)
	vd := rules.Labels.Judge(then, false)
	if vd.Full() {
		return nil
	}
	if len(vd.Incompatible) > 0 {
		return &Rejection{RuleLabels, fmt.Sprintf("run %d was made while PR #%d was labelled %s, so it is a partial sweep's run, and a "+
			"partial sweep's run is not reused (run a full sweep and pin that)", run.GetID(), p.GetNumber(), codeList(vd.Incompatible))}
	}
	return &Rejection{RuleLabels, fmt.Sprintf("run %d was made while PR #%d had none of the full-sweep labels (%s), so it is not a full "+
		"sweep's run, and only a full sweep's run is reused (run a full sweep and pin that)", run.GetID(), p.GetNumber(), orList(vd.FullSweep))}
}

// onceLabels reads a PR's label timeline once, for several runs checked.
type onceLabels struct {
	Reader
	evs  []ghclient.LabelEvent
	err  error
	read bool
}

func (o *onceLabels) LabelEvents(ctx context.Context, repo string, n int) ([]ghclient.LabelEvent, error) {
	if !o.read {
		o.evs, o.err = o.Reader.LabelEvents(ctx, repo, n)
		o.read = true
	}
	return o.evs, o.err
}

// checkLabels applies rules.Labels to the PR as read (nil: passes).
func checkLabels(rules Rules, pr int, p *github.PullRequest) *Rejection {
	if rules.Labels == nil {
		return nil
	}
	return LabelRejection(pr, rules.Labels.Judge(PRLabels(p), p.GetDraft()))
}

func allowed(c []string) []string {
	if len(c) == 0 {
		return []string{"success"}
	}
	return c
}

func (v *Validator) check(ctx context.Context, rules Rules, p *github.PullRequest, run *github.WorkflowRun) (Run, error) {
	id := run.GetID()
	if full := run.GetRepository().GetFullName(); full != "" && !strings.EqualFold(full, rules.Repo) {
		return Run{}, &Rejection{RuleNotFound, fmt.Sprintf("run %d was not found in %s", id, rules.Repo)}
	}
	var appr *Approval
	if v.Approvals != nil {
		a, err := v.Approvals.ApprovalOfRun(rules.Repo, id)
		if err != nil {
			return Run{}, err
		}
		appr = a
	}
	if appr != nil {
		if err := v.checkDispatched(ctx, rules, p, run, appr); err != nil {
			return Run{}, err
		}
	} else if err := v.checkMadeByPR(ctx, rules, run); err != nil {
		return Run{}, err
	}
	if run.GetStatus() != "completed" {
		return Run{}, &Rejection{RuleIncomplete, fmt.Sprintf("run %d has not finished yet (status %s)", id, Code(run.GetStatus()))}
	}
	ok := allowed(rules.Conclusions)
	if !slices.Contains(ok, run.GetConclusion()) {
		return Run{}, &Rejection{RuleConclusion, fmt.Sprintf("run %d concluded %s; only %s may be used here",
			id, Code(run.GetConclusion()), orList(ok))}
	}
	sha := run.GetHeadSHA()
	base, err := defaultBranch(rules, p, id)
	if err != nil {
		return Run{}, err
	}
	if err := checkBase(p, run, base); err != nil {
		return Run{}, err
	}
	listed := false
	if appr != nil {
		// The approval is the run's provenance: the head it measured.
		sha = strings.ToLower(appr.Head)
		if run.GetHeadBranch() != base {
			return Run{}, &Rejection{RuleApproval, fmt.Sprintf("run %d ran the workflow of branch %s, not of the default branch %s: "+
				"only the default branch's workflow is trusted with an external PR's head", id, Code(run.GetHeadBranch()), Code(base))}
		}
		// The approved head must still be a commit of the PR (inPR below),
		// whatever the purpose: the approval names no other.
	} else if err := v.checkMadeFor(ctx, rules, p, run, base); err != nil {
		return Run{}, err
	}
	if rules.ListedPR && appr == nil {
		for _, x := range run.PullRequests {
			listed = listed || (x.GetNumber() == p.GetNumber() && x.GetBase().GetRef() == base)
		}
	}
	if !listed {
		in, err := v.inPR(ctx, rules.Repo, p, sha)
		if err != nil {
			return Run{}, err
		}
		if !in {
			return Run{}, &Rejection{RuleCommit, fmt.Sprintf("run %d ran on %s, which is not a commit of PR #%d (rebased or force-pushed away?)",
				id, Code(mdtext.ShortSHA(sha)), p.GetNumber())}
		}
	}
	if rules.Attempt != 0 && run.GetRunAttempt() != rules.Attempt {
		return Run{}, &Rejection{RuleAttempt, fmt.Sprintf("run %d has been re-run: its latest attempt is %d, not attempt %d "+
			"(a run is used at its latest attempt only; pin it again to use attempt %d)", id, run.GetRunAttempt(), rules.Attempt, run.GetRunAttempt())}
	}
	if len(rules.ProtectedPaths) > 0 {
		if err := v.checkProtected(ctx, rules, base, id, sha); err != nil {
			return Run{}, err
		}
	}
	if rules.Labels != nil {
		// The labels now passed (checkLabels); the run's sweep is what the
		// labels said when it was made.
		if err := v.checkLabelsAt(ctx, rules, p, run); err != nil {
			return Run{}, err
		}
	}
	if v.Reused != nil {
		// A run on a head whose sweep opsbot skipped measured nothing, whatever
		// artifacts its other jobs uploaded (an aggregate of the reused results).
		if skipped, ok := v.Reused(rules.Repo, sha); ok && skipped.RunID != id && !skipped.Measured(run.GetRunStartedAt().Time) {
			other := skipped.RunID
			if !skipped.OverriddenAt.IsZero() {
				// Sweep anyway: the attempt that was skipped measured nothing;
				// the re-run it asked for does.
				return Run{}, &Rejection{RuleSkipped, fmt.Sprintf("run %d is not a sweep yet: its attempt %d started before the sweep of its commit %s "+
					"was asked for anyway (%s), so it ran with the sweep skipped and measured nothing; its re-run, once finished, can be pinned",
					id, run.GetRunAttempt(), Code(mdtext.ShortSHA(sha)), skipped.OverriddenAt.UTC().Format("2006-01-02 15:04 UTC"))}
			}
			return Run{}, &Rejection{RuleSkipped, fmt.Sprintf("run %d is not a sweep: opsbot skipped the sweep of its commit %s, reusing run %d, "+
				"so its artifacts are not results measured on that commit; pin run %d instead", id, Code(mdtext.ShortSHA(sha)), other, other)}
		}
	}
	arts, err := v.GH.Artifacts(ctx, rules.Repo, id)
	if err != nil {
		return Run{}, err
	}
	names, rej := v.checkArtifacts(rules, id, arts)
	if rej != nil {
		return Run{}, rej
	}
	head := rules.NewHead
	if head == "" {
		head = p.GetHead().GetSHA()
	}
	if head != sha && (rules.NewHead != "" || len(rules.AllowedPaths) > 0) {
		if err := v.checkHead(ctx, rules, id, sha, head, base); err != nil {
			return Run{}, err
		}
	}
	out := Run{ID: id, Attempt: run.GetRunAttempt(), HeadSHA: sha, HeadBranch: run.GetHeadBranch(), Conclusion: run.GetConclusion(),
		URL: run.GetHTMLURL(), CreatedAt: run.GetCreatedAt().Time, Artifacts: names,
		PRHead: p.GetHead().GetSHA(), PRState: p.GetState()}
	if appr != nil {
		out.HeadBranch, out.Approval = p.GetHead().GetRef(), appr.ID
	}
	if rules.Coverage {
		jobs, err := v.jobs.get(ctx, v.GH, rules.Repo, id, max(run.GetRunAttempt(), 1))
		if errors.Is(err, ghclient.ErrTooManyJobs) {
			return Run{}, &Rejection{RuleCoverage, fmt.Sprintf("run %d has more jobs than opsbot reads (3,000), so its coverage cannot be told", id)}
		}
		if err != nil {
			return Run{}, err
		}
		c := CoverageOf(jobs, rules.GPUs)
		if rules.MinCoverage > 0 && c.Fraction() < rules.MinCoverage {
			return Run{}, &Rejection{RuleCoverage, fmt.Sprintf("run %d covers too little of the sweep: %s, under the %.0f%% this repository asks for",
				id, Sentence(c), rules.MinCoverage*100)}
		}
		out.Coverage = &c
	}
	return out, nil
}

// checkHead requires the run's commit to be an ancestor of the head being
// decided (a three-dot compare of a diverged pair shows only the head's
// side, so a head without the measured change would pass the path guard),
// then applies the path guard to the commits in between: a file counts only
// when the head differs in it from the run's commit and from the default
// branch base (a second compare), so a merge of the default branch into the
// PR does not count the default branch's files.
func (v *Validator) checkHead(ctx context.Context, rules Rules, id int64, sha, head, base string) error {
	cmp, err := v.GH.Compare(ctx, rules.Repo, sha, head)
	if errors.Is(err, ghclient.ErrNotFound) {
		return &Rejection{RuleAncestor, fmt.Sprintf("run %d's commit %s cannot be compared with head %s (force-pushed away?), so whether that head "+
			"contains the measured code cannot be checked", id, Code(mdtext.ShortSHA(sha)), Code(mdtext.ShortSHA(head)))}
	}
	if err != nil {
		return err
	}
	if cmp.Status != "ahead" && cmp.Status != "identical" {
		return &Rejection{RuleAncestor, fmt.Sprintf("head %s does not contain run %d's commit %s (the compare says %s): the code the run measured "+
			"is not in that head (force-pushed away?)", Code(mdtext.ShortSHA(head)), id, Code(mdtext.ShortSHA(sha)), Code(cmp.Status))}
	}
	if len(rules.AllowedPaths) == 0 {
		return nil
	}
	if !cmp.FilesComplete {
		return &Rejection{RulePaths, fmt.Sprintf("the changes after run %d are too large to check against the allowed paths", id)}
	}
	var outside []string
	for _, f := range cmp.Files {
		if !MatchAny(rules.AllowedPaths, f) {
			outside = append(outside, f)
		}
	}
	if len(outside) > 0 {
		own, err := v.prOwnFiles(ctx, rules.Repo, base, head)
		if err != nil {
			return err
		}
		if own != nil {
			kept := outside[:0]
			for _, f := range outside {
				if own[f] {
					kept = append(kept, f)
				}
			}
			outside = kept
		}
	}
	if len(outside) > 0 {
		more := ""
		if len(outside) > 3 {
			more = fmt.Sprintf(" and %d more", len(outside)-3)
			outside = outside[:3]
		}
		return &Rejection{RulePaths, fmt.Sprintf("the commits after run %d touch %s%s, outside the allowed paths (%s)",
			id, codeList(outside), more, codeList(rules.AllowedPaths))}
	}
	return nil
}

// prOwnFiles are the files in which head differs from the default branch
// base (a three-dot compare: the PR's own changes, not the default branch's
// merged into it), or nil when GitHub could not list them all, so that every
// file counts.
func (v *Validator) prOwnFiles(ctx context.Context, repo, base, head string) (map[string]bool, error) {
	cmp, err := v.GH.Compare(ctx, repo, base, head)
	if errors.Is(err, ghclient.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !cmp.FilesComplete {
		return nil, nil
	}
	own := make(map[string]bool, len(cmp.Files))
	for _, f := range cmp.Files {
		own[f] = true
	}
	return own, nil
}

// defaultBranch is the branch a PR must be based on: the configured
// default branch, else the one GitHub names on the PR's base repository.
func defaultBranch(rules Rules, p *github.PullRequest, id int64) (string, error) {
	base := rules.DefaultBranch
	if base == "" {
		base = p.GetBase().GetRepo().GetDefaultBranch()
	}
	if base == "" {
		return "", fmt.Errorf("runs: GitHub names no default branch for PR #%d, so run %d's base cannot be checked", p.GetNumber(), id)
	}
	return base, nil
}

// checkBase rejects a run of a PR not based on the default branch: a
// pull_request run executes the workflow files of the PR's merge with its
// base branch, and a base other than the default branch may carry a
// workflow that fabricates results (the protected paths rule compares with
// the default branch only).
func checkBase(p *github.PullRequest, run *github.WorkflowRun, base string) error {
	n, id := p.GetNumber(), run.GetID()
	ref := p.GetBase().GetRef()
	if ref == "" {
		return fmt.Errorf("runs: GitHub names no base branch for PR #%d, so run %d's base cannot be checked", n, id)
	}
	if ref != base {
		return &Rejection{RuleBase, fmt.Sprintf("PR #%d merges into %s, not the default branch %s: its runs execute that branch's workflow files, "+
			"so no run of it is used (retarget the PR to %s and run the sweep again)", n, Code(ref), Code(base), Code(base))}
	}
	return nil
}

// checkMadeFor rejects a run that may not have been made for this PR with
// the default branch as its base. The run's head repository (by id) and
// branch must be the PR's head: GitHub lists runs by branch name across
// forks. A run's pull_requests are every open PR whose head matched, not
// the one that triggered it, so a run that lists any PR into another base
// (this one before a retarget, or another PR of the same head) may have run
// that base's workflow files, and is refused; one that lists PRs must list
// this one. A run that lists none (a fork's) is refused when the PR's
// timeline shows its base changed at or after the run was created.
func (v *Validator) checkMadeFor(ctx context.Context, rules Rules, p *github.PullRequest, run *github.WorkflowRun, base string) error {
	n, id := p.GetNumber(), run.GetID()
	head := p.GetHead()
	if head.GetRepo().GetID() == 0 {
		return &Rejection{RuleHead, fmt.Sprintf("PR #%d's head repository is gone (a deleted fork?), so whether run %d was made for it "+
			"cannot be checked", n, id)}
	}
	if got := run.GetHeadRepository(); got.GetID() != head.GetRepo().GetID() {
		return &Rejection{RuleHead, fmt.Sprintf("run %d ran on a branch of %s, not of PR #%d's head repository %s", id,
			Code(orUnknown(got.GetFullName())), n, Code(orUnknown(head.GetRepo().GetFullName())))}
	}
	if run.GetHeadBranch() != head.GetRef() {
		return &Rejection{RuleHead, fmt.Sprintf("run %d ran on branch %s, not on PR #%d's head branch %s", id, Code(run.GetHeadBranch()), n,
			Code(head.GetRef()))}
	}
	listed := false
	for _, x := range run.PullRequests {
		other := x.GetBase().GetRef()
		switch {
		case other != base && x.GetNumber() == n:
			return &Rejection{RuleBase, fmt.Sprintf("run %d was made for PR #%d when it merged into %s, not the default branch %s: it ran that "+
				"branch's workflow files (run the sweep again)", id, n, Code(other), Code(base))}
		case other != base:
			return &Rejection{RuleBase, fmt.Sprintf("run %d also lists PR #%d, which merges into %s, not the default branch %s: the run may have "+
				"been made for that PR and run that branch's workflow files (run the sweep again once only PRs into %s have this head)",
				id, x.GetNumber(), Code(other), Code(base), Code(base))}
		case x.GetNumber() == n:
			listed = true
		}
	}
	if len(run.PullRequests) > 0 && !listed {
		return &Rejection{RuleBase, fmt.Sprintf("run %d was not made for PR #%d (the pull requests it lists do not include it)", id, n)}
	}
	// A run lists no closed PR, and a fork's run none at all: any other PR
	// of this head, open or closed, into another base may have made it.
	label := head.GetLabel()
	if label == "" {
		owner, _, _ := strings.Cut(head.GetRepo().GetFullName(), "/")
		label = owner + ":" + head.GetRef()
	}
	siblings, err := v.GH.PullsWithHead(ctx, rules.Repo, label)
	if err != nil {
		return err
	}
	for _, x := range siblings {
		if other := x.GetBase().GetRef(); x.GetNumber() != n && other != base {
			return &Rejection{RuleBase, fmt.Sprintf("PR #%d of the same head (%s) merges into %s, not the default branch %s: run %d may have been "+
				"made for it and run that branch's workflow files (run the sweep again on a branch no PR into another base uses)",
				x.GetNumber(), Code(label), Code(other), Code(base), id)}
		}
	}
	if len(run.PullRequests) > 0 {
		return nil
	}
	evs, err := v.GH.Timeline(ctx, rules.Repo, n)
	if err != nil {
		return err
	}
	made := run.GetCreatedAt().Time
	for _, e := range evs {
		if e.Event == "base_ref_changed" && !e.At.Before(made.Truncate(time.Second)) {
			return &Rejection{RuleBase, fmt.Sprintf("PR #%d's base branch was changed at %s, after run %d was made (%s): the run lists no pull "+
				"request (a fork's run), so which base's workflow files it ran cannot be told (run the sweep again)", n,
				e.At.UTC().Format(time.RFC3339), id, made.UTC().Format(time.RFC3339))}
		}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// checkProtected rejects a run whose commit carries changes of the PR to a
// protected path: the PR's changes up to the run's commit are the
// three-dot compare of the default branch and that commit.
func (v *Validator) checkProtected(ctx context.Context, rules Rules, base string, id int64, sha string) error {
	cmp, err := v.GH.Compare(ctx, rules.Repo, base, sha)
	if errors.Is(err, ghclient.ErrNotFound) {
		return &Rejection{RuleProtected, fmt.Sprintf("run %d's commit %s cannot be compared with %s (force-pushed away?), so whether this PR "+
			"changed its workflow (protected paths %s) cannot be checked", id, Code(mdtext.ShortSHA(sha)), Code(base), codeList(rules.ProtectedPaths))}
	}
	if err != nil {
		return err
	}
	if !cmp.FilesComplete {
		return &Rejection{RuleProtected, fmt.Sprintf("the PR's changes up to run %d are too large to check against the protected paths (%s)",
			id, codeList(rules.ProtectedPaths))}
	}
	var hit []string
	for _, f := range cmp.Files {
		if MatchAny(rules.ProtectedPaths, f) {
			hit = append(hit, f)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	slices.Sort(hit)
	hit = slices.Compact(hit)
	more := ""
	if len(hit) > 3 {
		more = fmt.Sprintf(" and %d more", len(hit)-3)
		hit = hit[:3]
	}
	return &Rejection{RuleProtected, fmt.Sprintf("run %d ran workflow files this PR changes: its commits up to %s touch %s%s (protected paths %s), "+
		"and a run of a workflow the PR changed is never used", id, Code(mdtext.ShortSHA(sha)), codeList(hit), more, codeList(rules.ProtectedPaths))}
}

// inPR reports whether sha is a commit of the PR now: its commit list (all
// pages), or for PRs beyond the 250 commits GitHub lists, the compare API
// (sha is an ancestor of the head and not already in the base).
func (v *Validator) inPR(ctx context.Context, repo string, p *github.PullRequest, sha string) (bool, error) {
	if p.GetCommits() <= 250 {
		shas, err := v.GH.PRCommits(ctx, repo, p.GetNumber())
		if err != nil {
			return false, err
		}
		return slices.Contains(shas, sha), nil
	}
	toHead, err := v.GH.Compare(ctx, repo, sha, p.GetHead().GetSHA())
	if errors.Is(err, ghclient.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if toHead.Status != "ahead" && toHead.Status != "identical" {
		return false, nil
	}
	fromBase, err := v.GH.Compare(ctx, repo, p.GetBase().GetSHA(), sha)
	if err != nil {
		return false, err
	}
	return fromBase.Status == "ahead", nil
}

func (v *Validator) checkArtifacts(rules Rules, id int64, arts []*github.Artifact) ([]string, *Rejection) {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	live := map[string]bool{}
	expired := false
	var names []string
	for _, a := range arts {
		gone := a.GetExpired() || (a.ExpiresAt != nil && !a.ExpiresAt.Time.After(now))
		if gone {
			expired = true
			continue
		}
		live[a.GetName()] = true
		names = append(names, a.GetName())
	}
	hasResult := false
	for n := range live {
		hasResult = hasResult || MatchAny(rules.ResultArtifacts, n)
	}
	if !hasResult {
		if expired {
			return nil, &Rejection{RuleArtifacts, fmt.Sprintf("the result artifacts of run %d have expired", id)}
		}
		return nil, &Rejection{RuleArtifacts, fmt.Sprintf("run %d has no result artifacts (%s): a run whose sweep was skipped cannot be reused",
			id, codeList(rules.ResultArtifacts))}
	}
	for _, req := range rules.RequiredArtifacts {
		found := false
		for n := range live {
			found = found || MatchAny([]string{req}, n)
		}
		if !found {
			return nil, &Rejection{RuleArtifacts, fmt.Sprintf("run %d has no unexpired %s artifact", id, Code(req))}
		}
	}
	slices.Sort(names)
	return names, nil
}

// MatchAny reports whether name matches one of the glob patterns. `*`
// matches within a path segment, `**` any number of segments.
func MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matchGlob(p, name) {
			return true
		}
	}
	return false
}

func matchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(ps, ns []string) bool {
	for len(ps) > 0 {
		if ps[0] == "**" {
			rest := ps[1:]
			for i := 0; i <= len(ns); i++ {
				if matchSegs(rest, ns[i:]) {
					return true
				}
			}
			return false
		}
		if len(ns) == 0 {
			return false
		}
		if ok, err := path.Match(ps[0], ns[0]); err != nil || !ok {
			return false
		}
		ps, ns = ps[1:], ns[1:]
	}
	return len(ns) == 0
}

func orList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = Code(x)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// codeList shows names (file names from the compare API, configured
// patterns) as code spans, whatever characters they hold.
func codeList(xs []string) string { return mdtext.CodeList(xs) }

// Code renders text that someone else controls (a file name in a PR, a
// conclusion GitHub reports) as one Markdown inline code span that nothing
// inside it can end early or turn into a line of its own: it is
// mdtext.Code, the escaper every notice uses.
func Code(s string) string { return mdtext.Code(s) }
