// Package approve is /approve-sweep: the sweep of a PR from a fork. A
// fork's PR cannot reach the repository's self-hosted GPU runners, so its
// sweep never runs on its own. A maintainer who has read the PR names its
// exact head; opsbot records the approval, bound to that head, and
// dispatches the repository's trusted workflow (repos[].external.workflow)
// on the default branch with the PR's merge commit as an input. It binds
// the run GitHub answers with (return_run_details), or, where GitHub does
// not answer it, the run opsbot's own account made whose name carries the
// approval's id. The bound run counts as a sweep of that head for that PR
// only: its binding is opsbot's record, never the run's own fields. It is
// a sequence (package seq): each step re-reads the PR and the run.
package approve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Name is the command's canonical name; SeqKind its sequence's kind.
const (
	Name    = "approve-sweep"
	SeqKind = "approval"
	Usage   = "usage: /approve-sweep <the head's full SHA> | /approve-sweep cancel"
)

// The steps of an approval's sequence: its record's states.
const (
	StepActive     = string(record.ApprovalActive)
	StepDispatched = string(record.ApprovalDispatched)
	StepCompleted  = string(record.ApprovalCompleted)
	StepFailed     = string(record.ApprovalFailed)
	StepExpired    = string(record.ApprovalExpired)
	StepRevoked    = string(record.ApprovalRevoked)
)

// Poll is how long an approval waiting for GitHub (a merge commit, a run
// to finish) sleeps when no event wakes it sooner.
const Poll = 30 * time.Second

// RunPoll is how long a dispatched approval sleeps between reads of its
// run: the run's completion (workflow_run) wakes it sooner.
const RunPoll = 5 * time.Minute

// FindWait is how long an approval dispatched without the run's details
// looks for its run before it gives up.
const FindWait = 15 * time.Minute

// DefaultRunTimeout is how long an approval waits for its run when the
// configuration does not say.
const DefaultRunTimeout = 12 * time.Hour

// DefaultMinRole is who may approve when the configuration does not say:
// running a stranger's code on the GPU runners is a maintainer's call.
const DefaultMinRole = "maintain"

// GitHub is what an approval reads and does on GitHub (ghclient.Client).
type GitHub interface {
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
	CommitInfo(ctx context.Context, repo, sha string) (ghclient.Commit, error)
	DispatchWorkflow(ctx context.Context, repo, workflowPath, ref string, inputs map[string]string, details bool) (ghclient.DispatchedRun, error)
	WorkflowID(ctx context.Context, repo, workflowPath string) (int64, error)
	DispatchedRuns(ctx context.Context, repo string, workflowID int64, branch, actor string, since time.Time, max int) ([]*github.WorkflowRun, error)
	Run(ctx context.Context, repo string, id int64) (*github.WorkflowRun, error)
	Artifacts(ctx context.Context, repo string, runID int64) ([]*github.Artifact, error)
	CancelRun(ctx context.Context, repo string, id int64) error
}

// Handler runs /approve-sweep and steps its sequences.
type Handler struct {
	Clients func(installation int64) (GitHub, error)
	// State reads opsbot's state (the store): the PR's approval sequence,
	// its approvals.
	State   commands.State
	Notices *notices.Notifier
	// Self is opsbot's own account: only a run it triggered is bound by
	// its name. Known before the workers start.
	Self func() (id int64, login string)
	// Offer are the buttons a completed approval's run is offered with on
	// the head's check run (the registry's: Reuse for next push, Merge
	// with reuse).
	Offer func() []record.CheckAction
	Log   *slog.Logger
	Now   func() time.Time
	// NewID makes an approval's id (nil: 8 random bytes).
	NewID func() string

	acts *seq.Marks // the engine's act marks (commands.Deps.Acts): the dispatches this process marked
}

// Data is an approval sequence's own state.
type Data struct {
	Installation int64  `json:"installation"`
	ID           string `json:"id"`
	Workflow     string `json:"workflow"`
	// Ref is the branch the workflow was dispatched on: the default branch.
	Ref      string `json:"ref,omitempty"`
	MergeSHA string `json:"merge_sha,omitempty"`
	RunID    int64  `json:"run_id,omitempty"`
	RunURL   string `json:"run_url,omitempty"`
	// RunAttempt is the run's attempt opsbot saw complete the approval.
	RunAttempt int `json:"run_attempt,omitempty"`
	// Dispatched is when the dispatch was sent; NoDetails says GitHub did
	// not answer the run's id, so the run is found by its name.
	Dispatched time.Time `json:"dispatched,omitzero"`
	NoDetails  bool      `json:"no_details,omitempty"`
	// Attempts counts the dispatches marked; Pending says the last is
	// marked and not yet sent, under Mark (seq.Marks): only the process
	// that made the mark sends it, once; a mark found by another (after a
	// restart) is a dispatch that may have been sent, whose run is looked
	// for by its name first.
	Attempts int    `json:"attempts,omitempty"`
	Pending  bool   `json:"pending,omitempty"`
	Mark     string `json:"mark,omitempty"`
	// Pushed is a later head, told once: the run measures Head only.
	Pushed string `json:"pushed,omitempty"`
	// Now is what the status comment last said is happening.
	Now string `json:"now,omitempty"`
	// Line is the command as written: editing it away revokes the approval.
	Line  string   `json:"line,omitempty"`
	Trail []string `json:"trail"`
}

// ConfigSection is repos[].external: its defaults and its checks, beside
// the handler that reads it.
var ConfigSection = config.Section{
	Key: "external",
	Defaults: func(r *config.Repo) {
		if r.External.MinRole == "" {
			r.External.MinRole = DefaultMinRole
		}
		if r.External.RunTimeout == 0 {
			r.External.RunTimeout = DefaultRunTimeout
		}
	},
	Check: func(r *config.Repo) []config.SectionProblem {
		var out []config.SectionProblem
		if w := r.External.Workflow; w != "" {
			dir, file := path.Split(w)
			ext := path.Ext(file)
			if dir != ".github/workflows/" || (ext != ".yml" && ext != ".yaml") || strings.TrimSuffix(file, ext) == "" {
				out = append(out, config.SectionProblem{Key: "workflow",
					Message: fmt.Sprintf("%q is not a workflow file (.github/workflows/NAME.yml)", w)})
			}
			if w == r.SweepWorkflow {
				out = append(out, config.SectionProblem{Key: "workflow",
					Message: "is the sweep workflow: external PRs need a workflow of their own, run only by workflow_dispatch"})
			}
		}
		if t := r.External.RunTimeout; t < 10*time.Minute || t > 7*24*time.Hour {
			out = append(out, config.SectionProblem{Key: "run_timeout",
				Message: fmt.Sprintf("%v is out of range: how long an approval waits for its run, from 10m to 168h (for example 12h)", t)})
		}
		return out
	},
}

