// Package merge is /merge-with-reuse: a maintainer lands a swept PR in one
// command. opsbot pins the run (as /reuse-sweep-run does), brings the
// branch up to date with its base when it is behind (the push that makes is
// the one the pin covers, so its sweep is skipped), waits for the head's
// checks and merges that exact head with the configured method. It is a
// sequence (package seq): each step is a wake-up that re-reads the PR and
// its checks from GitHub and acts only while they still match, naming the
// head it expects so GitHub refuses a stale act. Nothing is bypassed: a
// review or check that branch protection wants stops the merge, said why.
package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
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
	Name    = "merge-with-reuse"
	SeqKind = "merge"
	Usage   = "usage: /merge-with-reuse [<run-id or run URL>] | /merge-with-reuse cancel"
)

// The steps of a merge sequence.
const (
	StepPinned   = "pinned"         // the run is pinned; the branch is looked at next
	StepUpdating = "updating"       // update-branch was asked; its push is awaited
	StepChecks   = "waiting_checks" // the decided head's checks are awaited
	StepQueued   = "queued"         // the decided head is in the base branch's merge queue
	StepLeaving  = "leaving_queue"  // stopped (cancelled, taken back) while the PR may be queued: taking it out
	StepMerged   = "merged"
	StepStopped  = "stopped"
)

// Poll is how long a waiting merge sleeps before it reads GitHub again when
// no event wakes it sooner (a completed check, a push, a close).
const Poll = 30 * time.Second

// UpdateWait is how long a merge waits for the push update-branch makes
// (GitHub makes it shortly after it answers) before it gives up.
const UpdateWait = 10 * time.Minute

// GitHub is what a merge reads and does on GitHub (ghclient.Client).
type GitHub interface {
	PullRequest(ctx context.Context, repo string, n int) (*github.PullRequest, error)
	UpdateBranch(ctx context.Context, repo string, n int, expectedHead string) error
	MergePR(ctx context.Context, repo string, n int, sha, method string) (string, error)
	HeadChecks(ctx context.Context, repo, sha string) ([]ghclient.Check, error)
	CommitInfo(ctx context.Context, repo, sha string) (ghclient.Commit, error)
	BranchHead(ctx context.Context, repo, branch string) (string, error)
	// The conflict merge's (conflicted.go): reads, objects nothing points
	// at, and the branch moved forward.
	Compare(ctx context.Context, repo, base, head string) (ghclient.Comparison, error)
	Blob(ctx context.Context, repo, sha string) ([]byte, error)
	Tree(ctx context.Context, repo, sha string) (map[string]ghclient.TreeEntry, error)
	CreateTree(ctx context.Context, repo, base string, changes []ghclient.TreeChange) (string, error)
	CreateCommit(ctx context.Context, repo, message, tree string, parents []string) (string, error)
	MoveBranchFrom(ctx context.Context, repoNode, branch, from, sha string) error
	CreateBranch(ctx context.Context, repo, branch, sha string) error
	DeleteBranch(ctx context.Context, repo, branch string) error
	DeleteBranchAt(ctx context.Context, repoNode, branch, at string) error
	BranchesWithPrefix(ctx context.Context, repo, prefix string) (map[string]string, error)
	MergeInto(ctx context.Context, repo, base, head, message string) (string, error)
	// The merge queue's (queued.go): the base branch's rules, and the PR
	// added to, taken out of and read in its queue.
	BranchRules(ctx context.Context, repo, branch string) ([]string, error)
	Enqueue(ctx context.Context, nodeID, expectedHead string) error
	Dequeue(ctx context.Context, nodeID string) error
	QueueEntryOf(ctx context.Context, repo string, n int) (ghclient.QueueEntry, error)
}

// Pinner pins a run as /reuse-sweep-run does (reuse.Handler).
type Pinner interface {
	Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result
}

