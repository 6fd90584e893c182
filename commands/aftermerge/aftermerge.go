// Package aftermerge follows a merged PR to its default branch's run: when
// a PR opsbot decided (a decision for its merge commit or its merged head)
// is merged into the default branch, by anyone or by the merge queue, a
// sequence follows the configured workflow's push run on the merge commit
// (polled; durable across restarts; until its deadline) and says on the
// PR, in one comment it keeps up to date and that names the author, how
// the run ended: on success, whether its ingest job ran and what opsbot
// decided for the merged head (the run it reused and who authorized it, or
// its own sweep), and, with after_merge.downstream, the results
// repository's ingest run found by its run-name, its outcome and whether
// its source run is the one opsbot's audit holds; on a failure,
// the failed jobs with their links, and whether they failed before the
// results were gathered or only in the ingest after it. The audit keeps
// each step (record.AuditAfterMerge). No command: a kind, the pull_request
// route that begins it, and a section.
package aftermerge

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
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

// SeqKind is the watch's sequence kind.
const SeqKind = "after_merge"

// The watch's steps.
const (
	StepWaiting   = "waiting_run" // no run on the merge commit yet
	StepRunning   = "running"     // the run found, not completed
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	StepRerun     = "rerun" // a re-run opsbot asked (/rerun-failed): its attempt followed
	StepExpired   = "expired"
	// StepIngestFailed: the main run succeeded, and the results
	// repository's ingest run it started did not (after_merge.downstream).
	StepIngestFailed = "ingest_failed"
	// StepRecovered: the failed run's ingest was recovered
	// (/recover-ingest succeeded), and the watch stopped following it.
	StepRecovered = "recovered"
)

// Poll is how often the watch looks for the run on the merge commit, and
// for the attempt a re-run it asked for begins; RunPoll how often it reads
// a run that is not completed, and RerunPoll, after a failed attempt, how
// often it looks for a re-run: the run's workflow_run completion wakes it
// at once (the merge commit is the watch's, record.Sequence.Commits), and
// these polls find what a lost webhook did not say.
const (
	Poll      = time.Minute
	RunPoll   = 10 * time.Minute
	RerunPoll = 5 * time.Minute
)

// Settings is repos[].after_merge.
type Settings struct {
	// Follow turns the watch on.
	Follow bool `yaml:"follow"`
	// Workflow is the workflow whose push run on the merge commit is
	// followed ("": repos[].sweep_workflow).
	Workflow string `yaml:"workflow"`
	// IngestJob is the name of the job that dispatches the ingest, after
	// the results were gathered ("": none named; every failure is said to
	// be before the results were gathered).
	IngestJob string `yaml:"ingest_job"`
	// Deadline is how long the watch waits for the run to end.
	Deadline time.Duration `yaml:"deadline"`
	// Rerun is who may re-run a failed run's failed jobs (/rerun-failed).
	Rerun config.Access `yaml:"rerun"`
	// Recover is /recover-ingest's: the recovery workflow, its role and
	// deadline.
	Recover RecoverSettings `yaml:"recover"`
	// Downstream is the results repository whose ingest run the main
	// run's dispatch starts ("": not followed).
	Downstream DownstreamSettings `yaml:"downstream"`
}

// Section is the watch's own section of a repository's configuration.
var Section = config.Typed[Settings]{
	Key: "after_merge",
	Defaults: func(s *Settings) {
		if s.Deadline == 0 {
			s.Deadline = 12 * time.Hour
		}
		if s.Recover.MinRole == "" {
			s.Recover.MinRole = "maintain" // a dispatch to the production ingest
		}
		if s.Recover.Deadline == 0 {
			s.Recover.Deadline = 2 * time.Hour
		}
	},
	Check: func(r *config.Repo, s *Settings) []config.SectionProblem {
		var out []config.SectionProblem
		if s.Deadline < 10*time.Minute || s.Deadline > 7*24*time.Hour {
			out = append(out, config.SectionProblem{Key: "deadline", Message: fmt.Sprintf("%v is out of range: from 10m to 168h (for example 12h)", s.Deadline)})
		}
		if w := s.Recover.Workflow; w != "" && (!strings.HasPrefix(w, ".github/workflows/") || strings.Contains(strings.TrimPrefix(w, ".github/workflows/"), "/")) {
			out = append(out, config.SectionProblem{Key: "recover.workflow", Message: fmt.Sprintf("%q is not a workflow file: give its path, such as .github/workflows/recover-reused-ingest.yml", w)})
		}
		if d := s.Recover.Deadline; d < 10*time.Minute || d > 24*time.Hour {
			out = append(out, config.SectionProblem{Key: "recover.deadline", Message: fmt.Sprintf("%v is out of range: from 10m to 24h (for example 2h)", d)})
		}
		if d := s.Downstream; d.Repo != "" || d.Workflow != "" {
			if o, n, ok := strings.Cut(d.Repo, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
				out = append(out, config.SectionProblem{Key: "downstream.repo", Message: fmt.Sprintf("%q is not a repository: give owner/name, such as SemiAnalysisAI/InferenceX-results", d.Repo)})
			}
			if !strings.HasPrefix(d.Workflow, ".github/workflows/") || strings.Contains(strings.TrimPrefix(d.Workflow, ".github/workflows/"), "/") {
				out = append(out, config.SectionProblem{Key: "downstream.workflow", Message: fmt.Sprintf("%q is not a workflow file: give the path of the results repository's ingest workflow, such as .github/workflows/ingest.yml", d.Workflow)})
			}
		}
		if s.Workflow != "" && !strings.HasPrefix(s.Workflow, ".github/workflows/") {
			out = append(out, config.SectionProblem{Key: "workflow", Message: fmt.Sprintf("%q is not a workflow file: give its path, such as .github/workflows/run-sweep.yml", s.Workflow)})
		}
		return out
	},
}