// Module is /approve-sweep, its sequence and its section, from what every
// command shares.
func Module(d commands.Deps) commands.Module {
	h := &Handler{State: d.State, Notices: d.Notices, Self: d.Self, Log: d.Log, Now: d.Now,
		Clients: func(inst int64) (GitHub, error) { return d.GitHub(inst) }, acts: commands.ActsOf(d)}
	if d.Registry != nil {
		h.Offer = func() []record.CheckAction { return d.Registry().CheckActions() }
	}
	return h.Module()
}

// Module is the command run by h.
func (h *Handler) Module() commands.Module {
	sec := ConfigSection
	return commands.Module{Spec: Spec(h), Kinds: []seq.Kind{Kind(h)}, Section: &sec}
}

// offer are the buttons a completed approval's run is offered with.
func (h *Handler) offer() []record.CheckAction {
	if h.Offer == nil {
		return nil
	}
	return h.Offer()
}

// Spec is the command, run by h.
func Spec(h *Handler) commands.Spec {
	return commands.Spec{
		Name:     Name,
		Verbs:    []commands.Verb{{Word: "/approve-sweep", Usage: Usage, Args: headOrCancel}},
		Access:   func(rc *config.Repo) config.Access { return rc.External.Access },
		LastWins: true,
		Help:     help,
		Handler:  h,
	}
}

// Kind is the approval's sequence, stepped by h: a workflow run's request
// or completion wakes it (the events route a run to its approval's PR).
func Kind(h *Handler) seq.Kind {
	return seq.Typed[Data]{Name: SeqKind, Step: h.wake, Expire: h.expire, Routes: []seq.Route{seq.On("workflow_run")}, Stop: "/approve-sweep cancel",
		Teller: func() plan.Teller { return h.Notices.Teller() }}.Kind()
}

// headOrCancel reads the one argument: a head commit's SHA (7 to 40 hex
// characters) or cancel.
func headOrCancel(c *commands.Command, args []string, _ commands.Options) string {
	switch {
	case len(args) != 1:
		return fmt.Sprintf("%s takes one argument, the PR's head commit (or cancel), got %d", c.Verb, len(args))
	case strings.EqualFold(args[0], "cancel"):
		c.Cancel = true
		return ""
	}
	sha := strings.ToLower(args[0])
	if len(sha) < 7 || len(sha) > 40 || strings.Trim(sha, "0123456789abcdef") != "" {
		return fmt.Sprintf("%s is not a commit SHA (7 to 40 hex characters)", mdtext.Code(args[0]))
	}
	c.Args = []string{sha}
	return ""
}

func help(rc *config.Repo) commands.Help {
	who := commands.Who(rc.External.Access)
	if rc.External.Workflow == "" {
		return commands.Help{Settings: []string{"`/approve-sweep` is off: no workflow for external PRs is set (`repos[].external.workflow`)"}}
	}
	h := commands.Help{
		Rows: []commands.HelpRow{
			{Command: "`/approve-sweep <head-sha>`", What: "run the sweep of this PR from a fork on exactly that head (its current one, by its full SHA)", Who: who},
			{Command: "`/approve-sweep cancel`", What: "revoke this PR's approval: its run counts for nothing", Who: who},
		},
	}
	h.About = "**What an approval does.** A PR from a fork cannot reach the GPU runners, so its sweep never runs by itself. " +
		"Read the PR, then name its head by its full SHA: opsbot dispatches " + mdtext.Code(rc.External.Workflow) + " on the default branch " +
		"for the PR's merge commit, which must have that head as a parent. The run it dispatched counts as a sweep of that head " +
		"for this PR only: `/reuse-sweep-run`, the gate and `/merge-with-reuse` accept it as they accept any sweep. A push before " +
		"the dispatch expires the approval; a run already dispatched measures the approved head only. No other run of that " +
		"workflow ever counts.\n\n"
	h.Settings = []string{fmt.Sprintf("approvals dispatch %s and wait at most %s for its run", mdtext.Code(rc.External.Workflow), commands.Span(rc.External.RunTimeout))}
	return h
}

