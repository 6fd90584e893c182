package aftermerge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/notices"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// RecoverName is /recover-ingest's canonical name; RecoverKind its
// sequence's.
const (
	RecoverName = "recover-ingest"
	RecoverKind = "recover_ingest"
)

// The recovery's steps (audited as the after-merge kind's).
const (
	RecoverDispatching = "recover_dispatching"
	RecoverRunning     = "recover_running"
	RecoverSucceeded   = "recover_succeeded"
	RecoverFailed      = "recover_failed"
	RecoverExpired     = "recover_expired"
	RecoverCancelled   = "recover_cancelled"
	RecoverDispatched  = "recover_dispatched" // GitHub named no run: not followed
	RecoverUnknown     = "recover_unknown"    // the dispatch may have been sent: never sent again
)

// RecoverSettings is repos[].after_merge.recover: the recovery workflow
// ("": /recover-ingest is off), who may run it, and how long a recovery is
// followed.
type RecoverSettings struct {
	config.Access `yaml:",inline"`
	Workflow      string        `yaml:"workflow"`
	Deadline      time.Duration `yaml:"deadline"`
}

// The inputs opsbot dispatches the recovery workflow with: the run whose
// artifacts are published, and the main run whose changelog goes with
// them (the benchmark repository's recover-reused-ingest.yml).
const (
	inputSource = "source-run-id"
	inputMerge  = "merge-run-id"
)

// Recoverer takes /recover-ingest and steps its recoveries.
type Recoverer struct {
	d    commands.Deps
	acts *seq.Marks // the engine's act marks (commands.Deps.Acts): the dispatches this process marked
}

// RecoverModule is /recover-ingest with its kind (its configuration is
// the after-merge section's).
func RecoverModule(d commands.Deps) commands.Module {
	h := &Recoverer{d: d, acts: commands.ActsOf(d)}
	return commands.Module{Spec: recoverSpec(h), Kinds: []seq.Kind{seq.Typed[RecoverData]{Name: RecoverKind, Step: h.step, Expire: h.expire,
		Stop: "/recover-ingest cancel", Teller: func() plan.Teller { return h.d.Notices.Teller() }}.Kind()}}
}

func recoverSpec(h *Recoverer) commands.Spec {
	return commands.Spec{
		Name:     RecoverName,
		LastWins: true,
		Verbs: []commands.Verb{{Word: "/recover-ingest", Usage: "usage: /recover-ingest [<run URL>|cancel]",
			Args: func(c *commands.Command, args []string, _ commands.Options) string {
				if len(args) > 1 {
					return "/recover-ingest takes at most one argument: the failed run's (or job's) URL, or cancel"
				}
				c.Args = args
				return ""
			}}},
		Access: func(rc *config.Repo) config.Access { return Section.Of(rc).Recover.Access },
		Help: func(rc *config.Repo) commands.Help {
			if Section.Of(rc).Recover.Workflow == "" {
				return commands.Help{}
			}
			return commands.Help{Rows: []commands.HelpRow{{Command: "`/recover-ingest [<run URL>]`",
				What: "after the merge, publish the reused run's results through the recovery workflow, without a GPU (`cancel` stops it)",
				Who:  commands.Who(Section.Of(rc).Recover.Access)}}}
		},
		Handler: h,
		Buttons: []commands.Button{RecoverButton},
	}
}

// sequences reads a PR's sequence of a kind (record.Reader,
// commands.State).
type sequences interface {
	Sequence(repo string, pr int, kind string) (*record.Sequence, error)
}

// recoveryLive says why target may not be re-run while a recovery of its
// ingest is under way ("": none is).
func recoveryLive(st sequences, repo string, pr int, target int64) (string, error) {
	r, err := st.Sequence(repo, pr, RecoverKind)
	if err != nil || r == nil || r.Done {
		return "", err
	}
	rd, err := seq.DataOf[RecoverData](r)
	if err != nil || rd.Target != target {
		return "", err
	}
	return fmt.Sprintf("@%s's recovery of the ingest of run %s is under way: a re-run would publish its results again "+
		"(`/recover-ingest cancel` stops the recovery first)", rd.By, commands.RunLink(target, rd.TargetURL)), nil
}