// workflowOf is the workflow the watch follows in rc.
func workflowOf(rc *config.Repo) string {
	if w := Section.Of(rc).Workflow; w != "" {
		return w
	}
	return rc.SweepWorkflow
}

// Handler begins and steps the watches, and takes /rerun-failed.
type Handler struct {
	d commands.Deps
	// acts are the engine's act marks (commands.Deps.Acts): the re-runs
	// this process asked for.
	acts *seq.Marks
}

// Module is the watch: its kind, its section, and /rerun-failed.
func Module(d commands.Deps) commands.Module {
	h := &Handler{d: d, acts: commands.ActsOf(d)}
	sec := Section.Section()
	return commands.Module{Spec: rerunSpec(h), Kinds: []seq.Kind{Kind(h)}, Section: &sec}
}

// Kind is the watch's sequence: a merged PR's pull_request delivery begins
// it (its route's Record); a workflow run's completion on the merge commit
// wakes it, and polls step it where a webhook is lost.
func Kind(h *Handler) seq.Kind {
	return seq.Typed[Data]{Name: SeqKind, Step: h.step, Expire: h.expire,
		Routes: []seq.Route{{Event: "pull_request", Record: h.merged}, seq.On("workflow_run")},
		Teller: func() plan.Teller { return h.d.Notices.Teller() }}.Kind()
}

// Data is a watch's record.
type Data struct {
	Installation int64  `json:"installation"`
	Author       string `json:"author"`
	Head         string `json:"head"`  // the merged head
	Merge        string `json:"merge"` // the merge commit
	Base         string `json:"base"`
	Workflow     string `json:"workflow"`
	WorkflowID   int64  `json:"workflow_id,omitempty"` // read once
	// Source is the run opsbot's decision for the merged head reused
	// (0: none: the merge's run sweeps itself), authorized by SourceBy.
	Source int64 `json:"source,omitempty"`
	// Within is the deadline's span when the watch began.
	Within   time.Duration `json:"within,omitempty"`
	SourceBy string        `json:"source_by,omitempty"`
	// NoReuse is why the PR's labels at the merge allow no reuse ("": they
	// do): the push gate then sweeps the merge.
	NoReuse string `json:"no_reuse,omitempty"`
	RunID   int64  `json:"run_id,omitempty"`
	// Attempt is the run's attempt that failed last (0: none).
	Attempt int      `json:"attempt,omitempty"`
	RunURL  string   `json:"run_url,omitempty"`
	Trail   []string `json:"trail,omitempty"`
	Now     string   `json:"now,omitempty"`
	// Failed is what the watch read of the attempt that failed last.
	Failed *Failure `json:"failed,omitempty"`
	// Rerun is a maintainer's ask to re-run that attempt's failed jobs
	// (/rerun-failed): one per attempt.
	Rerun *Rerun `json:"rerun,omitempty"`
	// Reruns counts the re-runs opsbot asked GitHub for.
	Reruns int `json:"reruns,omitempty"`
	// Downstream is the results repository's ingest run, once the main
	// run succeeded (after_merge.downstream).
	Downstream *Downstream `json:"downstream,omitempty"`
	// Checked says the merge commit's check run (CheckName) offered a
	// button: the watch's end replaces it with one that says how it ended.
	Checked bool `json:"checked,omitempty"`
}