// Handler runs /merge-with-reuse and steps its sequences.
type Handler struct {
	Pins    Pinner
	Clients func(installation int64) (GitHub, error)
	// State reads opsbot's state (the store): the PR's merge sequence,
	// its active pin (a merge that stops revokes the pin it took while no
	// push has used it), the decisions of its heads.
	State   commands.State
	Notices *notices.Notifier
	// AppID is opsbot's GitHub App (0: a token): its own check run on a
	// head is not one of the head's checks.
	AppID int64
	Log   *slog.Logger
	Now   func() time.Time

	acts *seq.Marks // the engine's act marks (commands.Deps.Acts): the updates and merges this process marked
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Data is a merge sequence's own state.
type Data struct {
	Installation int64  `json:"installation"`
	Method       string `json:"method"`
	RunID        int64  `json:"run_id"`
	RunURL       string `json:"run_url,omitempty"`
	// Line is the command as written: editing it away stops the merge.
	Line string `json:"line,omitempty"`
	// Decided is the head the merge is for: the push the pin covered, or
	// the head itself when the branch was up to date.
	Decided string `json:"decided,omitempty"`
	// Base is the default branch, which the PR merged into when the
	// command ran: a PR retargeted since is not merged.
	Base string `json:"base,omitempty"`
	// UpdateMark marks the branch update about to be asked (seq.Marks);
	// UpdateAsked is when it was marked, then asked.
	UpdateMark  string    `json:"update_mark,omitempty"`
	UpdateAsked time.Time `json:"update_asked,omitzero"`
	// UpdateBase is the base's tip the update merges, as the pin records it.
	UpdateBase string `json:"update_base,omitempty"`
	// Undone is opsbot's commit of the head without its changes to the
	// append-only files, made for UndoneFor (head..tip) when both sides
	// changed other files too: GitHub merges the rest on a temporary branch
	// at it, noted in the record (Left) before it is made; BranchMark marks
	// its making in this process (one made before a restart, or tried, is
	// deleted first: it may be there).
	Undone     string `json:"undone,omitempty"`
	UndoneFor  string `json:"undone_for,omitempty"`
	BranchMark string `json:"branch_mark,omitempty"`
	// Built is the merge opsbot made of a branch that conflicted with its
	// base (conflicted.go), for the head BuiltFor, with the tree BuiltTree,
	// merging BuiltFiles by the append-only rule; the update's mark and
	// base are its too.
	Built      string   `json:"built,omitempty"`
	BuiltFor   string   `json:"built_for,omitempty"`
	BuiltTree  string   `json:"built_tree,omitempty"`
	BuiltFiles []string `json:"built_files,omitempty"`
	// PinID is the merge's own pin, read at its first step: only a skip on
	// it is the update's, and only it lets the head merge.
	PinID uint64 `json:"pin_id,omitempty"`
	// MergeMark marks the merge about to be asked, of Decided; MergeAsked
	// is when it was marked or asked; MergeTries counts the marks.
	MergeMark   string    `json:"merge_mark,omitempty"`
	MergeAsked  time.Time `json:"merge_asked,omitzero"`
	MergeTries  int       `json:"merge_tries,omitempty"`
	MergeCommit string    `json:"merge_commit,omitempty"`
	// Queue is a base branch that takes its merges through GitHub's merge
	// queue: the merge's act adds the decided head to it (its mark is
	// MergeMark's). QueueGroup is the last group of the PR the status
	// comment told.
	// EnqueueAt is when the merge first marked its enqueue: the queue's
	// events before it are an earlier merge's. QueueGone is when the PR
	// was first found out of the queue unmerged, with no word why.
	// AddedBefore is how many times GitHub's timeline shows the PR added
	// to a merge queue before this merge marked its enqueue.
	AddedBefore int `json:"added_before,omitempty"`
	// LeaveCode and LeaveWhy are the stop a merge in StepLeaving ends with
	// once its PR is out of the merge queue.
	LeaveCode  string    `json:"leave_code,omitempty"`
	LeaveWhy   string    `json:"leave_why,omitempty"`
	Queue      bool      `json:"queue,omitempty"`
	QueueGroup string    `json:"queue_group,omitempty"`
	EnqueueAt  time.Time `json:"enqueue_at,omitzero"`
	QueueGone  time.Time `json:"queue_gone,omitzero"`
	// Now is what the status comment last said is happening.
	Now string `json:"now,omitempty"`
	// Trail is what the status comment says happened, a line a step.
	Trail []string `json:"trail"`
}

// DefaultChecksTimeout is how long a merge waits for the checks when the
// configuration does not say.
const DefaultChecksTimeout = 2 * time.Hour

// DefaultMinRole is who may merge when the configuration does not say:
// merging is a maintainer's act.
const DefaultMinRole = "maintain"

// Settings is repos[].merge, the command's own section of the
// configuration.
type Settings struct {
	config.Access `yaml:",inline"`
	// Method is how the PR is merged: squash, merge or rebase.
	Method string `yaml:"method"`
	// ChecksTimeout is how long the merge waits for the head's checks.
	ChecksTimeout time.Duration `yaml:"checks_timeout"`
	// AppendOnly are the files (globs) a branch that conflicts with its
	// base may conflict in and still be merged by opsbot: by the
	// changelog's append-only rule ([] turns the conflict merge off).
	AppendOnly []string `yaml:"append_only"`
	// LinkRepo is the repository the changelog's pr-link names
	// (https://github.com/LinkRepo/pull/N); "" is the repository itself.
	LinkRepo string `yaml:"link_repo"`
}

// DefaultAppendOnly is the benchmark repository's append-only changelog.
var DefaultAppendOnly = []string{"perf-changelog.yaml"}

// Section is repos[].merge: its type, defaults and checks, beside the
// handler that reads it (registered by the server's wiring).
var Section = config.Typed[Settings]{
	Key: "merge",
	Defaults: func(s *Settings) {
		if s.MinRole == "" {
			s.MinRole = DefaultMinRole
		}
		if s.Method == "" {
			s.Method = "squash"
		}
		if s.ChecksTimeout == 0 {
			s.ChecksTimeout = DefaultChecksTimeout
		}
		if s.AppendOnly == nil {
			s.AppendOnly = append([]string(nil), DefaultAppendOnly...)
		}
	},
	Check: func(_ *config.Repo, s *Settings) []config.SectionProblem {
		var out []config.SectionProblem
		switch s.Method {
		case "squash", "merge", "rebase":
		default:
			out = append(out, config.SectionProblem{Key: "method", Message: fmt.Sprintf("%q is not a merge method (squash, merge or rebase)", s.Method)})
		}
		if s.LinkRepo != "" && strings.Count(s.LinkRepo, "/") != 1 || strings.ContainsAny(s.LinkRepo, " \t\n?#") {
			out = append(out, config.SectionProblem{Key: "link_repo", Message: fmt.Sprintf("%q is not OWNER/REPO", s.LinkRepo)})
		}
		if s.ChecksTimeout < time.Minute || s.ChecksTimeout > 7*24*time.Hour {
			out = append(out, config.SectionProblem{Key: "checks_timeout",
				Message: fmt.Sprintf("%v is out of range: how long a merge waits for the head's checks, from 1m to 168h (for example 2h)", s.ChecksTimeout)})
		}
		return out
	},
}

// Module is /merge-with-reuse, its sequence and its section, from what
// every command shares.
func Module(d commands.Deps) commands.Module {
	h := &Handler{Pins: reuse.Module(d).Spec.Handler, State: d.State, AppID: d.AppID, Notices: d.Notices, Log: d.Log, Now: d.Now,
		Clients: func(inst int64) (GitHub, error) { return d.GitHub(inst) }, acts: commands.ActsOf(d)}
	return h.Module()
}

// Module is the command run by h.
func (h *Handler) Module() commands.Module {
	sec := Section.Section()
	return commands.Module{Spec: Spec(h), Kinds: []seq.Kind{Kind(h)}, Section: &sec}
}

// Button is Merge with reuse: on a finished sweep's check run and in Slack.
var Button = commands.Button{ID: "merge", Label: "Merge with reuse", Description: "Pin this run, then merge the PR",
	Slack: func(int64) string { return "Merge with reuse" },
	Command: func(run int64) commands.Command {
		return commands.Command{Name: Name, Verb: "/merge-with-reuse", RunID: run, Text: fmt.Sprintf("/merge-with-reuse %d", run)}
	}}

// Spec is the command, run by h.
func Spec(h *Handler) commands.Spec {
	return commands.Spec{
		Buttons:  []commands.Button{Button},
		Name:     Name,
		Verbs:    []commands.Verb{{Word: "/merge-with-reuse", Usage: Usage, Args: commands.RunOrCancel, UsageNote: commands.RunNote}},
		Access:   func(rc *config.Repo) config.Access { return Section.Of(rc).Access },
		LastWins: true,
		Group:    "pin", // it grants the PR's one pin, as /reuse-sweep-run does
		Help:     help,
		Handler:  h,
	}
}

// Kind is the merge sequence, stepped by h, and the events that wake it:
// a workflow run's or check suite's completion, a failed check run, a
// commit status, on the PR's head; and what the merge queue did with the
// PR (QueueRoute).
func Kind(h *Handler) seq.Kind {
	return seq.Typed[Data]{Name: SeqKind, Step: h.wake, Expire: h.expire, Cleanup: h.cleanup,
		Routes: []seq.Route{seq.On("check_suite"), seq.On("check_run"), seq.On("status"), seq.On("workflow_run"), QueueRoute},
		Stop:   "/merge-with-reuse cancel", Teller: func() plan.Teller { return h.Notices.Teller() }}.Kind()
}

func help(rc *config.Repo) commands.Help {
	who := commands.Who(Section.Of(rc).Access)
	return commands.Help{
		Rows: []commands.HelpRow{
			{Command: "`/merge-with-reuse [<run>]`", What: "pin `<run>` (or the newest real sweep), update the branch if it is behind, wait for the checks, merge", Who: who},
			{Command: "`/merge-with-reuse cancel`", What: "stop this PR's merge", Who: who},
		},
		About: "**What a merge with reuse does.** It pins the run as `/reuse-sweep-run` does. If the branch is behind its base, opsbot " +
			"updates it (GitHub's update-branch, naming the head it read)" + conflictWords(Section.Of(rc).AppendOnly) + ". " +
			"That push is the one the pin covers, so its sweep is skipped. " +
			"Then it waits for every check and status on that head and merges exactly that head (" + mdtext.Code(Section.Of(rc).Method) + "), " +
			"or adds it to GitHub's merge queue where the default branch requires one. " +
			"A failed check, a new push by anyone, closing the PR, `/merge-with-reuse cancel` or " + commands.Span(Section.Of(rc).ChecksTimeout) +
			" without green checks stops it; a cancelled check does not count as failed. It never bypasses branch protection: " +
			"a missing review or required check stops it, said why. One comment on the PR shows each step.\n\n",
		Settings: []string{fmt.Sprintf("merges with %s and waits at most %s for the checks", mdtext.Code(Section.Of(rc).Method), commands.Span(Section.Of(rc).ChecksTimeout))},
	}
}

// conflictWords says what the help says of a conflicting branch.
func conflictWords(appendOnly []string) string {
	if len(appendOnly) == 0 {
		return ""
	}
	return "; if it conflicts with its base in " + mdtext.CodeList(appendOnly) + ", opsbot merges that by the changelog's append-only rule " +
		"(the rest by GitHub's own merge) and pushes the merge"
}

// Prepare pins the run and starts the PR's merge, or cancels it.
func (h *Handler) Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	me := mdtext.Mention(in.Actor.Login)
	if in.PRState == "closed" {
		return commands.Result{Outcome: commands.Rejected, Reason: "the PR is closed",
			Reply: fmt.Sprintf("%s this PR is closed: there is nothing to merge.", me)}
	}
	cur, err := commands.LiveSequence(h.State, in.Repo, in.PR, SeqKind)
	if err != nil {
		return commands.Result{Err: err}
	}
	if line.Cancel {
		return h.cancel(ctx, env, in, cur)
	}
	if cur != nil {
		return commands.Result{Outcome: commands.Rejected, Reason: "a merge of this PR is under way",
			Reply: fmt.Sprintf("%s a merge of this PR is already under way (asked by %s, now %s); `/merge-with-reuse cancel` stops it.",
				me, mdtext.Mention(cur.ActorLogin), stepWords(cur.Step))}
	}
	// A merge pins a run: whoever may merge but not pin gets no pin
	// through it.
	if spec, ok := env.Commands.Spec(reuse.Name); ok {
		if v := env.Check(ctx, in.Actor, spec); !v.Allowed {
			if v.CheckFailed {
				return commands.Result{Outcome: commands.Errored, Reason: "the role to pin could not be checked: " + v.Reason,
					Reply: commands.NoAnswerReply(in.Actor.Login, "start", "the merge")}
			}
			need := env.Policy(spec).Describe()
			return commands.Result{Outcome: commands.Denied, Reason: "merging pins a run, which needs " + need,
				Reply: fmt.Sprintf("%s I did not start the merge: it pins a run, which needs %s.", me, need)}
		}
	}
	// The merge lands on the default branch: recorded now, so a PR its
	// author retargets before the first step is not merged elsewhere.
	gh, err := h.Clients(in.Installation)
	if err != nil {
		return commands.Result{Err: err}
	}
	pr, err := gh.PullRequest(ctx, in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: err}
	}
	base := env.Repo.DefaultBranch
	if base == "" {
		base = pr.GetBase().GetRepo().GetDefaultBranch()
	}
	if base == "" || pr.GetBase().GetRef() != base {
		return commands.Result{Outcome: commands.Rejected, Reason: "the PR does not merge into the default branch",
			Reply: fmt.Sprintf("%s I did not start the merge: this PR merges into %s, not the default branch %s. `/merge-with-reuse` "+
				"lands PRs on the default branch only; retarget it first.", me, mdtext.Code(pr.GetBase().GetRef()), mdtext.Code(base))}
	}
	pinLine := line
	pinLine.Cancel = false
	r := h.Pins.Prepare(ctx, env, in, pinLine)
	switch {
	case r.Err != nil:
		return r
	case r.Outcome != commands.Accepted:
		reason := r.Reason
		if reason == "" {
			reason = "the run could not be pinned"
		}
		r.Reply = fmt.Sprintf("%s I did not start the merge: %s.", me, strings.TrimSuffix(mdtext.Text(reason), "."))
		return r
	}
	var pin *record.Pin
	for i, s := range r.Plan.Steps {
		if g, ok := s.(plan.GrantPin); ok {
			// It covers the branch update this merge asks for, no other push.
			g.Pin.ExpectParent = g.Pin.PRHeadAtGrant
			r.Plan.Steps[i] = g
			pin = &g.Pin
		}
	}
	if pin == nil {
		return commands.Result{Err: errors.New("merge: the pin's plan grants no pin")}
	}
	rc := env.Repo
	data := Data{Installation: in.Installation, Method: Section.Of(rc).Method, RunID: pin.RunID, RunURL: pin.RunURL, Line: line.Text, Base: base,
		Trail: []string{fmt.Sprintf("📌 pinned run %s%s (%s, on commit %s)%s", commands.RunLink(pin.RunID, pin.RunURL), newest(pin.Bare),
			mdtext.Code(pin.RunConclusion), mdtext.Code(mdtext.ShortSHA(pin.RunSHA)), coverageOf(pin))}}
	raw, err := json.Marshal(data)
	if err != nil {
		return commands.Result{Err: err}
	}
	s := record.Sequence{Kind: SeqKind, Repo: in.Repo, PR: in.PR, Head: pin.PRHeadAtGrant, Step: StepPinned, Data: raw,
		ActorID: in.Actor.ID, ActorLogin: in.Actor.Login, Deadline: h.now().Add(Section.Of(rc).ChecksTimeout)}
	s.SetOrigin(in.Origin)
	status := h.statusComment(in.Repo, in.PR, in.Installation, &s, data, "⏳ looking at the branch next")
	start := plan.PutSequence{Seq: s, Status: &status, WakeNow: true,
		Audit: commands.AuditOf(in, record.AuditRecord{Kind: record.AuditMerge, Outcome: StepPinned, RunID: pin.RunID, HeadSHA: pin.PRHeadAtGrant,
			Reason: fmt.Sprintf("merge with reuse asked; method %s", Section.Of(rc).Method)})}
	return commands.Result{Outcome: commands.Accepted, RunID: r.RunID, HeadSHA: r.HeadSHA, RunURL: r.RunURL, Acknowledges: true,
		Plan: plan.Plan{Require: append(r.Plan.Require, plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind}),
			Steps: append(r.Plan.Steps, start)}}
}