// Prepare approves the PR's head, or revokes the PR's approval.
func (h *Handler) Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	me := mdtext.Mention(in.Actor.Login)
	rc := env.Repo
	cur, err := commands.LiveSequence(h.State, in.Repo, in.PR, SeqKind)
	if err != nil {
		return commands.Result{Err: err}
	}
	if line.Cancel {
		// Taken back whatever the configuration says now: an approval made
		// before a reload that removed the workflow is still revoked.
		return h.cancel(ctx, in, cur)
	}
	if rc.External.Workflow == "" {
		return commands.Result{Outcome: commands.Rejected, Reason: "no workflow for external PRs is configured",
			Reply: fmt.Sprintf("%s this repository runs no sweeps of external PRs: no workflow is set for them (`repos[].external.workflow`).", me)}
	}
	if in.PRState == "closed" {
		return commands.Result{Outcome: commands.Rejected, Reason: "the PR is closed",
			Reply: fmt.Sprintf("%s this PR is closed: there is nothing to sweep.", me)}
	}
	if len(line.Args) != 1 {
		return commands.Result{Err: errors.New("approve: the command carries no head")}
	}
	named := line.Args[0]
	gh, err := h.Clients(in.Installation)
	if err != nil {
		return commands.Result{Err: err}
	}
	pr, err := gh.PullRequest(ctx, in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: err}
	}
	refuse := func(reason, words string) commands.Result {
		return commands.Result{Outcome: commands.Rejected, Reason: reason, Reply: fmt.Sprintf("%s I did not approve the sweep: %s", me, words)}
	}
	headRepo, baseRepo := pr.GetHead().GetRepo(), pr.GetBase().GetRepo()
	switch {
	case headRepo.GetID() == 0:
		return refuse("the PR's head repository is gone", "this PR's head repository is gone (a deleted fork?), so its head cannot be swept.")
	case headRepo.GetID() == baseRepo.GetID() || strings.EqualFold(headRepo.GetFullName(), baseRepo.GetFullName()):
		return refuse("not an external PR", "this PR's head is a branch of this repository, not a fork's: its own sweep runs on its pushes. "+
			"`/approve-sweep` is for PRs from forks.")
	}
	head := strings.ToLower(pr.GetHead().GetSHA())
	if !strings.HasPrefix(head, named) {
		return refuse("not the PR's head", fmt.Sprintf("%s is not this PR's head, %s. Name the head you read (a push since you read "+
			"it is not approved).", mdtext.Code(named), mdtext.Code(mdtext.ShortSHA(head))))
	}
	if len(named) != len(head) {
		// A fork's author can make a commit whose SHA starts as the one
		// the maintainer read (7 characters take minutes): only the whole
		// SHA names what was read.
		return refuse("a short SHA", fmt.Sprintf("name the head by its full SHA (40 characters; GitHub's copy button beside the commit "+
			"copies it). A short one like %s could name a commit the PR's author made to start the same way.", mdtext.Code(named)))
	}
	base := rc.DefaultBranch
	if base == "" {
		base = baseRepo.GetDefaultBranch()
	}
	if base == "" || pr.GetBase().GetRef() != base {
		return refuse("the PR does not merge into the default branch", fmt.Sprintf("this PR merges into %s, not the default branch %s; "+
			"retarget it first.", mdtext.Code(pr.GetBase().GetRef()), mdtext.Code(base)))
	}
	read := uint64(0)
	var curData Data
	if cur != nil {
		var err error
		if curData, err = decode(cur); err != nil {
			return commands.Result{Err: err} // unreadable: never replaced blind, as if no dispatch had been sent
		}
		if cur.Step == StepDispatched {
			return refuse("an approved run is under way", fmt.Sprintf("the run %s of the approval of %s by %s is still running. Approve "+
				"again once it has finished, or `/approve-sweep cancel` it first.", runWords(curData), mdtext.Code(mdtext.ShortSHA(cur.Head)),
				mdtext.Mention(cur.ActorLogin)))
		}
		if curData.Attempts > 0 {
			return refuse("a dispatch of the approval under way may have made a run", fmt.Sprintf("a dispatch of the approval of %s by %s "+
				"may have started a run that opsbot is still looking for. Approve again once it is found or has ended, or "+
				"`/approve-sweep cancel` it first.", mdtext.Code(mdtext.ShortSHA(cur.Head)), mdtext.Mention(cur.ActorLogin)))
		}
		if strings.EqualFold(cur.Head, head) {
			return refuse("this head is approved already", fmt.Sprintf("%s approved %s already; its run is being dispatched.",
				mdtext.Mention(cur.ActorLogin), mdtext.Code(mdtext.ShortSHA(head))))
		}
		read = cur.Version // an approval of an older head, not dispatched: this one replaces it
	}
	id := h.newID()
	now := h.now()
	appr := record.Approval{ID: id, Repo: in.Repo, PR: in.PR, Head: head, Workflow: rc.External.Workflow, State: record.ApprovalActive,
		ApproverID: in.Actor.ID, ApproverLogin: in.Actor.Login, At: now}
	data := Data{Installation: in.Installation, ID: id, Workflow: rc.External.Workflow, Ref: base, Line: line.Text,
		Trail: []string{fmt.Sprintf("✅ approved head %s (from %s)", mdtext.Code(head), mdtext.Code(headRepo.GetFullName()))}}
	raw, err := json.Marshal(data)
	if err != nil {
		return commands.Result{Err: err}
	}
	s := record.Sequence{Kind: SeqKind, Repo: in.Repo, PR: in.PR, Head: head, Step: StepActive, Data: raw,
		ActorID: in.Actor.ID, ActorLogin: in.Actor.Login, Deadline: now.Add(rc.External.RunTimeout)}
	s.SetOrigin(in.Origin)
	status := h.statusComment(in.Repo, in.PR, in.Installation, &s, data, "⏳ dispatching "+mdtext.Code(rc.External.Workflow)+" next")
	steps := []plan.Step{}
	if cur != nil {
		// The older head's approval, never dispatched (a dispatch whose
		// run may exist is refused above), is replaced.
		ended, err := h.end(cur, curData, StepExpired, "replaced", "replaced by the approval of "+mdtext.Code(head), true)
		if err != nil {
			return commands.Result{Err: err}
		}
		steps = append(steps, ended...)
	}
	steps = append(steps, plan.PutApproval{Approval: appr}, plan.PutSequence{Seq: s, Read: 0, Status: &status, WakeNow: true,
		Audit: commands.AuditOf(in, record.AuditRecord{Kind: record.AuditApproval, Outcome: StepActive, HeadSHA: head,
			Reason: fmt.Sprintf("approved %s of %s; approval %s", head, headRepo.GetFullName(), id)})})
	return commands.Result{Outcome: commands.Accepted, HeadSHA: head, Acknowledges: true,
		Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind, Version: read}}, Steps: steps}}
}

func (h *Handler) newID() string {
	if h.NewID != nil {
		return h.NewID()
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on the platforms opsbot runs on
	}
	return IDPrefix + hex.EncodeToString(b[:])
}

// IDPrefix starts every approval id (state.ApprovalIDIn finds one in a
// run's name).
const IDPrefix = "opsbot-approval-"