// Failure is a failed attempt as /rerun-failed says it: its failed jobs
// (the first maxJobsSaid named), those of them that ran on GPU runners
// and their time by the run's own timing, and whether only the ingest
// failed, after the results were gathered, or the run was cancelled.
type Failure struct {
	Attempt    int      `json:"attempt"`
	Jobs       int      `json:"jobs"`
	Names      []string `json:"names,omitempty"`
	GPUJobs    int      `json:"gpu_jobs,omitempty"`
	GPURunner  int64    `json:"gpu_runner_seconds,omitempty"`
	GPUSeconds int64    `json:"gpu_seconds,omitempty"`
	IngestOnly bool     `json:"ingest_only,omitempty"`
	// IngestFailed says the ingest job named failed, alone or not: the
	// results were gathered before it.
	IngestFailed bool `json:"ingest_failed,omitempty"`
	Cancelled    bool `json:"cancelled,omitempty"`
	// Forgotten says the run ran GPU jobs although opsbot decided the
	// merged head by reuse (forgotten).
	Forgotten bool `json:"forgotten,omitempty"`
}

// forgotten warns where the main run ran its GPU jobs (gpus,
// repos[].gpus_per_runner: any not skipped, cancelled ones too) although
// opsbot decided the merged head by reuse of a run: the reuse was
// forgotten on the way to main (the recovery procedure's case), and the
// ingest may have taken this run's own id as its source. "": nothing to say
// (no reuse decided, no GPU job ran, or GPU runners unknown).
func forgotten(d Data, jobs []ghclient.Job, gpus map[string]int) string {
	if d.Source == 0 || d.NoReuse != "" {
		return ""
	}
	var ran []string
	for _, j := range jobs {
		if ranOnGPU(j, gpus) {
			ran = append(ran, mdtext.Code(j.Name))
		}
	}
	if len(ran) == 0 {
		return ""
	}
	n, more := len(ran), ""
	if n > 3 {
		ran, more = ran[:3], fmt.Sprintf(" and %d more", n-3)
	}
	return fmt.Sprintf(". ⚠️ It ran %d GPU %s (%s%s) although opsbot decided the merged head %s by reuse of run %d: the reuse was "+
		"forgotten on the way to %s, and the ingest may have taken this run's own id as its source. Check the ingest; the "+
		"repository's recovery procedure publishes from run %d", n, plural(n, "job", "jobs"), strings.Join(ran, ", "), more,
		mdtext.Code(mdtext.ShortSHA(d.Head)), d.Source, mdtext.Code(d.Base), d.Source)
}

func (h *Handler) now() time.Time {
	if h.d.Now != nil {
		return h.d.Now()
	}
	return time.Now()
}