// cancel stops the PR's merge and revokes the pin it took, if that pin is
// still waiting for its push.
func (h *Handler) cancel(ctx context.Context, env commands.Env, in commands.Invocation, cur *record.Sequence) commands.Result {
	me := mdtext.Mention(in.Actor.Login)
	if cur == nil {
		reply := fmt.Sprintf("%s there is no merge of this PR under way to cancel.", me)
		last, err := h.State.Sequence(in.Repo, in.PR, SeqKind)
		if err != nil {
			return commands.Result{Err: err}
		}
		if last != nil && last.Step == StepMerged {
			// The merge was made before the cancel was read: said so, not
			// as if none had been under way.
			d, _ := decode(last)
			reply = fmt.Sprintf("%s too late: the merge asked by %s was made before this cancel was read (%s merged as %s).", me,
				mdtext.Mention(last.ActorLogin), mdtext.Code(mdtext.ShortSHA(d.Decided)), mdtext.Code(mdtext.ShortSHA(d.MergeCommit)))
		}
		return commands.Result{Outcome: commands.Accepted, Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind}}},
			Reply: reply}
	}
	data, err := decode(cur)
	if err != nil {
		return commands.Result{Err: err}
	}
	if p, commit, ok, err := h.foundMerged(ctx, env.Repo, cur, data); err != nil {
		return commands.Result{Err: err}
	} else if ok {
		// The merge was asked and its answer is not recorded yet: GitHub
		// made it. It is recorded as made, with its pin, and the cancel is
		// told it came too late.
		return commands.Result{Outcome: commands.Accepted, Plan: p,
			Reply: fmt.Sprintf("%s too late: the merge asked by %s was made before this cancel was read (%s merged as %s).", me,
				mdtext.Mention(cur.ActorLogin), mdtext.Code(mdtext.ShortSHA(data.Decided)), mdtext.Code(mdtext.ShortSHA(commit)))}
	}
	if cur.Step == StepLeaving {
		return commands.Result{Outcome: commands.Accepted, Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind, Version: cur.Version}}},
			Reply: fmt.Sprintf("%s this merge is already stopping (%s): opsbot is taking the PR out of the merge queue.", me, mdtext.Text(data.LeaveWhy))}
	}
	l, err := h.leaveQueue(ctx, cur, data)
	if err != nil {
		return commands.Result{Err: err}
	}
	if l.result == leftMerged {
		// Too late: the queue merged it; the merge records it when GitHub
		// shows it on the PR.
		return commands.Result{Outcome: commands.Accepted, Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind, Version: cur.Version}}},
			Reply: fmt.Sprintf("%s too late: GitHub's merge queue merged this PR (asked by %s) before this cancel was read.", me, mdtext.Mention(cur.ActorLogin))}
	}
	left := l.words
	later := l.result == leftUnknown || l.result == leftGone
	if later {
		left = " The PR is being taken out of the merge queue (GitHub has not confirmed it yet): the status comment says when it is out, " +
			"or if the queue merged it first."
	}
	why := withLeft(fmt.Sprintf("cancelled by @%s", in.Actor.Login), l.words)
	p := plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: SeqKind, Version: cur.Version}}}
	pin, err := env.State.ActivePin(in.Repo, in.PR)
	if err != nil {
		return commands.Result{Err: err}
	}
	f := plan.ActivePin{Repo: in.Repo, PR: in.PR}
	revoked := ""
	if pin != nil {
		f.ID = pin.ID
		if pin.Origin().Same(cur.Origin()) {
			ch := record.PinChange{Reason: "its merge was " + why, ActorID: in.Actor.ID, ActorLogin: in.Actor.Login}
			ch.SetOrigin(in.Origin)
			p.Steps = append(p.Steps, plan.ClosePin{Pin: *pin, To: record.PinRevoked, Change: ch})
			revoked = fmt.Sprintf(" The pin of run %s it took is revoked; the next push sweeps.", commands.RunLink(pin.RunID, pin.RunURL))
		}
	}
	p.Require = append(p.Require, f)
	if later {
		p.Steps = append(p.Steps, h.leaveLater(cur, data, "cancelled", fmt.Sprintf("cancelled by @%s", in.Actor.Login)))
	} else {
		p.Steps = append(p.Steps, h.stop(cur, data, "cancelled", why, in.Actor.ID, in.Actor.Login))
	}
	return commands.Result{Outcome: commands.Accepted, Plan: p,
		Reply: fmt.Sprintf("%s cancelled the merge of this PR asked by %s.%s%s", me, mdtext.Mention(cur.ActorLogin), left, revoked)}
}