// recoveredAlready says why the ingest of target may not be recovered
// again: the PR's last recovery, of the same run, dispatched and
// succeeded, or may have dispatched (its run never named, its answer
// lost, cancelled or not finished by its deadline after the dispatch may
// have left). A second dispatch would publish the results again. A
// recovery whose run failed, or that never dispatched, may be asked
// again.
func recoveredAlready(st sequences, repo string, pr int, target int64, rerun bool) (string, error) {
	prev, err := st.Sequence(repo, pr, RecoverKind)
	if err != nil || prev == nil || !prev.Done {
		return "", err
	}
	pd, err := seq.DataOf[RecoverData](prev)
	if err != nil || pd.Target != target {
		return "", err
	}
	run := "its run was never named"
	if pd.RunID != 0 {
		run = "recovery run " + commands.RunLink(pd.RunID, pd.RunURL)
	}
	switch {
	case prev.Step == RecoverFailed:
		return "", nil
	case prev.Step == RecoverSucceeded && rerun:
		return fmt.Sprintf("the ingest of run %s was recovered already, by @%s (%s succeeded): a re-run would publish its "+
			"results again. If it must, re-run it on GitHub", commands.RunLink(target, pd.TargetURL), pd.By, run), nil
	case prev.Step == RecoverSucceeded:
		return fmt.Sprintf("the ingest of run %s was recovered already, by @%s (%s succeeded): a second recovery would publish its "+
			"results again. If it must, dispatch %s by hand", commands.RunLink(target, pd.TargetURL), pd.By, run, mdtext.Code(pd.Workflow)), nil
	case prev.Step == RecoverDispatched || prev.Step == RecoverUnknown || pd.RunID != 0 || pd.MaySent:
		next := "dispatch it by hand if none did"
		if rerun {
			next = "re-run it on GitHub if none did and it must"
		}
		return fmt.Sprintf("@%s's recovery of run %s may have published its results (%s; it ended %s): look at %s's runs first, and "+
			"%s", pd.By, commands.RunLink(target, pd.TargetURL), run, mdtext.Code(prev.Step), mdtext.Code(pd.Workflow), next), nil
	}
	return "", nil
}

// RecoverData is a recovery's record.
type RecoverData struct {
	Installation int64  `json:"installation"`
	By           string `json:"by"`
	Target       int64  `json:"target"` // the failed main run
	TargetURL    string `json:"target_url"`
	Job          string `json:"job"` // the failed job it recovers
	JobURL       string `json:"job_url,omitempty"`
	Merge        string `json:"merge"`
	Base         string `json:"base"`
	Source       int64  `json:"source"` // the run the merged head reused
	Workflow     string `json:"workflow"`
	Mark         string `json:"mark"`
	Line         string `json:"line,omitempty"` // the command as written (a take-back reads it)
	// Saved is the reused run's runner and GPU time (its decision's): what
	// a re-run of the main sweep would have spent again.
	SavedRunner int64  `json:"saved_runner,omitempty"`
	SavedGPU    int64  `json:"saved_gpu,omitempty"`
	RunID       int64  `json:"run_id,omitempty"` // the recovery workflow's run
	RunURL      string `json:"run_url,omitempty"`
	// MaySent says the dispatch may have been sent when the recovery
	// ended (its mark tried, or from before a restart): recorded by a
	// cancel or the deadline, for the next /recover-ingest.
	MaySent bool     `json:"may_sent,omitempty"`
	Trail   []string `json:"trail,omitempty"`
	Now     string   `json:"now,omitempty"`
}

func (h *Recoverer) now() time.Time {
	if h.d.Now != nil {
		return h.d.Now()
	}
	return time.Now()
}

// recoverState says what the watch last read of its run, for a button
// that no longer matches it.
func recoverState(wd Data) string {
	switch {
	case wd.Failed == nil:
		return "not failed"
	case wd.Failed.IngestFailed:
		return "its ingest failed"
	}
	return "failed before its ingest"
}