// cancel revokes the PR's approval under way (its runs are cancelled on
// GitHub) and every approval of the PR whose run counts: none of their
// runs counts from then on.
func (h *Handler) cancel(ctx context.Context, in commands.Invocation, cur *record.Sequence) commands.Result {
	me := mdtext.Mention(in.Actor.Login)
	why := "revoked by @" + in.Actor.Login
	if h.State == nil {
		return commands.Result{Err: errors.New("approve: no state reader")}
	}
	list, err := h.State.Approvals(in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: err}
	}
	p := plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind}}}
	var said []string
	curID := ""
	if cur != nil {
		data, err := decode(cur)
		if err != nil {
			return commands.Result{Err: err}
		}
		curID = data.ID
		extra := h.cancelRun(ctx, cur, data, false)
		steps, err := h.end(cur, data, StepRevoked, "revoked", why, true)
		if err != nil {
			return commands.Result{Err: err}
		}
		p.Require[0] = plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind, Version: cur.Version}
		p.Steps = append(p.Steps, steps...)
		said = append(said, fmt.Sprintf("revoked the approval of %s by %s under way.%s", mdtext.Code(mdtext.ShortSHA(cur.Head)),
			mdtext.Mention(cur.ActorLogin), extra))
	}
	var names []string
	for _, a := range list {
		if !a.Counts() || a.ID == curID {
			continue
		}
		revoked := a
		revoked.State = record.ApprovalRevoked
		p.Steps = append(p.Steps, plan.PutApproval{Approval: revoked}, plan.Audit{Record: commands.AuditOf(in, record.AuditRecord{
			Kind: record.AuditApproval, Outcome: StepRevoked, RunID: a.RunID, HeadSHA: a.Head,
			Reason: fmt.Sprintf("%s after its run finished (approved by @%s); approval %s", why, a.ApproverLogin, a.ID)})})
		names = append(names, fmt.Sprintf("run %s (head %s, approved by %s)", commands.RunLink(a.RunID, a.RunURL), mdtext.Code(mdtext.ShortSHA(a.Head)),
			mdtext.Mention(a.ApproverLogin)))
	}
	if len(names) > 0 {
		said = append(said, fmt.Sprintf("revoked the approvals of this PR whose runs counted: %s. They count for nothing now.", strings.Join(names, "; ")))
	}
	if len(said) == 0 {
		return commands.Result{Outcome: commands.Accepted, Plan: p, Reply: fmt.Sprintf("%s there is no approval of this PR to revoke.", me)}
	}
	return commands.Result{Outcome: commands.Accepted, Plan: p, Reply: me + " " + strings.Join(said, " Also ")}
}

// cancelRun asks GitHub to cancel the runs of the approval cur holds: the
// bound one (unless keepBound: a run that completed it) and every other
// run opsbot's account made for it (found by its name: a dispatch sent
// twice), and says how it went ("" when there was nothing to cancel).
func (h *Handler) cancelRun(ctx context.Context, cur *record.Sequence, data Data, keepBound bool) string {
	if data.RunID == 0 && data.Attempts == 0 {
		return ""
	}
	repo := cur.Repo
	gh, err := h.Clients(data.Installation)
	if err != nil {
		return h.cancelFailed(repo, data, err)
	}
	type target struct {
		id  int64
		url string
	}
	var ids []target
	if data.RunID != 0 && !keepBound {
		ids = append(ids, target{data.RunID, data.RunURL})
	}
	if data.Attempts > 0 {
		found, err := h.runsByName(ctx, gh, cur, data)
		if err != nil {
			return h.cancelFailed(repo, data, err)
		}
		for _, run := range found {
			if run.GetID() != data.RunID && run.GetStatus() != "completed" {
				ids = append(ids, target{run.GetID(), run.GetHTMLURL()})
			}
		}
	}
	var links []string
	for _, t := range ids {
		if err := gh.CancelRun(ctx, repo, t.id); err != nil {
			return h.cancelFailed(repo, data, err)
		}
		links = append(links, commands.RunLink(t.id, t.url))
	}
	switch {
	case len(links) > 0 && keepBound:
		return fmt.Sprintf(" GitHub was asked to cancel the other runs dispatched for it (%s).", strings.Join(links, ", "))
	case len(links) > 0:
		return fmt.Sprintf(" Its run %s counts for nothing, and GitHub was asked to cancel it.", strings.Join(links, ", "))
	case keepBound || data.RunID != 0 || (data.Pending && data.Attempts == 1):
		return ""
	}
	return fmt.Sprintf(" Its dispatch's run was not found yet: a run of %s named %s may still start; it counts for nothing, "+
		"cancel it on GitHub if it does.", mdtext.Code(data.Workflow), mdtext.Code(data.ID))
}