func decode(s *record.Sequence) (Data, error) { return seq.DataOf[Data](s) }

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// stop ends the merge with a reason code and its words (Markdown, made of
// opsbot's words and escaped values): the status comment
// says it and the audit keeps it. A pin the merge took stays (cancel
// revokes it itself).
func (h *Handler) stop(cur *record.Sequence, data Data, code, why string, actorID int64, actor string) plan.PutSequence {
	next := *cur
	next.Step, next.Done, next.Why = StepStopped, true, code+": "+why
	data.Trail = append(data.Trail, "⛔ stopped: "+why)
	if l := leftWords(next.Left); l != "" {
		data.Trail = append(data.Trail, l) // the engine's cleanup runs next
	}
	next.Data, _ = json.Marshal(data) // plain fields: cannot fail
	edit := h.statusEdit(&next, data, "")
	rec := record.AuditRecord{Kind: record.AuditMerge, Outcome: StepStopped, Repo: cur.Repo, PR: cur.PR, RunID: data.RunID,
		HeadSHA: data.Decided, ActorID: actorID, ActorLogin: actor, Reason: code + ": " + mdtext.Plain(mdtext.Parse(why))}
	rec.SetOrigin(cur.Origin())
	return plan.PutSequence{Seq: next, Read: cur.Version, Edit: &edit, Audit: rec}
}