// Prepare validates a recovery as the repository's helper does before
// anything is dispatched, and begins it; or cancels the live one.
func (h *Recoverer) Prepare(ctx context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	refuse := func(why string) commands.Result {
		return commands.Result{Outcome: commands.Rejected, Reason: why, Reply: mdtext.Mention(in.Actor.Login) + " " + why + "."}
	}
	if len(line.Args) == 1 && strings.EqualFold(line.Args[0], "cancel") {
		return h.cancel(env, in)
	}
	settings := Section.Of(env.Repo)
	if settings.Recover.Workflow == "" {
		return refuse("recovery is not configured in this repository (`after_merge.recover.workflow`)")
	}
	if env.State == nil {
		return commands.Result{Err: errors.New("aftermerge: no state reader")}
	}
	watch, err := env.State.Sequence(in.Repo, in.PR, SeqKind)
	if err != nil {
		return commands.Result{Err: err}
	}
	if watch == nil {
		return refuse("opsbot did not follow this PR's merge: it recovers only the ingest of a merge it decided and followed")
	}
	wd, err := seq.DataOf[Data](watch)
	if err != nil {
		return commands.Result{Err: err}
	}
	if line.RunID != 0 && line.RunID != wd.RunID {
		return refuse(fmt.Sprintf("this button was offered for run %d; opsbot now follows run %s: use the newest message's button, "+
			"or type `/recover-ingest`", line.RunID, commands.RunLink(wd.RunID, wd.RunURL)))
	}
	// A re-run asked and not yet sent, or whose attempt runs, may
	// publish the results itself: one of the two at a time.
	if r := wd.Rerun; (r != nil && !r.Sent && r.Attempt == wd.Attempt) || watch.Step == StepRerun {
		by := "opsbot"
		if r != nil {
			by = mdtext.Mention(r.By)
		}
		return refuse(fmt.Sprintf("a re-run of attempt %d of run %s, asked by %s, is under way: recover after it, if its ingest fails "+
			"again", max(wd.Attempt, 1), commands.RunLink(wd.RunID, wd.RunURL), by))
	}
	// A button names the attempt whose ingest failed: it recovers that
	// failure only, never one it did not describe.
	if line.RunID != 0 && (line.Attempt != wd.Attempt || wd.Failed == nil || !wd.Failed.IngestFailed) {
		return refuse(fmt.Sprintf("this button was offered for attempt %d of run %d, whose ingest failed; opsbot now follows %s "+
			"(attempt %d, %s): use the newest message's button, or type `/recover-ingest`", line.Attempt, line.RunID,
			"run "+commands.RunLink(wd.RunID, wd.RunURL), max(wd.Attempt, 1), recoverState(wd)))
	}
	gh, err := h.d.GitHub(in.Installation)
	if err != nil {
		return commands.Result{Err: err}
	}
	v, why, err := h.validate(ctx, gh, env.Repo, in, line, wd)
	if err != nil {
		return commands.Result{Err: err}
	}
	if why != "" {
		return refuse(why)
	}
	if why, err := recoveredAlready(env.State, in.Repo, in.PR, v.target, false); err != nil || why != "" {
		if err != nil {
			return commands.Result{Err: err}
		}
		return refuse(why)
	}
	now := h.now()
	d := RecoverData{Installation: in.Installation, By: in.Actor.Login, Target: v.target, TargetURL: v.targetURL, Job: v.job.Name, JobURL: v.job.URL,
		Merge: wd.Merge, Base: wd.Base, Source: wd.Source, Workflow: settings.Recover.Workflow, Mark: h.acts.New(), Line: line.Text}
	for _, sha := range []string{wd.Merge, wd.Head} {
		if h.d.State == nil {
			break
		}
		dec, err := h.d.State.Decision(in.Repo, in.PR, sha)
		if err != nil {
			return commands.Result{Err: err}
		}
		if dec != nil && dec.Skipped() && dec.RunID == wd.Source {
			d.SavedRunner, d.SavedGPU = dec.RunnerSeconds, dec.GPUSeconds
			break
		}
	}
	d.Trail = []string{fmt.Sprintf("🔎 checked: run %s failed in %s on %s, at this PR's merge commit %s; run %d, which opsbot reused for the "+
		"merged head, has its result artifacts; %s on %s takes only a dispatch, with read-only permissions, in one job on ubuntu-latest",
		commands.RunLink(d.Target, d.TargetURL),
		mdtext.Link(mdtext.Text(d.Job), d.JobURL), mdtext.Code(d.Base), mdtext.Code(mdtext.ShortSHA(d.Merge)), d.Source,
		mdtext.Code(d.Workflow), mdtext.Code(d.Base))}
	d.Now = fmt.Sprintf("⏳ dispatching %s with %s %d and %s %d", mdtext.Code(d.Workflow), inputSource, d.Source, inputMerge, d.Target)
	raw, err := json.Marshal(d)
	if err != nil {
		return commands.Result{Err: err}
	}
	s := record.Sequence{Kind: RecoverKind, Repo: in.Repo, PR: in.PR, Step: RecoverDispatching, Head: wd.Merge, Data: raw,
		ActorID: in.Actor.ID, ActorLogin: in.Actor.Login, WakeAt: now, Deadline: now.Add(settings.Recover.Deadline)}
	s.SetOrigin(in.Origin)
	status := plan.Comment{Repo: in.Repo, PR: in.PR, Installation: in.Installation, Kind: string(notices.KindAfterMerge),
		Body: recoverText(d), Links: plan.Links{PR: h.d.Notices.Web.PR(in.Repo, in.PR), Run: d.TargetURL}}
	return commands.Result{Outcome: commands.Accepted, Acknowledges: true, RunID: d.Target, RunURL: d.TargetURL, HeadSHA: d.Merge,
		Reason: fmt.Sprintf("recovery of run %d's ingest from run %d asked", d.Target, d.Source),
		Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: in.Repo, PR: in.PR, Kind: RecoverKind}},
			Steps: []plan.Step{plan.PutSequence{Seq: s, Status: &status}}}}
}