func (h *Handler) cancelFailed(repo string, data Data, err error) string {
	h.log().Warn("cancelling an approval's run failed", "repo", repo, "approval", data.ID, "run", data.RunID, "err", err)
	run := "Its run"
	if data.RunID != 0 {
		run += " " + commands.RunLink(data.RunID, data.RunURL)
	}
	return fmt.Sprintf(" %s counts for nothing; GitHub did not cancel it (%s): cancel it there to free the runners.", run, mdtext.Text(err.Error()))
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

func decode(s *record.Sequence) (Data, error) { return seq.DataOf[Data](s) }

func mustData(s *record.Sequence) Data {
	d, _ := decode(s)
	return d
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// end closes the approval in state to (a step that is done): the status
// comment says why (Markdown of opsbot's words and escaped values), the
// record takes the state, the audit keeps it, and (tell) a comment of its
// own notifies the PR.
func (h *Handler) end(cur *record.Sequence, data Data, to, code, why string, quiet bool) ([]plan.Step, error) {
	next := *cur
	next.Step, next.Done, next.Why, next.WakeAt = to, true, code+": "+why, time.Time{}
	icon := map[string]string{StepCompleted: "🎉", StepFailed: "❌", StepExpired: "⌛", StepRevoked: "⛔"}[to]
	data.Trail = append(data.Trail, icon+" "+to+": "+why)
	next.Data, _ = json.Marshal(data) // plain fields: cannot fail
	edit := h.statusEdit(&next, data, "")
	rec := record.AuditRecord{Kind: record.AuditApproval, Outcome: to, Repo: cur.Repo, PR: cur.PR, RunID: data.RunID, HeadSHA: cur.Head,
		ActorID: cur.ActorID, ActorLogin: cur.ActorLogin, Reason: code + ": " + mdtext.Plain(mdtext.Parse(why)) + "; approval " + data.ID}
	rec.SetOrigin(cur.Origin())
	steps := []plan.Step{plan.PutSequence{Seq: next, Read: cur.Version, Edit: &edit, Audit: rec}}
	if h.State == nil {
		return nil, errors.New("approve: no state reader")
	}
	a, err := h.State.Approval(cur.Repo, data.ID)
	if err != nil {
		return nil, fmt.Errorf("reading approval %s of %s#%d: %w", data.ID, cur.Repo, cur.PR, err)
	}
	if a == nil {
		return nil, fmt.Errorf("approve: approval %s of %s#%d is not recorded", data.ID, cur.Repo, cur.PR)
	}
	a.State = record.ApprovalState(to)
	a.RunID, a.RunURL, a.RunAttempt = data.RunID, data.RunURL, data.RunAttempt
	steps = append([]plan.Step{plan.PutApproval{Approval: *a}}, steps...)
	if !quiet {
		steps = append(steps, plan.Comment{Repo: cur.Repo, PR: cur.PR, Installation: data.Installation, Kind: string(notices.KindApproval),
			Body:  fmt.Sprintf("%s %s %s: %s.", icon, mdtext.Mention(cur.ActorLogin), endWords(to, mdtext.Code(mdtext.ShortSHA(cur.Head))), why),
			Links: plan.Links{PR: h.Notices.Web.PR(cur.Repo, cur.PR), Comment: cur.OriginURL, Run: data.RunURL}})
	}
	return steps, nil
}

// endWords says to the approver how their approval of head ended.
func endWords(to, head string) string {
	switch to {
	case StepCompleted:
		return "the external sweep of " + head + " you approved finished"
	case StepFailed:
		return "the external sweep of " + head + " you approved failed"
	case StepExpired:
		return "your approval of " + head + " expired"
	}
	return "your approval of " + head + " was revoked"
}

// statusComment is the approval's status comment: what happened, then now.
func (h *Handler) statusComment(repo string, pr int, inst int64, s *record.Sequence, data Data, now string) plan.Comment {
	return plan.Comment{Repo: repo, PR: pr, Installation: inst, Kind: string(notices.KindApproval),
		Body: statusText(s, data, now), Links: plan.Links{PR: h.Notices.Web.PR(repo, pr), Comment: s.OriginURL, Run: data.RunURL}}
}

func (h *Handler) statusEdit(s *record.Sequence, data Data, now string) plan.Edit {
	return plan.Edit{Repo: s.Repo, PR: s.PR, Installation: data.Installation, Kind: string(notices.KindApproval),
		Body: statusText(s, data, now), Links: plan.Links{PR: h.Notices.Web.PR(s.Repo, s.PR), Comment: s.OriginURL, Run: data.RunURL}}
}

func statusText(s *record.Sequence, data Data, now string) string {
	return seq.Status{Title: fmt.Sprintf("🔐 **External sweep**, approved by %s for head %s (%s):", mdtext.Mention(s.ActorLogin),
		mdtext.Code(mdtext.ShortSHA(s.Head)), mdtext.Code(data.Workflow)), Trail: data.Trail, Now: now}.Text()
}

func runWords(d Data) string {
	if d.RunID == 0 {
		return "(not found yet)"
	}
	return commands.RunLink(d.RunID, d.RunURL)
}

// wake steps the approval the engine read (w.Seq, at the version that was
// due): it re-reads the PR (and its run) and acts only while they match
// what was approved.
func (h *Handler) wake(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	cur, data := s.Seq, s.Data
	if rc.External.Workflow != data.Workflow {
		// A reload removed (or changed) the external workflow: nothing is
		// dispatched for it any more, and a run it made counts for nothing.
		extra := h.cancelRun(ctx, cur, data, false)
		now := "no workflow for external PRs is configured any more"
		if rc.External.Workflow != "" {
			now = "the workflow for external PRs is " + mdtext.Code(rc.External.Workflow) + " now"
		}
		why := fmt.Sprintf("the repository's configuration changed: %s, not %s", now, mdtext.Code(data.Workflow))
		if extra != "" {
			why += "." + strings.TrimSuffix(extra, ".")
		}
		steps, err := h.end(cur, data, StepExpired, "unconfigured", why, false)
		return "approval-unconfigured", plan.Plan{Steps: steps}, err
	}
	st := &stepper{ctx: ctx, h: h, rc: rc, cur: cur, data: data, now: s.Now, w: s.Wakeup}
	steps, out, err := st.read(ctx)
	return out, plan.Plan{Steps: steps}, err
}

// expire ends the approval at its deadline (run_timeout), whatever it
// waits for: a run dispatched for it counts for nothing now, and is
// cancelled to free the runners.
func (h *Handler) expire(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	cur, data := s.Seq, s.Data
	what := "it was not dispatched"
	if cur.Step == StepDispatched {
		what = fmt.Sprintf("its run %s did not finish", runWords(data))
	}
	extra := h.cancelRun(ctx, cur, data, false)
	steps, err := h.end(cur, data, StepExpired, "timeout", fmt.Sprintf("%s within %s of the approval.%s", what,
		commands.Span(rc.External.RunTimeout), strings.TrimSuffix(extra, ".")), false)
	return "approval-timeout", plan.Plan{Steps: steps}, err
}

// stepper is one wake-up of an approval.
type stepper struct {
	ctx  context.Context
	h    *Handler
	rc   *config.Repo
	gh   GitHub
	cur  *record.Sequence
	data Data
	pr   *github.PullRequest
	now  time.Time
	// w is the wake-up: a dispatch goes through it (seq.Wakeup.Send).
	w seq.Wakeup
}

func (st *stepper) read(ctx context.Context) ([]plan.Step, string, error) {
	var err error
	if st.gh, err = st.h.Clients(st.data.Installation); err != nil {
		return nil, "", err
	}
	if st.pr, err = st.gh.PullRequest(ctx, st.cur.Repo, st.cur.PR); err != nil {
		return nil, "", err
	}
	if st.cur.Step == StepDispatched {
		return st.dispatched(ctx)
	}
	return st.active(ctx)
}

// wait sleeps for after, saying now in the status comment when the trail
// or the step changed.
func (st *stepper) wait(step, now string, after time.Duration, out string) ([]plan.Step, string, error) {
	was := mustData(st.cur)
	st.data.Now = now
	ps, err := seq.Waiting{Cur: st.cur, Step: step, WakeAt: st.now.Add(after), Data: st.data,
		Is: seq.Status{Trail: st.data.Trail, Now: now}, Was: seq.Status{Trail: was.Trail, Now: was.Now},
		Edit: func(next *record.Sequence) plan.Edit { return st.h.statusEdit(next, st.data, now) },
		Audit: record.AuditRecord{Kind: record.AuditApproval, RunID: st.data.RunID, HeadSHA: st.cur.Head,
			Reason: mdtext.Plain(mdtext.Parse(lastLine(st.data.Trail))) + "; approval " + st.data.ID}}.Put()
	if err != nil {
		return nil, "", err
	}
	return []plan.Step{ps}, out, nil
}

// lastLine is the trail's newest line ("": none).
func lastLine(trail []string) string {
	if len(trail) == 0 {
		return ""
	}
	return trail[len(trail)-1]
}

func (st *stepper) ended(to, code, why string) ([]plan.Step, string, error) {
	switch code {
	case "dispatch_refused", "run_gone":
		// Never made, or gone: nothing runs.
	default:
		// A run dispatched for it counts for nothing (one that completed
		// it aside): free the runners.
		why += strings.TrimSuffix(st.h.cancelRun(context.WithoutCancel(st.ctx), st.cur, st.data, code == "completed"), ".")
	}
	steps, err := st.h.end(st.cur, st.data, to, code, why, false)
	return steps, "approval-" + to + "-" + code, err
}

// active dispatches the approved head's sweep, once the PR still has that
// head and GitHub has its merge commit.
func (st *stepper) active(ctx context.Context) ([]plan.Step, string, error) {
	cur, pr := st.cur, st.pr
	head := strings.ToLower(pr.GetHead().GetSHA())
	switch {
	case pr.GetState() != "open":
		return st.ended(StepExpired, "closed", "the PR was closed before the sweep was dispatched")
	case head != cur.Head:
		return st.ended(StepExpired, "pushed", fmt.Sprintf("a push (head %s) came before the sweep was dispatched; approve the new head "+
			"once you have read it", mdtext.Code(mdtext.ShortSHA(head))))
	case pr.GetBase().GetRef() != st.data.Ref:
		return st.ended(StepExpired, "retargeted", fmt.Sprintf("the PR now merges into %s, not %s", mdtext.Code(pr.GetBase().GetRef()),
			mdtext.Code(st.data.Ref)))
	}
	if pr.Mergeable == nil {
		return st.wait(StepActive, "⏳ GitHub is still making the PR's merge commit", Poll, "approval-waiting-merge-commit")
	}
	if !pr.GetMergeable() {
		return st.ended(StepFailed, "conflict", "the PR has conflicts with its base, so GitHub has no merge commit to sweep; resolve them, "+
			"then approve the new head")
	}
	merge := strings.ToLower(pr.GetMergeCommitSHA())
	if merge == "" {
		// GitHub has not made the merge commit yet: nothing to read.
		return st.wait(StepActive, "⏳ GitHub is still making the merge commit of the approved head", Poll, "approval-waiting-merge-commit")
	}
	cm, err := st.gh.CommitInfo(ctx, cur.Repo, merge)
	if err != nil && !errors.Is(err, ghclient.ErrNotFound) {
		return nil, "", err
	}
	if err != nil || len(cm.Parents) != 2 || !strings.EqualFold(cm.Parents[1], cur.Head) {
		// GitHub's merge commit is of an older head: it is making the new one.
		return st.wait(StepActive, "⏳ GitHub is still making the merge commit of the approved head", Poll, "approval-waiting-merge-commit")
	}
	st.data.MergeSHA = merge
	// A dispatch that may have been sent (its answer lost to a timeout,
	// a crash, an error) may have made its run: it is looked for by its
	// name before another is sent.
	if st.data.Attempts > 0 {
		found, err := st.runsByName(ctx)
		if err != nil {
			return nil, "", err
		}
		if len(found) > 0 {
			return st.bound(found[0].GetID(), found[0].GetHTMLURL(), "found by its name after a dispatch whose answer was lost")
		}
	}
	switch {
	case st.data.Pending && st.h.acts.Fresh(st.data.Mark) && st.now.Sub(st.data.Dispatched) <= PendingGrace:
		return st.send(ctx)
	case st.data.Pending && st.h.acts.Fresh(st.data.Mark):
		// This process's mark, never sent, but old (steps that yielded, a
		// backlog): marked anew, so a crash after the send finds a mark
		// whose time is the send's, and looks for its run long enough.
		st.data.Dispatched, st.data.Mark = st.now, st.h.acts.New()
		return st.wait(StepActive, "⏳ dispatching "+mdtext.Code(st.data.Workflow)+" now", 0, "approval-dispatch-marked-again")
	case st.data.Attempts > 0 && st.now.Sub(st.data.Dispatched) < FindWait:
		return st.wait(StepActive, fmt.Sprintf("⏳ GitHub did not answer the dispatch: looking for its run by its name (until %s)",
			st.data.Dispatched.Add(FindWait).UTC().Format("15:04 UTC")), Poll, "approval-finding-run")
	case st.data.Attempts >= MaxAttempts:
		return st.ended(StepFailed, "dispatch_lost", fmt.Sprintf("GitHub answered none of %d dispatches, and no run of %s by opsbot's "+
			"account carries the approval's id %s", st.data.Attempts, mdtext.Code(st.data.Workflow), mdtext.Code(st.data.ID)))
	}
	// The dispatch is marked before it is sent, in a write of its own: a
	// crash after the send finds its run by its name at the next wake-up
	// instead of sending another.
	st.data.Attempts++
	st.data.Dispatched, st.data.Pending, st.data.Mark = st.now, true, st.h.acts.New()
	return st.wait(StepActive, "⏳ dispatching "+mdtext.Code(st.data.Workflow)+" now", 0, "approval-dispatching")
}

// PendingGrace is how long this process sends a dispatch it marked. A
// mark older than that, never sent, is marked anew first: the time a
// lost dispatch's run is looked for from is then the send's.
const PendingGrace = time.Minute

// MaxAttempts bounds the dispatches of one approval that GitHub did not
// answer (each followed by FindWait of looking for its run).
const MaxAttempts = 3

// send dispatches the workflow for the marked attempt: once, in the
// process that marked it, and only when nothing that may stop the approval
// waits for the PR.
func (st *stepper) send(ctx context.Context) ([]plan.Step, string, error) {
	cur := st.cur
	inputs := map[string]string{"pr-number": fmt.Sprint(cur.PR), "head-sha": cur.Head, "merge-sha": st.data.MergeSHA, "approval-id": st.data.ID}
	var got ghclient.DispatchedRun
	a, stop := st.w.Send(ctx, seq.Act{Mark: st.data.Mark, Do: func(ctx context.Context) (err error) {
		got, err = st.gh.DispatchWorkflow(ctx, cur.Repo, st.data.Workflow, st.data.Ref, inputs, !st.data.NoDetails)
		if errors.Is(err, ghclient.ErrNoRunDetails) {
			// Refused before anything ran: this GitHub names no run in
			// its answer, so it is asked as one that does not.
			st.data.NoDetails = true
			got, err = st.gh.DispatchWorkflow(ctx, cur.Repo, st.data.Workflow, st.data.Ref, inputs, false)
		}
		return err
	}, Verify: func(ctx context.Context) (seq.Shown, error) {
		// A run by opsbot's account whose name carries the approval's id
		// is the dispatch's; none yet: GitHub may list it later.
		found, err := st.runsByName(ctx)
		if err != nil || len(found) == 0 {
			return seq.NotShown, err
		}
		got = ghclient.DispatchedRun{ID: found[0].GetID(), URL: found[0].GetHTMLURL()}
		return seq.ShownTaken, nil
	}})
	if stop != nil {
		return nil, "", stop // a cancel or a push waits, or the step ended (opsbot stopping, its time up): the next step finds the mark, and looks for the run first
	}
	st.data.Pending = false
	err := a.Err
	if a.Unclear() && a.Taken() {
		return st.bound(got.ID, got.URL, "found by its name after a dispatch whose answer was lost")
	}
	var ref *ghclient.Refusal
	if errors.As(err, &ref) {
		words := "GitHub refused to dispatch it"
		switch {
		case ref.Dry():
			words = "opsbot did not dispatch it"
		case ref.Status == 404:
			words = "GitHub did not find the workflow " + mdtext.Code(st.data.Workflow) + " on " + mdtext.Code(st.data.Ref)
		}
		return st.ended(StepFailed, "dispatch_refused", fmt.Sprintf("%s (%d: %s)", words, ref.Status, mdtext.Text(ref.Message)))
	}
	if err != nil {
		// Whether GitHub made a run is not known: it is looked for by its
		// name for FindWait before another dispatch.
		st.h.log().Warn("a dispatch of an approved sweep got no answer; looking for its run by its name", "repo", cur.Repo, "pr", cur.PR,
			"approval", st.data.ID, "err", err)
		st.data.Dispatched = st.now
		return st.wait(StepActive, fmt.Sprintf("⏳ GitHub did not answer the dispatch: looking for its run by its name (until %s)",
			st.now.Add(FindWait).UTC().Format("15:04 UTC")), Poll, "approval-dispatch-unanswered")
	}
	if got.ID != 0 {
		return st.bound(got.ID, got.URL, "")
	}
	// Where GitHub does not answer the run's id, the run is the one
	// opsbot's account made whose name carries the approval's id.
	st.data.Trail = append(st.data.Trail, fmt.Sprintf("🚀 dispatched %s on %s for merge commit %s; GitHub named no run, so it is "+
		"found by its name", mdtext.Code(st.data.Workflow), mdtext.Code(st.data.Ref), mdtext.Code(mdtext.ShortSHA(st.data.MergeSHA))))
	return st.wait(StepDispatched, "⏳ looking for the dispatched run", Poll, "approval-dispatched")
}

// bound binds the run to the approval and waits for it to finish.
func (st *stepper) bound(id int64, url, how string) ([]plan.Step, string, error) {
	if url == "" {
		url = st.h.Notices.Web.Run(st.cur.Repo, id)
	}
	st.data.RunID, st.data.RunURL = id, url
	line := fmt.Sprintf("🚀 dispatched %s on %s for merge commit %s: run %s", mdtext.Code(st.data.Workflow), mdtext.Code(st.data.Ref),
		mdtext.Code(mdtext.ShortSHA(st.data.MergeSHA)), commands.RunLink(id, url))
	if how != "" {
		line += " (" + how + ")"
	}
	if st.cur.Step == StepDispatched {
		line = fmt.Sprintf("🔗 found the dispatched run %s by its name", commands.RunLink(id, url))
	}
	st.data.Trail = append(st.data.Trail, line)
	steps, out, err := st.wait(StepDispatched, "⏳ waiting for the run to finish", RunPoll, "approval-bound")
	if err != nil {
		return nil, "", err
	}
	a, err := st.h.State.Approval(st.cur.Repo, st.data.ID)
	if err != nil {
		return nil, "", err
	}
	if a == nil {
		return nil, "", fmt.Errorf("approve: approval %s of %s#%d is not recorded", st.data.ID, st.cur.Repo, st.cur.PR)
	}
	a.State, a.RunID, a.RunURL = record.ApprovalDispatched, id, url
	return append([]plan.Step{plan.PutApproval{Approval: *a}}, steps...), out, nil
}

// runsByName are the runs opsbot's account made for this approval on its
// workflow since the approval, newest first: their name carries the
// approval's id (the workflow's run-name). Never a run found by its time
// alone; runs others dispatch are not even listed.
func (st *stepper) runsByName(ctx context.Context) ([]*github.WorkflowRun, error) {
	return st.h.runsByName(ctx, st.gh, st.cur, st.data)
}

func (h *Handler) runsByName(ctx context.Context, gh GitHub, cur *record.Sequence, data Data) ([]*github.WorkflowRun, error) {
	var selfID int64
	var selfLogin string
	if h.Self != nil {
		selfID, selfLogin = h.Self()
	}
	if selfID == 0 || selfLogin == "" {
		return nil, errors.New("approve: opsbot's own account is not known yet")
	}
	wf, err := gh.WorkflowID(ctx, cur.Repo, data.Workflow)
	if errors.Is(err, ghclient.ErrNotFound) {
		return nil, nil // no such workflow: no run of it either (its dispatch says so)
	}
	if err != nil {
		return nil, err
	}
	list, err := gh.DispatchedRuns(ctx, cur.Repo, wf, data.Ref, selfLogin, cur.Started.Add(-time.Minute), 300)
	if err != nil {
		return nil, err
	}
	var out []*github.WorkflowRun
	for _, run := range list {
		if run.GetTriggeringActor().GetID() != selfID && run.GetActor().GetID() != selfID {
			continue
		}
		if strings.Contains(run.GetDisplayTitle(), data.ID) && run.GetWorkflowID() == wf {
			out = append(out, run)
		}
	}
	return out, nil
}

// dispatched waits for the approval's run (finding it first when GitHub
// did not name it) and ends the approval when it finishes.
func (st *stepper) dispatched(ctx context.Context) ([]plan.Step, string, error) {
	if st.data.RunID == 0 {
		found, err := st.runsByName(ctx)
		if err != nil {
			return nil, "", err
		}
		if len(found) > 0 {
			return st.bound(found[0].GetID(), found[0].GetHTMLURL(), "")
		}
		if st.now.Sub(st.data.Dispatched) > FindWait {
			return st.ended(StepFailed, "run_not_found", fmt.Sprintf("no run of %s by opsbot's account carries the approval's id %s "+
				"%s after the dispatch: does the workflow's `run-name` show the `approval-id` input?", mdtext.Code(st.data.Workflow),
				mdtext.Code(st.data.ID), commands.Span(FindWait)))
		}
		return st.wait(StepDispatched, "⏳ looking for the dispatched run", Poll, "approval-finding-run")
	}
	if head := strings.ToLower(st.pr.GetHead().GetSHA()); head != st.cur.Head && head != st.data.Pushed {
		st.data.Pushed = head
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("ℹ️ a push (head %s) came after the dispatch: the run measures the approved "+
			"head %s only", mdtext.Code(mdtext.ShortSHA(head)), mdtext.Code(mdtext.ShortSHA(st.cur.Head))))
	}
	run, err := st.gh.Run(ctx, st.cur.Repo, st.data.RunID)
	if errors.Is(err, ghclient.ErrNotFound) {
		return st.ended(StepFailed, "run_gone", fmt.Sprintf("the run %s is gone from GitHub", runWords(st.data)))
	}
	if err != nil {
		return nil, "", err
	}
	if run.GetStatus() != "completed" {
		return st.wait(StepDispatched, "⏳ waiting for the run to finish", RunPoll, "approval-waiting-run")
	}
	if c := run.GetConclusion(); c != "success" {
		return st.ended(StepFailed, "run_failed", fmt.Sprintf("the run %s concluded %s", runWords(st.data), mdtext.Code(c)))
	}
	arts, err := st.gh.Artifacts(ctx, st.cur.Repo, st.data.RunID)
	if err != nil {
		return nil, "", err
	}
	found := false
	for _, a := range arts {
		found = found || (!a.GetExpired() && runs.MatchAny(st.rc.ResultArtifacts, a.GetName()))
	}
	if !found {
		return st.ended(StepFailed, "no_results", fmt.Sprintf("the run %s uploaded no result artifacts (%s)", runWords(st.data),
			mdtext.CodeList(st.rc.ResultArtifacts)))
	}
	st.data.RunAttempt = run.GetRunAttempt()
	steps, out, err := st.ended(StepCompleted, "completed", fmt.Sprintf("the run %s succeeded with its results: it counts as this PR's sweep of %s. "+
		"`/reuse-sweep-run %d` pins it for the next push (within the allowed paths), and `/merge-with-reuse %d` merges with it",
		runWords(st.data), mdtext.Code(mdtext.ShortSHA(st.cur.Head)), st.data.RunID, st.data.RunID))
	if err != nil {
		return nil, "", err
	}
	// The run is the approved head's own sweep: opsbot/reuse-ready reads it
	// (and the push gate, with main_sweeps: false, takes it at the merge).
	repo, pr, head, id, url, at, inst := st.cur.Repo, st.cur.PR, st.cur.Head, st.data.RunID, st.data.RunURL, run.GetUpdatedAt().Time, st.data.Installation
	steps = append(steps, plan.Notice{Fn: func(tx record.Tx) error {
		info, err := tx.PRInfo(repo, pr)
		if err != nil || info == nil {
			return err
		}
		info.SweepSHA, info.SweepRun, info.SweepConclusion, info.SweepURL, info.SweepAt = head, id, "success", url, at
		if err := tx.PutPRInfo(info); err != nil {
			return err
		}
		if !strings.EqualFold(info.HeadSHA, head) || info.State == "closed" {
			return nil
		}
		// One click to reuse it, as for any finished sweep (a GitHub App's
		// check run on the head).
		actions := st.h.offer()
		return st.h.Notices.CheckRun(tx, repo, pr, inst, head, "neutral", fmt.Sprintf("Approved sweep run %d finished: it can be reused", id),
			fmt.Sprintf("The sweep a maintainer approved for this head finished: run %s. %s A click runs as the one who clicks, "+
				"with its command's role check.", mdtext.Link(fmt.Sprint(id), url), notices.ActionsText(actions)),
			id, actions)
	}})
	return steps, out, nil
}

// TakeBack revokes the PR's approval under way when ch's comment made it
// and the comment was deleted or its command edited away, if the one who
// did it may (the comment's author, or the command's role); otherwise the
// approval goes on, audited.
func (h *Handler) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	t, err := commands.TakeBackOf(env, ch, SeqKind, func(d Data) string { return d.Line })
	if err != nil || t == nil {
		return plan.Plan{}, err
	}
	cur, data := t.Cur, t.Data
	if p, kept, err := t.Kept(ctx, env, ch, "approved @"+cur.ActorLogin+"'s sweep", "revoking it", "it stands",
		record.AuditRecord{Kind: record.AuditApproval, RunID: data.RunID, HeadSHA: cur.Head}); err != nil || kept {
		return p, err
	}
	extra := h.cancelRun(ctx, cur, data, false)
	steps, err := h.end(cur, data, StepRevoked, "taken_back", fmt.Sprintf("%s %s that approved it.%s", t.Who, t.Did, strings.TrimSuffix(extra, ".")), false)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Plan{Require: []plan.Fact{t.Guard}, Steps: steps}, nil
}