// statusComment is the merge's status comment: what happened, then now.
func (h *Handler) statusComment(repo string, pr int, inst int64, s *record.Sequence, data Data, now string) plan.Comment {
	return plan.Comment{Repo: repo, PR: pr, Installation: inst, Kind: string(notices.KindMerge),
		Body: statusText(s, data, now), Links: plan.Links{PR: h.Notices.Web.PR(repo, pr), Comment: s.OriginURL, Run: data.RunURL}}
}

func (h *Handler) statusEdit(s *record.Sequence, data Data, now string) plan.Edit {
	return plan.Edit{Repo: s.Repo, PR: s.PR, Installation: data.Installation, Kind: string(notices.KindMerge),
		Body: statusText(s, data, now), Links: plan.Links{PR: h.Notices.Web.PR(s.Repo, s.PR), Comment: s.OriginURL, Run: data.RunURL}}
}

func statusText(s *record.Sequence, data Data, now string) string {
	method := mdtext.Code(data.Method)
	if data.Queue {
		method = "GitHub's merge queue"
	}
	return seq.Status{Title: fmt.Sprintf("🔀 **Merge with reuse**, asked by %s (%s):", mdtext.Mention(s.ActorLogin), method),
		Trail: data.Trail, Now: now}.Text()
}

func stepWords(step string) string {
	switch step {
	case StepPinned:
		return "about to look at the branch"
	case StepUpdating:
		return "updating the branch"
	case StepChecks:
		return "waiting for the checks"
	case StepQueued:
		return "in the merge queue"
	case StepLeaving:
		return "taking the PR out of the merge queue"
	}
	return step
}