// validated is a recovery's target, checked.
type validated struct {
	target    int64
	targetURL string
	job       ghclient.Job
}

// validate checks, in the helper's order, what a recovery needs: the
// target is a push run of the followed workflow on the default branch,
// completed and failed, at this PR's merge commit, which merged this PR
// alone; its failed job is the one named or the only one; the source is
// the run opsbot's decision for the merged head reused, of this
// repository, its artifacts there; and the recovery workflow on the
// default branch takes only a dispatch, read-only, in one job. why says
// what failed ("": all hold); err is a read that failed.
func (h *Recoverer) validate(ctx context.Context, gh *ghclient.Client, rc *config.Repo, in commands.Invocation, line commands.Line, wd Data) (v validated, why string, err error) {
	v.target = wd.RunID
	var jobID int64
	if len(line.Args) == 1 {
		repo, run, job, perr := ParseTargetURL(line.Args[0])
		if perr != nil {
			return v, mdtext.Text(perr.Error()), nil
		}
		if !strings.EqualFold(repo, in.Repo) {
			return v, fmt.Sprintf("the run is of %s, not of this repository", mdtext.Text(repo)), nil
		}
		v.target, jobID = run, job
	}
	if v.target == 0 {
		return v, "opsbot found no run of this merge on the default branch yet: give the failed run's URL", nil
	}
	run, err := gh.Run(ctx, in.Repo, v.target)
	if errors.Is(err, ghclient.ErrNotFound) {
		return v, fmt.Sprintf("run %d was not found in this repository", v.target), nil
	}
	if err != nil {
		return v, "", err
	}
	v.targetURL = run.GetHTMLURL()
	link := "run " + commands.RunLink(v.target, v.targetURL)
	if line.RunID != 0 && max(run.GetRunAttempt(), 1) != line.Attempt {
		return v, fmt.Sprintf("this button was offered for attempt %d of %s; GitHub shows its attempt %d: use the newest message's "+
			"button, or type `/recover-ingest`", line.Attempt, link, run.GetRunAttempt()), nil
	}
	wf := wd.WorkflowID
	if wf == 0 {
		if wf, err = gh.WorkflowID(ctx, in.Repo, workflowOf(rc)); err != nil {
			return v, "", err
		}
	}
	switch {
	case run.GetWorkflowID() != wf:
		return v, fmt.Sprintf("%s is not a run of %s", link, mdtext.Code(workflowOf(rc))), nil
	case run.GetEvent() != "push":
		return v, fmt.Sprintf("%s is a %s run, not the push run of the merge", link, mdtext.Code(run.GetEvent())), nil
	case run.GetHeadBranch() != wd.Base:
		return v, fmt.Sprintf("%s ran on the branch %s, not on the default branch %s", link, mdtext.Code(run.GetHeadBranch()), mdtext.Code(wd.Base)), nil
	case run.GetStatus() != "completed":
		return v, fmt.Sprintf("%s has not completed (%s)", link, mdtext.Text(run.GetStatus())), nil
	case run.GetConclusion() != "failure":
		return v, fmt.Sprintf("%s ended %s, not failed: nothing to recover", link, mdtext.Code(run.GetConclusion())), nil
	case !strings.EqualFold(run.GetHeadSHA(), wd.Merge):
		return v, fmt.Sprintf("%s is of commit %s, not of this PR's merge commit %s", link, mdtext.Code(mdtext.ShortSHA(run.GetHeadSHA())),
			mdtext.Code(mdtext.ShortSHA(wd.Merge))), nil
	}
	prs, err := gh.PullRequestsForCommit(ctx, in.Repo, wd.Merge)
	if err != nil {
		return v, "", err
	}
	var merged []string
	mine := false
	for _, p := range prs {
		// GitHub lists a commit's PRs in their short form: no merged
		// flag, but merged_at and the merge commit.
		if p.MergedAt != nil && strings.EqualFold(p.GetMergeCommitSHA(), wd.Merge) {
			merged = append(merged, fmt.Sprintf("#%d", p.GetNumber()))
			mine = mine || p.GetNumber() == in.PR
		}
	}
	if len(merged) != 1 || !mine {
		return v, fmt.Sprintf("the merge commit %s maps to the merged PRs %s, not to this PR alone", mdtext.Code(mdtext.ShortSHA(wd.Merge)),
			mdtext.Text(strings.Join(append(merged, "none")[:max(len(merged), 1)], ", "))), nil
	}
	jobs, err := gh.RunJobs(ctx, in.Repo, v.target, max(run.GetRunAttempt(), 1))
	if err != nil {
		return v, "", err
	}
	latest := jobs
	if jobID != 0 && run.GetRunAttempt() > 1 && !slices.ContainsFunc(jobs, func(j ghclient.Job) bool { return j.ID == jobID }) {
		// The job named is of an earlier attempt: the repository's helper
		// reads every attempt's jobs, and so does opsbot for a job named.
		if jobs, err = gh.RunJobsOfAllAttempts(ctx, in.Repo, v.target); err != nil {
			return v, "", err
		}
	}
	if v.job, err = SelectFailedJob(jobs, jobID); err != nil {
		return v, mdtext.Text(err.Error()), nil // job names come from the workflow, which a PR may have changed
	}
	if ij := Section.Of(rc).IngestJob; ij != "" && !isJob(v.job, ij) {
		return v, fmt.Sprintf("the failed job %s is not the ingest job %s (`after_merge.ingest_job`): a recovery publishes the reused "+
			"run's results where only the ingest failed; re-run the failed jobs instead", mdtext.Code(v.job.Name), mdtext.Code(ij)), nil
	}
	for _, j := range latest {
		if j.Name == v.job.Name && j.ID != v.job.ID && j.Conclusion == "success" {
			return v, fmt.Sprintf("job %s failed in an earlier attempt, and succeeded in attempt %d: nothing of it is left to recover",
				mdtext.Code(v.job.Name), run.GetRunAttempt()), nil
		}
	}
	if why, err := h.source(ctx, gh, rc, in.Repo, wd); why != "" || err != nil {
		return v, why, err
	}
	why, err = h.workflowFile(ctx, gh, in.Repo, wd.Base, Section.Of(rc).Recover.Workflow)
	return v, why, err
}