// closedPayload is the part of a pull_request delivery the watch reads.
type closedPayload struct {
	Action      string `json:"action"`
	PullRequest struct {
		Merged         bool      `json:"merged"`
		MergedAt       time.Time `json:"merged_at"`
		MergeCommitSHA string    `json:"merge_commit_sha"`
		User           struct {
			Login string `json:"login"`
		} `json:"user"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
		Head struct {
			SHA string `json:"sha"`
		} `json:"head"`
		Base struct {
			Ref string `json:"ref"`
		} `json:"base"`
	} `json:"pull_request"`
	Repository struct {
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
}

// merged begins the watch of a PR merged into the default branch whose
// merged head opsbot decided; any other pull_request delivery, a PR
// merged elsewhere, one opsbot never decided, or one merged longer ago
// than the watch's deadline, says nothing.
func (h *Handler) merged(_ context.Context, rc *config.Repo, d seq.Delivered) (string, seq.Write, error) {
	if !Section.Of(rc).Follow || d.Action != "closed" {
		return "", nil, nil
	}
	var ev closedPayload
	var err error
	if err = json.Unmarshal(d.Body, &ev); err != nil {
		return "", nil, fmt.Errorf("reading a closed pull request: %w", err)
	}
	pr := ev.PullRequest
	head, merge := strings.ToLower(pr.Head.SHA), strings.ToLower(pr.MergeCommitSHA)
	if !pr.Merged || !ghclient.FullSHA(merge) || !ghclient.FullSHA(head) || pr.Base.Ref == "" || pr.Base.Ref != ev.Repository.DefaultBranch {
		return "", nil, nil
	}
	if !pr.MergedAt.IsZero() && h.now().Sub(pr.MergedAt) > Section.Of(rc).Deadline {
		// A merge older than the watch's deadline (a lost close a reconcile
		// took in late): its run is history, and a watch would offer to
		// re-run or recover it.
		return "after-merge-too-old", nil, nil
	}
	if h.d.State == nil {
		return "", nil, fmt.Errorf("aftermerge: no state reader")
	}
	// The merge commit's decision first (opsbot's merge consumed a pin
	// there), then the merged head's: as the gate reads a push of the merge.
	var dec *record.Decision
	for _, sha := range []string{merge, head} {
		if dec != nil {
			break
		}
		if dec, err = h.d.State.Decision(rc.Name, d.PR, sha); err != nil {
			return "", nil, err
		}
	}
	if dec == nil {
		return "", nil, nil // a PR opsbot never decided: nothing to say
	}
	data := Data{Installation: ev.Installation.ID, Author: pr.User.Login, Head: head, Merge: merge, Base: pr.Base.Ref, Workflow: workflowOf(rc),
		Within: Section.Of(rc).Deadline}
	if dec.Decision == record.Skip {
		// Skipped, Sweep anyway or not: the run reused covers the head.
		data.Source, data.SourceBy = dec.RunID, dec.ActorLogin
		labels := make([]string, 0, len(pr.Labels))
		for _, l := range pr.Labels {
			labels = append(labels, l.Name)
		}
		// The push gate reuses nothing for a merge whose PR's labels
		// allow no reuse (gate/api.go): its main run sweeps, as meant.
		if rej := runs.LabelRejection(d.PR, rc.Reuse.Judge(labels, false)); rej != nil {
			data.NoReuse = rej.Reason
		}
	}
	now := h.now()
	data.Now = fmt.Sprintf("⏳ opsbot follows the run of %s on %s (until %s)", mdtext.Code(data.Workflow), mdtext.Code(data.Base),
		now.Add(Section.Of(rc).Deadline).UTC().Format("Jan 2 15:04 UTC"))
	raw, err := json.Marshal(data)
	if err != nil {
		return "", nil, err
	}
	s := record.Sequence{Kind: SeqKind, Repo: rc.Name, PR: d.PR, Step: StepWaiting, Head: head, Commits: []string{merge}, Data: raw,
		ActorLogin: data.Author, WakeAt: now, Deadline: now.Add(Section.Of(rc).Deadline)}
	status := plan.Comment{Repo: rc.Name, PR: d.PR, Installation: data.Installation, Kind: string(notices.KindAfterMerge),
		Body: statusText(&s, data), Links: plan.Links{PR: h.d.Notices.Web.PR(rc.Name, d.PR)}}
	reused := "its own sweep"
	if data.Source != 0 {
		reused = fmt.Sprintf("reused run %d, authorized by @%s", data.Source, data.SourceBy)
	}
	// RunID is the main run's, once found: the run the merged head reused
	// is in the words.
	audit := record.AuditRecord{Kind: record.AuditAfterMerge, Outcome: StepWaiting, Repo: rc.Name, PR: d.PR, HeadSHA: merge,
		ActorLogin: data.Author, Reason: fmt.Sprintf("merged head %s (%s) into %s as %s; following %s", mdtext.ShortSHA(head), reused,
			data.Base, mdtext.ShortSHA(merge), data.Workflow)}
	p := plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: s, Status: &status, Audit: audit}}}
	t := h.d.Notices.Teller()
	return "after-merge-following", func(tx record.Tx) error {
		cur, err := tx.Sequence(rc.Name, d.PR, SeqKind)
		if err != nil || (cur != nil && !cur.Done) {
			return err // one follows already (a closed delivery again)
		}
		if cur != nil {
			was, err := seq.DataOf[Data](cur)
			if err != nil {
				return err
			}
			if was.Merge == merge {
				return nil // this merge was followed already: said once
			}
		}
		return plan.Apply(tx, t, p)
	}, nil
}

func statusText(s *record.Sequence, data Data) string {
	return seq.Status{Title: fmt.Sprintf("🚀 **After the merge**, for %s: merge commit %s of head %s on %s:", mdtext.Mention(data.Author),
		mdtext.Code(mdtext.ShortSHA(data.Merge)), mdtext.Code(mdtext.ShortSHA(data.Head)), mdtext.Code(data.Base)),
		Trail: data.Trail, Now: data.Now}.Text()
}

func (h *Handler) edit(s *record.Sequence, data Data) plan.Edit {
	return plan.Edit{Repo: s.Repo, PR: s.PR, Installation: data.Installation, Kind: string(notices.KindAfterMerge),
		Body: statusText(s, data), Links: plan.Links{PR: h.d.Notices.Web.PR(s.Repo, s.PR), Run: data.RunURL}}
}

// step reads the merge commit's run of the workflow: none yet, or not
// completed, waits for the next poll; completed, the watch ends saying how.
func (h *Handler) step(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	gh, err := h.d.GitHub(s.Data.Installation)
	if err != nil {
		return "", plan.Plan{}, err
	}
	data := s.Data
	if data.WorkflowID == 0 {
		if data.WorkflowID, err = gh.WorkflowID(ctx, s.Seq.Repo, data.Workflow); err != nil {
			return "", plan.Plan{}, err
		}
	}
	if s.Seq.Step == StepFailed {
		// A recovery that succeeded ends the watch, before a re-run asked
		// meanwhile is sent: it would publish the results again.
		if why, err := h.recovered(s); err != nil || why != "" {
			if err != nil {
				return "", plan.Plan{}, err
			}
			return h.end(s, data, StepRecovered, why, "")
		}
	}
	if r := data.Rerun; r != nil && !r.Sent && r.Attempt == data.Attempt && s.Seq.Step == StepFailed {
		return h.rerun(ctx, gh, s, data)
	}
	if s.Seq.Step == StepDownstream && data.Downstream != nil {
		return h.downstream(ctx, gh, s, *Section.Of(rc))
	}
	id := data.WorkflowID
	list, err := gh.CommitRuns(ctx, s.Seq.Repo, s.Data.Merge)
	if err != nil {
		return "", plan.Plan{}, err
	}
	var run *github.WorkflowRun
	for _, r := range list {
		if r.GetWorkflowID() == id && r.GetEvent() == "push" && r.GetHeadBranch() == s.Data.Base && strings.EqualFold(r.GetHeadSHA(), s.Data.Merge) &&
			(run == nil || r.GetID() > run.GetID()) {
			run = r
		}
	}
	if run == nil {
		return h.wait(s, data, StepWaiting, "⏳ no run of "+mdtext.Code(data.Workflow)+" on the merge commit yet", "after-merge-waiting", Poll)
	}
	if data.RunID != 0 && run.GetID() != data.RunID {
		// Another run of the workflow on the merge commit (pushed again):
		// the failure read, and a re-run asked, were the older run's.
		data.Attempt, data.Failed, data.Rerun = 0, nil, nil
	}
	data.RunID, data.RunURL = run.GetID(), run.GetHTMLURL()
	attempt := max(run.GetRunAttempt(), 1)
	if run.GetStatus() != "completed" {
		what := "run " + commands.RunLink(data.RunID, data.RunURL)
		if attempt > 1 {
			what = fmt.Sprintf("attempt %d of run %s", attempt, commands.RunLink(data.RunID, data.RunURL))
		}
		return h.wait(s, data, StepRunning, fmt.Sprintf("⏳ %s is %s", what, mdtext.Text(strings.ReplaceAll(run.GetStatus(), "_", " "))),
			"after-merge-running", RunPoll)
	}
	if data.Attempt != 0 && attempt <= data.Attempt {
		if s.Seq.Step == StepRerun {
			return h.wait(s, data, StepRerun, data.Now, "after-merge-rerun-not-seen", Poll) // GitHub shows the new attempt shortly
		}
		return h.wait(s, data, StepFailed, data.Now, "after-merge-failed", RerunPoll) // no re-run yet
	}
	jobs, err := gh.RunJobs(ctx, s.Seq.Repo, data.RunID, attempt)
	if err != nil {
		return "", plan.Plan{}, err
	}
	ingest := Section.Of(rc).IngestJob
	forgot := forgotten(data, jobs, rc.GPUsPerRunner)
	if run.GetConclusion() == "success" {
		return h.succeededThen(s, data, succeeded(data, jobs, ingest)+forgot, ingest != "" && ingestRan(jobs, ingest), run.GetUpdatedAt().Time, *Section.Of(rc))
	}
	errs := map[int64]string{}
	for i, j := range failedJobs(jobs) {
		if i == maxErrorsRead {
			break
		}
		if errs[j.ID], err = gh.FirstError(ctx, s.Seq.Repo, j.ID); err != nil {
			return "", plan.Plan{}, err
		}
	}
	// A failed attempt is said, and the watch follows a re-run until its
	// deadline (a failure is often a flake).
	data.Attempt = attempt
	data.Failed = failureOf(attempt, run.GetConclusion(), jobs, ingest, rc.GPUsPerRunner)
	data.Failed.Forgotten = forgot != ""
	data.Trail = append(slices.Clip(data.Trail), failed(data, mdtext.Text(run.GetConclusion()), jobs, errs, ingest)+forgot)
	deadline := s.Seq.Deadline.UTC().Format("Jan 2 15:04 UTC")
	o := offer(s, data, *Section.Of(rc), h.d.Notices.Web)
	if len(o) == 0 && data.Checked {
		o = []plan.Step{checkFailed(s, data)} // the older attempt's button goes: this attempt offers none
	}
	data.Checked = data.Checked || len(o) > 0
	out, p, err := h.wait(s, data, StepFailed, "⏳ opsbot follows a re-run of the failed jobs until "+deadline, "after-merge-failed", RerunPoll)
	if err == nil {
		p.Steps = append(p.Steps, o...)
	}
	return out, p, err
}

// succeeded says the run succeeded, whether its ingest job ran (when one
// is named), and what opsbot decided for the merged head: the run it
// reused, and who authorized it, or its own sweep. What the ingest took is
// the results repository's ingest run's to say (succeededThen).
func succeeded(d Data, jobs []ghclient.Job, ingestJob string) string {
	run := commands.RunLink(d.RunID, d.RunURL)
	var b strings.Builder
	fmt.Fprintf(&b, "✅ run %s on %s succeeded", run, mdtext.Code(d.Base))
	if d.Attempt != 0 {
		fmt.Fprintf(&b, " at its re-run (attempt %d failed)", d.Attempt)
	}
	if ingestJob != "" {
		ran := false
		for _, j := range jobs {
			if isJob(j, ingestJob) && j.Conclusion == "success" {
				ran = true
			}
		}
		if ran {
			fmt.Fprintf(&b, ", its ingest job %s too", mdtext.Code(ingestJob))
		} else {
			fmt.Fprintf(&b, ", but ⚠️ its ingest job %s did not run: nothing was dispatched to the ingest from it", mdtext.Code(ingestJob))
		}
	}
	switch {
	case d.Source != 0 && d.NoReuse != "":
		fmt.Fprintf(&b, ". opsbot decided the merged head %s by reuse of run %d, authorized by %s, but the PR's labels at the merge "+
			"allow no reuse (%s): opsbot's gate gives a push of this merge no source run, and its run sweeps",
			mdtext.Code(mdtext.ShortSHA(d.Head)), d.Source, mdtext.Mention(d.SourceBy), mdtext.Text(d.NoReuse))
	case d.Source != 0:
		fmt.Fprintf(&b, ". opsbot decided the merged head %s by reuse of run %d, authorized by %s: the source run opsbot's gate gives a "+
			"push of this merge while the PR's labels allow reuse", mdtext.Code(mdtext.ShortSHA(d.Head)), d.Source, mdtext.Mention(d.SourceBy))
	default:
		fmt.Fprintf(&b, ". opsbot reused nothing for the merged head %s: it ran its own sweep", mdtext.Code(mdtext.ShortSHA(d.Head)))
	}
	return b.String()
}

// isJob reports whether j is the job named (a matrix job's name follows
// it after a space).
func isJob(j ghclient.Job, name string) bool {
	return j.Name == name || strings.HasPrefix(j.Name, name+" ")
}

// maxJobsSaid bounds the failed jobs a status comment lists, and
// maxErrorsRead those whose first error it says (a read each).
const (
	maxJobsSaid   = 10
	maxErrorsRead = 5
)

// failedJobs are the jobs that failed (timed out, were cancelled, did not
// start), by name.
func failedJobs(jobs []ghclient.Job) []ghclient.Job {
	var bad []ghclient.Job
	for _, j := range jobs {
		switch j.Conclusion {
		case "failure", "timed_out", "cancelled", "startup_failure":
			bad = append(bad, j)
		}
	}
	slices.SortStableFunc(bad, func(a, b ghclient.Job) int { return strings.Compare(a.Name, b.Name) })
	return bad
}

// failed lists the failed jobs, with the first error of those read
// (errs), and says whether they failed before the
// results were gathered (the GPU jobs, or what they need) or only in the
// ingest after it (ingestJob), where a re-run of the GPU jobs is not the way.
func failed(d Data, conclusion string, jobs []ghclient.Job, errs map[int64]string, ingestJob string) string {
	bad := failedJobs(jobs)
	var b strings.Builder
	fmt.Fprintf(&b, "❌ run %s on %s ended %s", commands.RunLink(d.RunID, d.RunURL), mdtext.Code(d.Base), mdtext.Code(conclusion))
	if d.Attempt > 1 {
		fmt.Fprintf(&b, " at attempt %d", d.Attempt)
	}
	if len(bad) == 0 {
		b.WriteString(" with no job failed (GitHub's run page says why)")
		return b.String()
	}
	names := make([]string, 0, len(bad))
	onlyIngest := ingestOnly(bad, ingestJob)
	for i, j := range bad {
		if i < maxJobsSaid {
			said := fmt.Sprintf("%s (%s", mdtext.Link(mdtext.Text(j.Name), j.URL), mdtext.Text(j.Conclusion))
			if e := errs[j.ID]; e != "" {
				said += ": " + mdtext.Clip(mdtext.Text(e), 200)
			}
			names = append(names, said+")")
		}
	}
	fmt.Fprintf(&b, ": %d %s failed: %s", len(bad), plural(len(bad), "job", "jobs"), strings.Join(names, ", "))
	if len(bad) > maxJobsSaid {
		fmt.Fprintf(&b, ", and %d more", len(bad)-maxJobsSaid)
	}
	switch {
	case conclusion == "cancelled" && ingestRan(jobs, ingestJob):
		fmt.Fprintf(&b, ". It was cancelled (by hand, or by a newer run of its concurrency group), yet its ingest job %s succeeded: "+
			"check what it ingested", mdtext.Code(ingestJob))
	case conclusion == "cancelled":
		b.WriteString(". It was cancelled (by hand, or by a newer run of its concurrency group): nothing was ingested from it")
	case onlyIngest:
		b.WriteString(". Only the ingest failed, after the results were gathered: re-running the GPU jobs is not the way; recover the " +
			"ingest from the gathered results (`/recover-ingest` where it is configured, or the repository's recovery procedure)")
	case d.Failed != nil && d.Failed.Forgotten:
		b.WriteString(". It failed before the results were gathered") // the warning after it says what to do
	default:
		b.WriteString(". It failed before the results were gathered: re-running the failed jobs is the way (a failure is often a flake): " +
			"`/rerun-failed` asks GitHub to, once per attempt")
	}
	return b.String()
}

// ingestRan reports whether the ingest job named succeeded.
func ingestRan(jobs []ghclient.Job, ingestJob string) bool {
	for _, j := range jobs {
		if ingestJob != "" && isJob(j, ingestJob) && j.Conclusion == "success" {
			return true
		}
	}
	return false
}

// ingestOnly reports whether the failed jobs (bad, not empty) are the
// ingest job named alone: the results were gathered before it.
func ingestOnly(bad []ghclient.Job, ingestJob string) bool {
	only := ingestJob != "" && len(bad) > 0
	for _, j := range bad {
		only = only && isJob(j, ingestJob)
	}
	return only
}

// failureOf is what /rerun-failed says of a failed attempt: its failed
// jobs, and the GPU jobs a re-run runs again (gpus, repos[].gpus_per_runner:
// those failed, and those skipped because a job they need failed) with the
// time those that ran took, from the jobs' own start and end.
func failureOf(attempt int, conclusion string, jobs []ghclient.Job, ingestJob string, gpus map[string]int) *Failure {
	bad := failedJobs(jobs)
	f := &Failure{Attempt: attempt, Jobs: len(bad), IngestOnly: conclusion != "cancelled" && ingestOnly(bad, ingestJob),
		Cancelled: conclusion == "cancelled"}
	for i, j := range bad {
		if i < maxJobsSaid {
			f.Names = append(f.Names, j.Name)
		}
		f.IngestFailed = f.IngestFailed || (ingestJob != "" && isJob(j, ingestJob))
	}
	for _, j := range jobs {
		if j.Conclusion == "success" || gpusOf(j, gpus) == 0 {
			continue
		}
		f.GPUJobs++
		if c := runs.CoverageOf([]ghclient.Job{j}, gpus); c.GPUSeconds > 0 {
			f.GPURunner += c.RunnerSeconds
			f.GPUSeconds += c.GPUSeconds
		}
	}
	return f
}

// ranOnGPU reports whether j ran on a GPU runner: it came to a verdict
// (succeeded, failed, timed out), or was cancelled after running a minute
// or more (a job cancelled while queued, or at once, did not run).
func ranOnGPU(j ghclient.Job, gpus map[string]int) bool {
	if gpusOf(j, gpus) == 0 {
		return false
	}
	switch j.Conclusion {
	case "success", "failure", "timed_out":
		return true
	case "cancelled":
		return !j.Started.IsZero() && j.Completed.Sub(j.Started) >= time.Minute
	}
	return false
}

// gpusOf is how many GPUs the runner of j has, by its labels (0: not a GPU
// runner, or none of gpus matches).
func gpusOf(j ghclient.Job, gpus map[string]int) int {
	n := 0
	for glob, g := range gpus {
		for _, l := range j.Labels {
			if ok, _ := path.Match(glob, l); ok && g > n {
				n = g
			}
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// recovered says, for a watch whose run failed, that a recovery of that
// run's ingest succeeded ("": none did).
func (h *Handler) recovered(s seq.Step[Data]) (string, error) {
	if h.d.State == nil {
		return "", nil
	}
	r, err := h.d.State.Sequence(s.Seq.Repo, s.Seq.PR, RecoverKind)
	if err != nil || r == nil || !r.Done || r.Step != RecoverSucceeded {
		return "", err
	}
	rd, err := seq.DataOf[RecoverData](r)
	if err != nil || rd.Target != s.Data.RunID {
		return "", err
	}
	return fmt.Sprintf("🛟 the ingest of run %s was recovered by recovery run %s, asked by %s: opsbot stopped following the run",
		commands.RunLink(s.Data.RunID, s.Data.RunURL), commands.RunLink(rd.RunID, rd.RunURL), mdtext.Mention(rd.By)), nil
}

// expire ends the watch at its deadline.
func (h *Handler) expire(_ context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	what := "no run of " + mdtext.Code(s.Data.Workflow) + " on the merge commit was found"
	step := StepExpired
	switch {
	case s.Seq.Step == StepDownstream && s.Data.Downstream != nil && s.Data.Downstream.RunID == 0:
		what, step = fmt.Sprintf("no ingest run of %s named for merge run %d was found", mdtext.Code(s.Data.Downstream.Repo), s.Data.RunID), StepSucceeded
	case s.Seq.Step == StepDownstream && s.Data.Downstream != nil:
		what, step = fmt.Sprintf("the ingest run %s of %s did not finish", commands.RunLink(s.Data.Downstream.RunID, s.Data.Downstream.RunURL),
			mdtext.Code(s.Data.Downstream.Repo)), StepSucceeded
	case s.Seq.Step == StepFailed || s.Seq.Step == StepRerun:
		what, step = "no re-run of run "+commands.RunLink(s.Data.RunID, s.Data.RunURL)+" succeeded", StepFailed
	case s.Data.RunID != 0:
		what = "run " + commands.RunLink(s.Data.RunID, s.Data.RunURL) + " did not finish"
	}
	within := s.Data.Within
	if within == 0 {
		within = Section.Of(rc).Deadline
	}
	return h.end(s, s.Data, step, fmt.Sprintf("⌛ %s within %s of the merge: opsbot stopped following it", what,
		commands.Span(within)), "")
}

// wait waits for the next poll, the status comment edited when what it
// says changed.
func (h *Handler) wait(s seq.Step[Data], data Data, step, now, out string, after time.Duration) (string, plan.Plan, error) {
	was := s.Data
	data.Now = now
	reason := now
	if len(data.Trail) > len(was.Trail) {
		reason = data.Trail[len(data.Trail)-1] // what happened: a failed attempt
	}
	cur := s.Seq
	if !slices.Contains(cur.Commits, data.Merge) && len(cur.Commits) < record.MaxCommits {
		// A watch stored before watches held their merge commit: its run's
		// completion wakes it from its next write on.
		c := *cur
		c.Commits = append(slices.Clip(c.Commits), data.Merge)
		cur = &c
	}
	ps, err := seq.Waiting{Cur: cur, Step: step, WakeAt: s.Now.Add(after), Data: data,
		Is: seq.Status{Trail: data.Trail, Now: now}, Was: seq.Status{Trail: was.Trail, Now: was.Now},
		Edit:  func(next *record.Sequence) plan.Edit { return h.edit(next, data) },
		Audit: record.AuditRecord{Kind: record.AuditAfterMerge, RunID: data.RunID, HeadSHA: data.Merge, Reason: mdtext.Plain(mdtext.Parse(reason))}}.Put()
	if err != nil {
		return "", plan.Plan{}, err
	}
	return out, plan.Plan{Steps: []plan.Step{ps}}, nil
}

// end ends the watch at step, saying why.
func (h *Handler) end(s seq.Step[Data], data Data, step, why, conclusion string) (string, plan.Plan, error) {
	next := *s.Seq
	next.Step, next.Done, next.Why, next.WakeAt = step, true, step, time.Time{}
	data.Trail, data.Now = append(slices.Clip(data.Trail), why), ""
	raw, err := json.Marshal(data)
	if err != nil {
		return "", plan.Plan{}, err
	}
	next.Data = raw
	edit := h.edit(&next, data)
	reason := mdtext.Plain(mdtext.Parse(why))
	if conclusion != "" {
		reason = conclusion + ": " + reason
	}
	audit := record.AuditRecord{Kind: record.AuditAfterMerge, Outcome: step, Repo: next.Repo, PR: next.PR, RunID: data.RunID, HeadSHA: data.Merge,
		ActorLogin: data.Author, Reason: reason}
	p := plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: s.Seq.Version, Edit: &edit, Audit: audit}}}
	if data.Checked {
		p.Steps = append(p.Steps, checkEnded(s, data, step, why))
	}
	return "after-merge-" + step, p, nil
}