// wake steps the merge the engine read (w.Seq, at the version that was
// due): it re-reads the PR (and its checks) and acts only while they match
// what the merge is for.
func (h *Handler) wake(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	p, out, err := h.stepperOf(rc, s).read(ctx)
	return out, p, err
}

// expire stops the merge at its deadline, whatever it waits for and
// whatever GitHub would answer now.
func (h *Handler) expire(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	st := h.stepperOf(rc, s)
	if p, _, ok, err := h.foundMerged(ctx, rc, st.cur, st.data); err != nil {
		return "", plan.Plan{}, err // whether GitHub merged it is read again at the next try
	} else if ok {
		return "merge-merged", p, nil
	}
	l, err := h.leaveQueue(ctx, st.cur, st.data)
	if err != nil {
		return "", plan.Plan{}, err
	}
	if l.result == leftMerged {
		// GitHub's merge queue said it merged the group: its signed word
		// stands for the record GitHub did not show on the PR in time.
		st.data.QueueGroup = l.group
		p, out, err := st.merged(l.group, true)
		return out, p, err
	}
	left := l.words
	if st.cur.Step == StepLeaving {
		p, out, err := st.stopped(st.data.LeaveCode, withLeft(st.data.LeaveWhy, left))
		return out, p, err
	}
	since := "the command"
	if st.cur.Step == StepQueued {
		since = "adding it to the merge queue"
	}
	p, out, err := st.stopped("timeout", withLeft(fmt.Sprintf("it did not finish within %s of %s (%s)", commands.Span(Section.Of(rc).ChecksTimeout),
		since, stepWords(st.cur.Step)), left))
	return out, p, err
}

// foundMerged reads the PR when the merge may have been asked already (its
// mark is not this process's, or was tried and its answer lost): a PR
// merged at the decided head was merged by it, and ok says so, with the
// plan that records it (its pin kept). Before the merge's mark, or with a
// mark this process has not sent, nothing is read.
func (h *Handler) foundMerged(ctx context.Context, rc *config.Repo, cur *record.Sequence, data Data) (p plan.Plan, commit string, ok bool, err error) {
	if data.MergeMark == "" || data.Decided == "" || h.acts.Fresh(data.MergeMark) {
		return plan.Plan{}, "", false, nil
	}
	gh, err := h.Clients(data.Installation)
	if err != nil {
		return plan.Plan{}, "", false, err
	}
	pr, err := gh.PullRequest(ctx, cur.Repo, cur.PR)
	if err != nil {
		return plan.Plan{}, "", false, err
	}
	if !pr.GetMerged() || !strings.EqualFold(pr.GetHead().GetSHA(), data.Decided) {
		return plan.Plan{}, "", false, nil
	}
	st := &stepper{h: h, rc: rc, cur: cur, data: data, now: h.now()}
	p, _, err = st.merged(pr.GetMergeCommitSHA(), true)
	return p, pr.GetMergeCommitSHA(), err == nil, err
}

// stepperOf is a step of the merge the engine read and decoded (its plan
// is applied by the engine, guarded by the version that was due).
func (h *Handler) stepperOf(rc *config.Repo, s seq.Step[Data]) *stepper {
	cur := *s.Seq // the step's own: what it notes (Left) goes into the writes it makes
	return &stepper{h: h, rc: rc, cur: &cur, data: s.Data, now: s.Now, w: s.Wakeup}
}

// stepper is one wake-up of a merge.
type stepper struct {
	h    *Handler
	rc   *config.Repo
	gh   GitHub
	cur  *record.Sequence
	data Data
	pr   *github.PullRequest
	now  time.Time
	// w is the wake-up: its acts go through it (send).
	w seq.Wakeup
}