// source checks the run a recovery publishes: the one opsbot's decision
// for the merged head reused (the audit's), of this repository, with its
// artifacts, none expired.
func (h *Recoverer) source(ctx context.Context, gh *ghclient.Client, rc *config.Repo, repo string, wd Data) (string, error) {
	switch {
	case wd.Source == 0:
		return "opsbot decided the merged head by its own sweep, not by reuse: there is no reused run to publish from", nil
	case wd.NoReuse != "":
		return fmt.Sprintf("the PR's labels at the merge allow no reuse (%s): the main run's own sweep is what publishes", mdtext.Text(wd.NoReuse)), nil
	}
	src, err := gh.Run(ctx, repo, wd.Source)
	if errors.Is(err, ghclient.ErrNotFound) {
		return fmt.Sprintf("run %d, which opsbot reused for the merged head, was not found", wd.Source), nil
	}
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(src.GetHeadRepository().GetFullName(), repo) {
		return fmt.Sprintf("run %d ran a fork's code (%s), not this repository's", wd.Source, mdtext.Text(src.GetHeadRepository().GetFullName())), nil
	}
	arts, err := gh.Artifacts(ctx, repo, wd.Source)
	if err != nil {
		return "", err
	}
	results := 0
	for _, a := range arts {
		if !isResult(a.GetName(), rc.ResultArtifacts) {
			continue
		}
		if a.GetExpired() {
			return fmt.Sprintf("the artifacts of run %d, which opsbot reused for the merged head, have expired (%s): a recovery cannot "+
				"publish them", wd.Source, mdtext.Code(a.GetName())), nil
		}
		results++
	}
	if results == 0 {
		return fmt.Sprintf("run %d, which opsbot reused for the merged head, has no result artifacts (`result_artifacts`) to publish", wd.Source), nil
	}
	return "", nil
}