// send sends an act through the engine (seq.Wakeup.Send): the last stop
// check, then the act, once, read back where its answer does not say. err
// is the engine's (a stop waits, the mark is not fresh, opsbot is
// stopping: nothing more to do here); the answer is GitHub's.
func (st *stepper) send(ctx context.Context, act seq.Act) (seq.Answer, error) {
	return st.w.Send(ctx, act)
}

// read reads the PR and steps the merge from what it finds.
func (st *stepper) read(ctx context.Context) (plan.Plan, string, error) {
	var err error
	if st.gh, err = st.h.Clients(st.data.Installation); err != nil {
		return plan.Plan{}, "", err
	}
	if st.pr, err = st.gh.PullRequest(ctx, st.cur.Repo, st.cur.PR); err != nil {
		return plan.Plan{}, "", err
	}
	return st.step(ctx)
}

// pin is the PR's active pin when it is the one this merge took.
func (st *stepper) pin() (*record.Pin, error) {
	if st.h.State == nil {
		return nil, errors.New("merge: no state reader")
	}
	p, err := st.h.State.ActivePin(st.cur.Repo, st.cur.PR)
	if err != nil || p == nil || !p.Origin().Same(st.cur.Origin()) || p.RunID != st.data.RunID || (st.data.PinID != 0 && p.ID != st.data.PinID) {
		return nil, err
	}
	return p, nil
}

// pushSays is what became of a push the merge did not make, as the
// gate's records say (a merge's pin covers only the update opsbot asks
// for, so the gate sweeps any other push).
func (st *stepper) pushSays(head string) string {
	if st.h.State != nil {
		if d, err := st.h.State.Decision(st.cur.Repo, st.cur.PR, head); err == nil && d != nil {
			if d.Skipped() {
				return fmt.Sprintf("opsbot's gate skipped its sweep, reusing run %d", d.RunID)
			}
			return "opsbot's gate decided it sweeps (" + mdtext.Text(d.Reason) + ")"
		}
	}
	return "it sweeps: the merge's pin covers only the update opsbot asks for"
}

func (st *stepper) guard() plan.Fact {
	return plan.SequenceAt{Repo: st.cur.Repo, PR: st.cur.PR, Kind: SeqKind, Version: st.cur.Version}
}

// stopped ends the merge; the pin it took, while no push has used it, is
// revoked with it: a merge's pin covers only the update opsbot asked for,
// so no push the maintainer makes by hand could use it.
func (st *stepper) stopped(code, why string) (plan.Plan, string, error) {
	p := plan.Plan{Require: []plan.Fact{st.guard()}}
	if st.h.State != nil {
		pin, err := st.h.State.ActivePin(st.cur.Repo, st.cur.PR)
		if err != nil {
			return plan.Plan{}, "", err
		}
		if pin != nil && pin.Origin().Same(st.cur.Origin()) {
			p.Require = append(p.Require, plan.ActivePin{Repo: st.cur.Repo, PR: st.cur.PR, ID: pin.ID})
			ch := record.PinChange{Reason: "its merge stopped: " + code, ActorID: st.cur.ActorID, ActorLogin: st.cur.ActorLogin}
			ch.SetOrigin(st.cur.Origin())
			p.Steps = append(p.Steps, plan.ClosePin{Pin: *pin, To: record.PinRevoked, Change: ch})
			why += fmt.Sprintf(". The pin of run %s it took is revoked: the next push sweeps", commands.RunLink(pin.RunID, pin.RunURL))
		}
	}
	p.Steps = append(p.Steps, st.h.stop(st.cur, st.data, code, why, 0, ""))
	return p, "merge-stopped-" + code, nil
}

// wait sleeps until the next poll (or an event), saying now in the status
// comment when it changed.
func (st *stepper) wait(step, now string, out string) (plan.Plan, string, error) {
	return st.waitFor(step, now, out, Poll)
}

// waitFor is wait for the time after.
func (st *stepper) waitFor(step, now string, out string, after time.Duration) (plan.Plan, string, error) {
	was := mustData(st.cur)
	st.data.Now = now
	ps, err := seq.Waiting{Cur: st.cur, Step: step, WakeAt: st.now.Add(after), Data: st.data,
		Is: seq.Status{Trail: st.data.Trail, Now: now}, Was: seq.Status{Trail: was.Trail, Now: was.Now},
		Edit: func(next *record.Sequence) plan.Edit { return st.h.statusEdit(next, st.data, now) },
		Audit: record.AuditRecord{Kind: record.AuditMerge, RunID: st.data.RunID, HeadSHA: firstNonEmpty(st.data.Decided, st.cur.Head),
			Reason: mdtext.Plain(mdtext.Parse(now))}}.Put()
	if err != nil {
		return plan.Plan{}, "", err
	}
	return plan.Plan{Require: []plan.Fact{st.guard()}, Steps: []plan.Step{ps}}, out, nil
}