// workflowFile checks the recovery workflow as it is on the default
// branch (ValidateRecoveryWorkflow).
func (h *Recoverer) workflowFile(ctx context.Context, gh *ghclient.Client, repo, base, path string) (string, error) {
	tip, err := gh.BranchHead(ctx, repo, base)
	if err != nil {
		return "", err
	}
	tree, err := gh.Tree(ctx, repo, tip)
	if err != nil {
		return "", err
	}
	e, ok := tree[path]
	if !ok || e.Type != "blob" {
		return fmt.Sprintf("the recovery workflow %s is not on %s", mdtext.Code(path), mdtext.Code(base)), nil
	}
	raw, err := gh.Blob(ctx, repo, e.SHA)
	if err != nil {
		return "", err
	}
	if err := ValidateRecoveryWorkflow(raw, inputSource, inputMerge); err != nil {
		return fmt.Sprintf("the recovery workflow %s on %s is refused: %s", mdtext.Code(path), mdtext.Code(base), mdtext.Text(err.Error())), nil
	}
	return "", nil
}

// cancel stops the PR's live recovery: before its dispatch, nothing is
// dispatched; after, opsbot stops following its run, which goes on.
func (h *Recoverer) cancel(env commands.Env, in commands.Invocation) commands.Result {
	cur, err := commands.LiveSequence(env.State, in.Repo, in.PR, RecoverKind)
	if err != nil {
		return commands.Result{Err: err}
	}
	if cur == nil {
		why := "no recovery of this PR's ingest is under way"
		return commands.Result{Outcome: commands.Rejected, Reason: why, Reply: mdtext.Mention(in.Actor.Login) + " " + why + "."}
	}
	d, err := seq.DataOf[RecoverData](cur)
	if err != nil {
		return commands.Result{Err: err}
	}
	why := fmt.Sprintf("⛔ cancelled by %s before the dispatch: nothing was dispatched", mdtext.Mention(in.Actor.Login))
	switch {
	case d.RunID != 0:
		why = fmt.Sprintf("⛔ cancelled by %s: opsbot stopped following run %s, which goes on (cancel it on GitHub if that is meant)",
			mdtext.Mention(in.Actor.Login), commands.RunLink(d.RunID, d.RunURL))
	case !h.acts.Fresh(d.Mark):
		why = fmt.Sprintf("⛔ cancelled by %s after the dispatch may have been sent: look at the runs of %s", mdtext.Mention(in.Actor.Login),
			mdtext.Code(d.Workflow))
	}
	d.MaySent = d.RunID != 0 || !h.acts.Fresh(d.Mark)
	p := h.ended(cur, d, RecoverCancelled, why)
	p.Require = append([]plan.Fact{plan.SequenceAt{Repo: cur.Repo, PR: cur.PR, Kind: RecoverKind, Version: cur.Version}}, p.Require...)
	return commands.Result{Outcome: commands.Accepted, Reason: "recovery cancelled", Reply: mdtext.Mention(in.Actor.Login) + " " + strings.TrimPrefix(why, "⛔ ") + ".",
		Plan: p}
}

// step dispatches the recovery once, through the engine, then follows its
// run to its end.
func (h *Recoverer) step(ctx context.Context, _ *config.Repo, s seq.Step[RecoverData]) (string, plan.Plan, error) {
	gh, err := h.d.GitHub(s.Data.Installation)
	if err != nil {
		return "", plan.Plan{}, err
	}
	d := s.Data
	if d.RunID == 0 {
		return h.dispatch(ctx, gh, s)
	}
	run, err := gh.Run(ctx, s.Seq.Repo, d.RunID)
	if err != nil {
		return "", plan.Plan{}, err
	}
	link := "recovery run " + commands.RunLink(d.RunID, d.RunURL)
	if run.GetStatus() != "completed" {
		return h.wait(s, d, RecoverRunning, fmt.Sprintf("⏳ %s is %s", link, mdtext.Text(strings.ReplaceAll(run.GetStatus(), "_", " "))))
	}
	if run.GetConclusion() == "success" {
		return "recover-succeeded", h.ended(s.Seq, d, RecoverSucceeded, fmt.Sprintf("✅ %s succeeded: it dispatched the ingest with %s %d and %s %d. "+
			"opsbot does not see the downstream ingest: check that its rows reached the database", link, inputSource, d.Source, inputMerge, d.Target)), nil
	}
	return "recover-failed", h.ended(s.Seq, d, RecoverFailed, fmt.Sprintf("❌ %s ended %s: look at its log before asking again", link,
		mdtext.Code(run.GetConclusion()))), nil
}

// dispatch sends the recovery's dispatch, marked when it was asked: once,
// after the last stop check. An answer that does not say (lost, or a mark
// this process did not make) is never sent again: the maintainer is told
// to look at the workflow's runs first.
func (h *Recoverer) dispatch(ctx context.Context, gh *ghclient.Client, s seq.Step[RecoverData]) (string, plan.Plan, error) {
	d := s.Data
	if !h.acts.Fresh(d.Mark) {
		return "recover-unknown", h.ended(s.Seq, d, RecoverUnknown, fmt.Sprintf("⚠️ the dispatch of %s may have been sent before opsbot stopped: "+
			"look at its runs before asking again (opsbot does not dispatch it again)", mdtext.Code(d.Workflow))), nil
	}
	inputs := map[string]string{inputSource: fmt.Sprint(d.Source), inputMerge: fmt.Sprint(d.Target)}
	var got ghclient.DispatchedRun
	a, err := s.Send(ctx, seq.Act{Mark: d.Mark, Do: func(ctx context.Context) (err error) {
		got, err = gh.DispatchWorkflow(ctx, s.Seq.Repo, d.Workflow, d.Base, inputs, true)
		if errors.Is(err, ghclient.ErrNoRunDetails) {
			got, err = gh.DispatchWorkflow(ctx, s.Seq.Repo, d.Workflow, d.Base, inputs, false) // refused before anything ran
		}
		return err
	}})
	if err != nil {
		return "", plan.Plan{}, err // a stop waits, or the step ended: the next step finds the mark tried
	}
	what := fmt.Sprintf("%s with %s %d and %s %d", mdtext.Code(d.Workflow), inputSource, d.Source, inputMerge, d.Target)
	var ref *ghclient.Refusal
	switch {
	case a.Err == nil && got.ID != 0:
		d.RunID, d.RunURL = got.ID, got.URL
		if d.RunURL == "" {
			d.RunURL = h.d.Notices.Web.Run(s.Seq.Repo, got.ID)
		}
		d.Trail = append(slices.Clip(d.Trail), fmt.Sprintf("🛟 dispatched %s: run %s", what, commands.RunLink(d.RunID, d.RunURL)))
		return h.wait(s, d, RecoverRunning, "⏳ following run "+commands.RunLink(d.RunID, d.RunURL))
	case a.Err == nil:
		return "recover-dispatched", h.ended(s.Seq, d, RecoverDispatched, fmt.Sprintf("🛟 dispatched %s; GitHub named no run: follow it on the "+
			"workflow's runs", what)), nil
	case errors.As(a.Err, &ref):
		return "recover-refused", h.ended(s.Seq, d, RecoverFailed, fmt.Sprintf("⛔ GitHub refused to dispatch %s (%d: %s)", what, ref.Status,
			mdtext.Text(ref.Message))), nil
	}
	return "recover-unanswered", h.ended(s.Seq, d, RecoverUnknown, fmt.Sprintf("⚠️ GitHub did not answer the dispatch of %s: look at the "+
		"workflow's runs before asking again (opsbot does not dispatch it again)", what)), nil
}

// expire ends a recovery at its deadline.
func (h *Recoverer) expire(_ context.Context, rc *config.Repo, s seq.Step[RecoverData]) (string, plan.Plan, error) {
	what := "the dispatch was not sent"
	d := s.Data
	if !h.acts.Fresh(d.Mark) {
		what, d.MaySent = "the dispatch may have been sent, and no run of it was followed", true
	}
	if s.Data.RunID != 0 {
		what = "recovery run " + commands.RunLink(s.Data.RunID, s.Data.RunURL) + " did not finish"
	}
	d.MaySent = d.MaySent || d.RunID != 0
	return "recover-expired", h.ended(s.Seq, d, RecoverExpired, fmt.Sprintf("⌛ %s within %s: opsbot stopped following it", what,
		commands.Span(Section.Of(rc).Recover.Deadline))), nil
}

func recoverText(d RecoverData) string {
	return seq.Status{Title: fmt.Sprintf("🛟 **Ingest recovery**, asked by %s: run %s failed in %s; publishing from run %d without a GPU:",
		mdtext.Mention(d.By), commands.RunLink(d.Target, d.TargetURL), mdtext.Text(d.Job), d.Source), Trail: d.Trail, Now: d.Now}.Text()
}

func (h *Recoverer) edit(s *record.Sequence, d RecoverData) plan.Edit {
	return plan.Edit{Repo: s.Repo, PR: s.PR, Installation: d.Installation, Kind: string(notices.KindAfterMerge), Body: recoverText(d),
		Links: plan.Links{PR: h.d.Notices.Web.PR(s.Repo, s.PR), Run: d.RunURL}}
}