func mustData(s *record.Sequence) Data {
	d, _ := decode(s)
	return d
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (st *stepper) step(ctx context.Context) (plan.Plan, string, error) {
	if st.cur.Holds() {
		// Only a merge still looking at its branch (StepPinned) makes one:
		// any other it holds is an earlier try's, or an earlier merge's.
		keep := ""
		if st.cur.Step == StepPinned {
			keep = st.tempNow()
		}
		st.dropLeftBut(ctx, keep)
	}
	pr, cur := st.pr, st.cur
	head := pr.GetHead().GetSHA()
	if pr.GetMerged() {
		// The head the merge is for is recorded before the merge is asked
		// (the mark): a merge GitHub made whose answer was lost, or made
		// just before a crash, is found here.
		if st.data.Decided != "" && strings.EqualFold(head, st.data.Decided) {
			return st.merged(pr.GetMergeCommitSHA(), true)
		}
		return st.stopped("merged_elsewhere", "the PR was merged by someone else")
	}
	if pr.GetState() != "open" {
		return st.stopped("closed", "the PR was closed")
	}
	base := pr.GetBase().GetRef()
	if st.data.Base == "" {
		st.data.Base = base // a merge an older build started, before the base was recorded with the command
	} else if base != st.data.Base {
		return st.stopped("retargeted", fmt.Sprintf("the PR now merges into %s, not %s, the default branch it merged into when the merge was asked",
			mdtext.Code(base), mdtext.Code(st.data.Base)))
	}
	switch cur.Step {
	case StepPinned:
		if !strings.EqualFold(head, cur.Head) {
			if st.data.UpdateMark != "" {
				return st.updating(ctx, head) // the update may have been asked just before a restart: is this its push?
			}
			return st.stopped("pushed", fmt.Sprintf("a new push (head %s) came before the branch was looked at; %s. "+
				"Run `/merge-with-reuse` again once its sweep has run", mdtext.ShortSHA(head), st.pushSays(head)))
		}
		return st.pinned(ctx, head)
	case StepUpdating:
		return st.updating(ctx, head)
	case StepChecks:
		if !strings.EqualFold(head, st.data.Decided) {
			return st.stopped("pushed", fmt.Sprintf("a new push (head %s) came after %s, the head the merge was for", mdtext.ShortSHA(head), mdtext.ShortSHA(st.data.Decided)))
		}
		if st.data.Queue && st.data.MergeMark != "" && !st.h.acts.Fresh(st.data.MergeMark) {
			// The enqueue may have been asked (a lost answer, a restart):
			// the queue says where the PR is before any check is read.
			return st.queueAsked(ctx, head)
		}
		return st.checks(ctx, head)
	case StepQueued:
		if !strings.EqualFold(head, st.data.Decided) {
			return st.stopped("pushed", fmt.Sprintf("a new push (head %s) came after %s, the head queued; GitHub takes a PR out of its "+
				"merge queue when it is pushed to", mdtext.ShortSHA(head), mdtext.ShortSHA(st.data.Decided)))
		}
		return st.queued(ctx)
	case StepLeaving:
		return st.leaving(ctx)
	}
	return plan.Plan{}, "merge-unknown-step", nil
}

// refusedWords says who did not do what: GitHub refused, or opsbot (in
// dry-run) did not.
func refusedWords(ref *ghclient.Refusal, what string) string {
	if ref.Dry() {
		return "opsbot did not " + what
	}
	if what == "merge" {
		return "GitHub refused the merge"
	}
	return "GitHub refused to " + what
}

func newest(bare bool) string {
	if bare {
		return ", the newest real sweep run of this PR"
	}
	return ""
}

func coverageOf(p *record.Pin) string {
	if p.Coverage == nil {
		return ""
	}
	return ": " + runs.Sentence(*p.Coverage)
}

// TakeBack stops the PR's merge when ch's comment started it and the
// comment was deleted or its command edited away, if the one who did it
// may (the comment's author, or the command's role); the pin it took is
// reuse's to take back (reuse.Handler.TakeBack, asked too). Otherwise the
// merge goes on, audited.
func (h *Handler) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	t, err := commands.TakeBackOf(env, ch, SeqKind, func(d Data) string { return d.Line })
	if err != nil || t == nil {
		return plan.Plan{}, err
	}
	cur, data, guard := t.Cur, t.Data, t.Guard
	if p, _, ok, err := h.foundMerged(ctx, env.Repo, cur, data); err != nil || ok {
		return p, err // GitHub merged it already: recorded as merged, nothing to take back
	}
	if p, kept, err := t.Kept(ctx, env, ch, "started @"+cur.ActorLogin+"'s merge", "stopping it", "it goes on",
		record.AuditRecord{Kind: record.AuditMerge, RunID: data.RunID}); err != nil || kept {
		return p, err
	}
	if cur.Step == StepLeaving {
		return plan.Plan{}, nil // stopping already
	}
	l, err := h.leaveQueue(ctx, cur, data)
	if err != nil {
		return plan.Plan{}, err
	}
	why := fmt.Sprintf("%s %s that asked for it", t.Who, t.Did)
	switch l.result {
	case leftMerged:
		return plan.Plan{}, nil // too late: the queue merged it, and the merge records it
	case leftUnknown, leftGone:
		return plan.Plan{Require: []plan.Fact{guard}, Steps: []plan.Step{h.leaveLater(cur, data, "taken_back", why)}}, nil
	}
	stop := h.stop(cur, data, "taken_back", withLeft(why, l.words), ch.Actor.ID, ch.Actor.Login)
	return plan.Plan{Require: []plan.Fact{guard}, Steps: []plan.Step{stop}}, nil
}