func (h *Recoverer) wait(s seq.Step[RecoverData], d RecoverData, step, now string) (string, plan.Plan, error) {
	was := s.Data
	d.Now = now
	ps, err := seq.Waiting{Cur: s.Seq, Step: step, WakeAt: s.Now.Add(Poll), Data: d,
		Is: seq.Status{Trail: d.Trail, Now: now}, Was: seq.Status{Trail: was.Trail, Now: was.Now},
		Edit:  func(next *record.Sequence) plan.Edit { return h.edit(next, d) },
		Audit: record.AuditRecord{Kind: record.AuditAfterMerge, RunID: d.RunID, HeadSHA: d.Merge, Reason: mdtext.Plain(mdtext.Parse(now))}}.Put()
	if err != nil {
		return "", plan.Plan{}, err
	}
	return "recover-" + strings.TrimPrefix(step, "recover_"), plan.Plan{Steps: []plan.Step{ps}}, nil
}

// ended ends a recovery at step, saying why.
func (h *Recoverer) ended(cur *record.Sequence, d RecoverData, step, why string) plan.Plan {
	var watched int64 // the run the PR's watch follows (0: unread)
	if h.d.State != nil {
		if w, err := h.d.State.Sequence(cur.Repo, cur.PR, SeqKind); err == nil && w != nil {
			if wd, err := seq.DataOf[Data](w); err == nil {
				watched = wd.RunID
			}
		}
	}
	next := *cur
	next.Step, next.Done, next.Why, next.WakeAt = step, true, step, time.Time{}
	d.Trail, d.Now = append(slices.Clip(d.Trail), why), ""
	next.Data, _ = json.Marshal(d) // plain fields: cannot fail
	e := h.edit(&next, d)
	audit := record.AuditRecord{Kind: record.AuditAfterMerge, Outcome: step, Repo: next.Repo, PR: next.PR, RunID: d.RunID, HeadSHA: d.Merge,
		ActorID: cur.ActorID, ActorLogin: cur.ActorLogin, Reason: fmt.Sprintf("recovery of run %d's ingest from run %d: %s", d.Target, d.Source,
			mdtext.Plain(mdtext.Parse(why)))}
	if step == RecoverSucceeded && d.RunID != 0 {
		audit.RunnerSeconds, audit.GPUSeconds = d.SavedRunner, d.SavedGPU // what a re-run of the sweep would have spent
	}
	audit.SetOrigin(cur.Origin())
	p := plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: cur.Version, Edit: &e, Audit: audit}}}
	if step == RecoverSucceeded && d.Target == watched {
		// The merge commit's check run offered the recovery: it says so now,
		// with no button (the watch ends at its next look).
		p.Steps = append(p.Steps, plan.CheckOffer{Repo: next.Repo, PR: next.PR, Installation: d.Installation, SHA: d.Merge, Name: CheckName,
			Conclusion: "success", Title: "After the merge: ingest recovered", Summary: fmt.Sprintf("%s\n\nAsked by %s on PR #%d.", why,
				mdtext.Mention(d.By), next.PR), RunID: d.Target})
	}
	return p
}

// isResult reports whether an artifact is one of the repository's result
// artifacts (repos[].result_artifacts, globs; none listed: every one).
func isResult(name string, globs []string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// TakeBack ends a recovery whose comment was deleted, or whose command was
// edited away, before its dispatch (by the one who asked, or someone with
// the command's role); after it, the dispatch stands and is audited so.
func (h *Recoverer) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	t, err := commands.TakeBackOf[RecoverData](env, ch, RecoverKind, func(d RecoverData) string { return d.Line })
	if err != nil || t == nil {
		return plan.Plan{}, err
	}
	rec := record.AuditRecord{Kind: record.AuditAfterMerge, RunID: t.Data.Target, HeadSHA: t.Data.Merge}
	if p, kept, err := t.Kept(ctx, env, ch, "asked @"+t.Data.By+"'s recovery", "stopping it", "it goes on", rec); kept || err != nil {
		return p, err
	}
	if t.Data.RunID != 0 || !h.acts.Fresh(t.Data.Mark) {
		rec.Outcome = "not_cancelled"
		rec.Reason = fmt.Sprintf("@%s %s that asked @%s's recovery after its dispatch may have reached GitHub: it goes on", ch.Actor.Login,
			t.Did, t.Data.By)
		return plan.Plan{Require: []plan.Fact{t.Guard}, Steps: []plan.Step{plan.Audit{Record: commands.AuditOf(ch.Invocation, rec)}}}, nil
	}
	p := h.ended(t.Cur, t.Data, RecoverCancelled, fmt.Sprintf("⛔ taken back before the dispatch: %s %s; nothing was dispatched", t.Who, t.Did))
	p.Require = append([]plan.Fact{t.Guard}, p.Require...)
	return p, nil
}
