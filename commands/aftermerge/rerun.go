package aftermerge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

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

// RerunName is /rerun-failed's canonical name.
const RerunName = "rerun-failed"

// Rerun is a maintainer's ask to re-run the failed jobs of the attempt
// that failed (Attempt), marked when it was asked: the watch's next step
// sends it, once (seq.Wakeup.Send).
type Rerun struct {
	Attempt int    `json:"attempt"`
	By      string `json:"by"`
	Mark    string `json:"mark"`
	// Comment is the comment that asked (its deletion, or the command
	// edited away, takes the ask back while it is not sent), and Line the
	// command as written.
	Comment int64  `json:"comment,omitempty"`
	Line    string `json:"line,omitempty"`
	// Sent says GitHub took it (or showed it taken).
	Sent bool `json:"sent,omitempty"`
}

func rerunSpec(h *Handler) commands.Spec {
	return commands.Spec{
		Name: RerunName,
		// A comment's lines are one ask: two would race for one attempt.
		LastWins: true,
		Verbs: []commands.Verb{{Word: "/rerun-failed", Usage: "usage: /rerun-failed", Args: func(c *commands.Command, args []string, _ commands.Options) string {
			if len(args) != 0 {
				return "/rerun-failed takes no argument: it re-runs the failed jobs of the default branch's run opsbot follows for this PR"
			}
			return ""
		}}},
		Access: func(rc *config.Repo) config.Access { return Section.Of(rc).Rerun },
		Help: func(rc *config.Repo) commands.Help {
			if !Section.Of(rc).Follow {
				return commands.Help{}
			}
			return commands.Help{Rows: []commands.HelpRow{{Command: "`/rerun-failed`",
				What: "after the merge, re-run the failed jobs of the default branch's run opsbot follows (once per attempt)",
				Who:  commands.Who(Section.Of(rc).Rerun)}}}
		},
		Handler: h,
		Buttons: []commands.Button{RerunButton},
	}
}

// RerunButton is /rerun-failed's button, offered in the PR's Slack thread
// and on the merge commit's check run (CheckName) with a failed main run
// whose failed jobs a re-run may fix.
var RerunButton = commands.Button{ID: "rerun-failed", Own: true,
	Label: "Re-run failed jobs", Description: "Re-run the failed jobs of this attempt",
	Slack: func(int64) string { return "Re-run failed jobs" },
	Command: func(run int64) commands.Command {
		return commands.Command{Name: RerunName, Verb: "/rerun-failed", Text: "/rerun-failed", RunID: run}
	}}

// RecoverButton is /recover-ingest's button, offered in the PR's Slack
// thread and on the merge commit's check run with a main run whose ingest
// failed after the results were gathered, where a recovery is configured.
var RecoverButton = commands.Button{ID: "recover-ingest", Own: true,
	Label: "Recover the ingest", Description: "Publish from the reused run, no GPU",
	Slack: func(int64) string { return "Recover the ingest" },
	Command: func(run int64) commands.Command {
		return commands.Command{Name: RecoverName, Verb: "/recover-ingest", Text: "/recover-ingest", RunID: run}
	}}

// CheckName is the watch's check run on the merge commit: with a failed
// attempt it offers the button that may mend it, and once the watch ends it
// says how.
const CheckName = "opsbot/after-merge"

// offer is the failed attempt's button, in the PR's Slack thread and on
// the merge commit's check run: a re-run where one may fix it, a recovery
// where only the ingest failed after the results were gathered (nil: none
// applies).
func offer(s seq.Step[Data], data Data, sets Settings, web notices.Web) []plan.Step {
	f := data.Failed
	var b commands.Button
	switch {
	case f == nil || f.Cancelled || f.Forgotten:
		return nil
	case !f.IngestFailed:
		b = RerunButton
	case sets.Recover.Workflow != "" && data.Source != 0 && data.NoReuse == "":
		b = RecoverButton
	default:
		return nil
	}
	why := "a re-run of its failed jobs may fix it"
	if f.IngestFailed {
		why = "its ingest failed, after the results were gathered"
	}
	said := fmt.Sprintf("Run %s on %s failed (attempt %d): %s. A click runs the command as the one who clicks, with its role check.",
		commands.RunLink(data.RunID, data.RunURL), mdtext.Code(data.Base), f.Attempt, why)
	return []plan.Step{
		plan.SlackOffer{Repo: s.Seq.Repo, PR: s.Seq.PR, Head: data.Head, RunID: data.RunID, Attempt: f.Attempt, Text: "❌ " + said,
			Links:   plan.Links{PR: web.PR(s.Seq.Repo, s.Seq.PR), Run: data.RunURL},
			Buttons: []record.SlackButton{{Text: b.Slack(data.RunID), ActionID: b.ID, Style: b.SlackStyle}}},
		plan.CheckOffer{Repo: s.Seq.Repo, PR: s.Seq.PR, Installation: data.Installation, SHA: data.Merge, Name: CheckName,
			Conclusion: "neutral", Title: fmt.Sprintf("Run %d failed (attempt %d)", data.RunID, f.Attempt),
			Summary: fmt.Sprintf("%s\n\nPR #%d's comment says which jobs failed and why. The button acts once; %s does the same.",
				said, s.Seq.PR, mdtext.Code(b.Command(data.RunID).Text)),
			RunID: data.RunID, Attempt: f.Attempt,
			Actions: []record.CheckAction{{Label: b.Label, Description: b.Description, Identifier: b.ID}}},
	}
}

// checkFailed is the merge commit's check run for a failed attempt that
// offers no button (cancelled, a forgotten reuse, an ingest failure with
// no recovery configured), where an earlier attempt offered one.
func checkFailed(s seq.Step[Data], data Data) plan.Step {
	return plan.CheckOffer{Repo: s.Seq.Repo, PR: s.Seq.PR, Installation: data.Installation, SHA: data.Merge, Name: CheckName,
		Conclusion: "neutral", Title: fmt.Sprintf("Run %d failed (attempt %d)", data.RunID, data.Attempt),
		Summary: fmt.Sprintf("%s\n\nPR #%d's comment says which jobs failed and why; no button mends this attempt.",
			lastOf(data.Trail), s.Seq.PR), RunID: data.RunID}
}

func lastOf(trail []string) string {
	if len(trail) == 0 {
		return ""
	}
	return trail[len(trail)-1]
}

// checkEnded is the merge commit's check run once the watch ends, where
// one offered a button: it says how the watch ended, with no button; a
// success is green only where nothing was left to warn of.
func checkEnded(s seq.Step[Data], data Data, step, why string) plan.Step {
	conclusion := "neutral"
	if (step == StepSucceeded || step == StepRecovered) && !strings.Contains(why, "⚠️") && !strings.Contains(why, "⌛") {
		conclusion = "success"
	}
	return plan.CheckOffer{Repo: s.Seq.Repo, PR: s.Seq.PR, Installation: data.Installation, SHA: data.Merge, Name: CheckName,
		Conclusion: conclusion, Title: "After the merge: " + strings.ReplaceAll(step, "_", " "),
		Summary: fmt.Sprintf("%s\n\nopsbot stopped following run %d of PR #%d's merge.", why, data.RunID, s.Seq.PR), RunID: data.RunID}
}

// Prepare takes /rerun-failed on a merged PR: the attempt of the main
// run that the watch found failed is re-run once, unless only its ingest
// failed after the results were gathered (recovery is the way then). The
// reply says what it re-runs and the GPU jobs' time among it; the watch's
// next step asks GitHub, through the engine.
func (h *Handler) Prepare(_ context.Context, env commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	refuse := func(why string) commands.Result {
		return commands.Result{Outcome: commands.Rejected, Reason: why, Reply: mdtext.Mention(in.Actor.Login) + " " + why + "."}
	}
	if !Section.Of(env.Repo).Follow {
		return refuse("opsbot does not follow merges in this repository (`after_merge.follow`), so it has no run to re-run")
	}
	if env.State == nil {
		return commands.Result{Err: errors.New("aftermerge: no state reader")}
	}
	cur, err := env.State.Sequence(in.Repo, in.PR, SeqKind)
	if err != nil {
		return commands.Result{Err: fmt.Errorf("reading the after-merge watch of %s#%d: %w", in.Repo, in.PR, err)}
	}
	if cur == nil {
		return refuse("opsbot follows no run of this PR's merge: `/rerun-failed` re-runs the failed jobs of the default branch's run " +
			"opsbot follows after a merge it decided")
	}
	data, err := seq.DataOf[Data](cur)
	if err != nil {
		return commands.Result{Err: err}
	}
	run := "run " + commands.RunLink(data.RunID, data.RunURL)
	f := data.Failed
	// A recovery of this run's ingest, under way or done, publishes the
	// results: a re-run would publish them again.
	recovering, err := recoveryLive(env.State, in.Repo, in.PR, data.RunID)
	if err == nil && recovering == "" {
		recovering, err = recoveredAlready(env.State, in.Repo, in.PR, data.RunID, true)
	}
	if err != nil {
		return commands.Result{Err: err}
	}
	switch {
	case recovering != "":
		return refuse(recovering)
	case line.RunID != 0 && (line.RunID != data.RunID || (line.Attempt != 0 && line.Attempt != data.Attempt)):
		return refuse(fmt.Sprintf("this button was offered for attempt %d of run %d; opsbot now follows %s (attempt %d): use the "+
			"newest message's button, or type `/rerun-failed`", line.Attempt, line.RunID, run, max(data.Attempt, 1)))
	case cur.Done && (cur.Step == StepSucceeded || cur.Step == StepIngestFailed || cur.Step == StepDownstream):
		return refuse(run + " succeeded: nothing to re-run")
	case cur.Done && cur.Step == StepRecovered:
		return refuse("the ingest of " + run + " was recovered: a re-run would publish its results again")
	case cur.Done:
		return refuse("opsbot stopped following " + run + " at its deadline: re-run it on GitHub if it still matters")
	case !h.now().Before(cur.Deadline):
		return refuse("opsbot's watch of " + run + " reached its deadline: re-run it on GitHub if it still matters")
	case data.Rerun != nil && data.Rerun.Attempt == data.Attempt:
		return refuse(fmt.Sprintf("a re-run of attempt %d of %s was asked already, by %s: opsbot re-runs an attempt once",
			data.Attempt, run, mdtext.Mention(data.Rerun.By)))
	case cur.Step != StepFailed || f == nil || f.Attempt != data.Attempt:
		return refuse("the default branch's run of this merge has not failed (opsbot is following it): nothing to re-run yet")
	case f.Cancelled:
		return refuse(run + " was cancelled (by hand, or by a newer run of its concurrency group): opsbot does not re-run a cancelled " +
			"run, which may be older than what replaced it; re-run it on GitHub if that is meant")
	case f.Forgotten:
		return refuse(fmt.Sprintf("%s ran GPU jobs although opsbot decided the merged head by reuse of run %d: the reuse was "+
			"forgotten, and a re-run would ingest from this run again; the repository's recovery procedure publishes from run %d, so "+
			"opsbot does not re-run it", run, data.Source, data.Source))
	case f.IngestFailed:
		return refuse(fmt.Sprintf("the ingest job %s of %s failed, after the results were gathered: the repository's procedure "+
			"recovers an ingest from the gathered results, never by re-running the push run, so opsbot does not re-run it",
			mdtext.Code(Section.Of(env.Repo).IngestJob), run))
	}
	now := h.now()
	data.Rerun = &Rerun{Attempt: data.Attempt, By: in.Actor.Login, Mark: h.acts.New(), Line: line.Text}
	if in.Origin.Kind == record.OriginComment {
		data.Rerun.Comment = in.Origin.ID
	}
	data.Now = fmt.Sprintf("⏳ re-running the failed jobs of attempt %d, asked by %s", data.Attempt, mdtext.Mention(in.Actor.Login))
	next := *cur
	next.WakeAt = now
	if next.Data, err = json.Marshal(data); err != nil {
		return commands.Result{Err: err}
	}
	edit := h.edit(&next, data)
	return commands.Result{Outcome: commands.Accepted, Reason: fmt.Sprintf("re-run of attempt %d of run %d asked", data.Attempt, data.RunID),
		RunID: data.RunID, RunURL: data.RunURL, HeadSHA: data.Merge,
		Reply: mdtext.Mention(in.Actor.Login) + " " + rerunWords(data, run, env.Repo.GPUsPerRunner),
		Plan: plan.Plan{Require: []plan.Fact{plan.SequenceAt{Repo: cur.Repo, PR: cur.PR, Kind: SeqKind, Version: cur.Version}},
			Steps: []plan.Step{plan.PutSequence{Seq: next, Read: cur.Version, Edit: &edit}}}}
}

// rerunWords says what a re-run re-runs: the failed jobs of the attempt,
// and the GPU jobs among them with their time in that attempt.
func rerunWords(d Data, run string, gpus map[string]int) string {
	f := d.Failed
	var b strings.Builder
	fmt.Fprintf(&b, "re-running the %d failed %s of attempt %d of %s (and the jobs that need them)", f.Jobs, plural(f.Jobs, "job", "jobs"),
		f.Attempt, run)
	if len(f.Names) > 0 {
		names := make([]string, len(f.Names))
		for i, n := range f.Names {
			names[i] = mdtext.Code(n)
		}
		fmt.Fprintf(&b, ": %s", strings.Join(names, ", "))
		if f.Jobs > len(f.Names) {
			fmt.Fprintf(&b, " and %d more", f.Jobs-len(f.Names))
		}
	}
	switch {
	case f.GPUJobs > 0:
		fmt.Fprintf(&b, ". It runs up to %d %s on GPU runners again (those failed, and those skipped after a failure); in that attempt "+
			"they took %s runner hours, %s GPU hours, by the run's own timing. What the re-run takes is known once it ran",
			f.GPUJobs, plural(f.GPUJobs, "job", "jobs"), runs.Hours(f.GPURunner), runs.Hours(f.GPUSeconds))
	case len(gpus) == 0:
		b.WriteString(". opsbot cannot tell GPU jobs here (no `gpus_per_runner`)")
	default:
		b.WriteString(". No job on a GPU runner failed or was skipped")
	}
	b.WriteString(". opsbot follows the new attempt on this PR")
	return b.String()
}

// rerun sends the re-run a maintainer asked, marked by the command: once,
// through the engine (the last stop check, then the ask; a lost answer is
// read back from the run's attempt). A mark this process did not make (a
// restart since the ask) or that it tried already is read back the same
// way: a new attempt is the re-run; none, it was not taken, and the
// maintainer is told to ask again.
func (h *Handler) rerun(ctx context.Context, gh *ghclient.Client, s seq.Step[Data], data Data) (string, plan.Plan, error) {
	r := *data.Rerun
	repo := s.Seq.Repo
	newer := func(ctx context.Context) (seq.Shown, error) {
		run, err := gh.Run(ctx, repo, data.RunID)
		if err != nil || run.GetRunAttempt() <= r.Attempt {
			return seq.NotShown, err
		}
		return seq.ShownTaken, nil
	}
	by := mdtext.Mention(r.By)
	// The run is read first: a new attempt (a re-run whose answer was
	// lost, or one someone started on GitHub) is followed, never asked
	// again.
	shown, err := newer(ctx)
	if err != nil {
		return "", plan.Plan{}, err
	}
	switch {
	case shown == seq.ShownTaken && h.acts.Fresh(r.Mark):
		data.Rerun = nil
		data.Trail = append(slices.Clip(data.Trail), fmt.Sprintf("🔁 the failed attempt %d was re-run on GitHub before opsbot asked: the re-run "+
			"%s asked was not sent", r.Attempt, by))
		return h.wait(s, data, StepFailed, fmt.Sprintf("⏳ opsbot follows attempt %d", r.Attempt+1), "after-merge-rerun-elsewhere", Poll)
	case shown == seq.ShownTaken:
		// Marked before a restart, or tried: the new attempt may be
		// opsbot's ask, sent before it stopped, or someone's on GitHub;
		// followed, not counted as opsbot's.
		r.Sent = true
		data.Rerun = &r
		data.Trail = append(slices.Clip(data.Trail), fmt.Sprintf("🔁 the failed jobs of attempt %d were re-run (opsbot's ask on %s's word, "+
			"sent before it stopped, or someone's on GitHub: the run shows a new attempt)", r.Attempt, by))
		return h.wait(s, data, StepRunning, fmt.Sprintf("⏳ opsbot follows attempt %d", r.Attempt+1), "after-merge-rerun-seen", Poll)
	case !h.acts.Fresh(r.Mark):
		return h.rerunDropped(s, data, fmt.Sprintf("⚠️ the re-run %s asked was not sent (opsbot stopped, or GitHub did not answer, and the "+
			"run shows no new attempt): ask again with `/rerun-failed`", by))
	}
	a, err := s.Send(ctx, seq.Act{Mark: r.Mark, Do: func(ctx context.Context) error { return gh.RerunFailedJobs(ctx, repo, data.RunID) },
		Verify: newer})
	if err != nil {
		return "", plan.Plan{}, err // a stop waits, or the step ended: the next step finds the mark tried, and reads the run
	}
	var ref *ghclient.Refusal
	switch {
	case a.Taken():
		how := ""
		if a.Unclear() {
			how = " (GitHub's answer was lost; the run's new attempt shows it)"
		}
		return h.rerunSent(s, data, how)
	case errors.As(a.Err, &ref) && ref.Dry():
		return h.rerunDropped(s, data, fmt.Sprintf("⛔ opsbot did not ask GitHub for the re-run %s asked: %s", by, mdtext.Text(ref.Message)))
	case errors.As(a.Err, &ref):
		return h.rerunDropped(s, data, fmt.Sprintf("⛔ GitHub refused the re-run %s asked (%d: %s): ask again once that is fixed",
			by, ref.Status, mdtext.Text(ref.Message)))
	}
	h.log().Warn("a re-run of failed jobs got no answer; reading the run back next", "repo", repo, "run", data.RunID, "err", a.Err)
	return h.wait(s, data, StepFailed, "⏳ GitHub did not answer the re-run: reading the run again", "after-merge-rerun-unanswered", Poll)
}

// rerunSent notes a re-run GitHub took, and follows its attempt.
func (h *Handler) rerunSent(s seq.Step[Data], data Data, how string) (string, plan.Plan, error) {
	r := *data.Rerun
	r.Sent = true
	data.Rerun, data.Reruns = &r, data.Reruns+1
	data.Trail = append(slices.Clip(data.Trail), fmt.Sprintf("🔁 the failed jobs of attempt %d were re-run, asked by %s%s", r.Attempt,
		mdtext.Mention(r.By), how))
	return h.wait(s, data, StepRerun, fmt.Sprintf("⏳ opsbot follows attempt %d", r.Attempt+1), "after-merge-rerun-sent", Poll)
}

// rerunDropped drops a re-run that was not taken, saying why: the attempt
// may be asked again.
func (h *Handler) rerunDropped(s seq.Step[Data], data Data, why string) (string, plan.Plan, error) {
	data.Rerun = nil
	data.Trail = append(slices.Clip(data.Trail), why)
	deadline := s.Seq.Deadline.UTC().Format("Jan 2 15:04 UTC")
	return h.wait(s, data, StepFailed, "⏳ opsbot follows a re-run of the failed jobs until "+deadline, "after-merge-rerun-dropped", RerunPoll)
}

func (h *Handler) log() *slog.Logger {
	if h.d.Log != nil {
		return h.d.Log
	}
	return slog.Default()
}

// TakeBack drops a re-run not yet sent whose comment was deleted, or whose
// command was edited away, by the one who asked or someone with the
// command's role (anyone else's change is audited as kept). A re-run sent
// already stays: GitHub runs it.
func (h *Handler) TakeBack(ctx context.Context, env commands.Env, ch commands.Change) (plan.Plan, error) {
	cur, err := commands.LiveSequence(env.State, ch.Repo, ch.PR, SeqKind)
	if err != nil || cur == nil {
		return plan.Plan{}, err
	}
	data, err := seq.DataOf[Data](cur)
	if err != nil {
		return plan.Plan{}, err
	}
	r := data.Rerun
	if r == nil || r.Sent || r.Comment == 0 || ch.Origin.Kind != record.OriginComment || ch.Origin.ID != r.Comment {
		return plan.Plan{}, nil
	}
	if !ch.Deleted && commands.HasLine(ch.Commands, r.Line) {
		return plan.Plan{}, nil // the command is still there, as written
	}
	did := "deleted the comment"
	if !ch.Deleted {
		did = "edited away the command"
	}
	guard := plan.SequenceAt{Repo: cur.Repo, PR: cur.PR, Kind: SeqKind, Version: cur.Version}
	rec := record.AuditRecord{Kind: record.AuditAfterMerge, RunID: data.RunID, HeadSHA: data.Merge}
	if !h.acts.Fresh(r.Mark) {
		// Tried already (its answer lost), or marked before a restart: the
		// re-run may have reached GitHub, and is not said taken back.
		rec.Outcome = "not_cancelled"
		rec.Reason = fmt.Sprintf("@%s %s that asked @%s's re-run of attempt %d after it may have reached GitHub: the watch reads the run",
			ch.Actor.Login, did, r.By, r.Attempt)
		return plan.Plan{Require: []plan.Fact{guard}, Steps: []plan.Step{plan.Audit{Record: commands.AuditOf(ch.Invocation, rec)}}}, nil
	}
	v := env.MayTakeBack(ctx, ch, ch.Spec)
	switch {
	case v.CheckFailed:
		return plan.Plan{}, fmt.Errorf("checking the role of @%s, who %s that asked @%s's re-run: %s", ch.Actor.Login, did, r.By, v.Reason)
	case !v.Allowed:
		rec.Outcome = "kept"
		rec.Reason = fmt.Sprintf("@%s %s that asked @%s's re-run of attempt %d, but taking it back needs %s: the re-run is asked", ch.Actor.Login,
			did, r.By, r.Attempt, env.Policy(ch.Spec).Describe())
		return plan.Plan{Require: []plan.Fact{guard}, Steps: []plan.Step{plan.Audit{Record: commands.AuditOf(ch.Invocation, rec)}}}, nil
	}
	data.Rerun = nil
	data.Trail = append(slices.Clip(data.Trail), fmt.Sprintf("↩️ the re-run %s asked of attempt %d was taken back before it was sent: %s %s",
		mdtext.Mention(r.By), r.Attempt, mdtext.Mention(ch.Actor.Login), did))
	data.Now = "⏳ opsbot follows a re-run of the failed jobs until " + cur.Deadline.UTC().Format("Jan 2 15:04 UTC")
	next := *cur
	if next.Data, err = json.Marshal(data); err != nil {
		return plan.Plan{}, err
	}
	next.WakeAt = h.now().Add(RerunPoll)
	edit := h.edit(&next, data)
	rec.Outcome = "rerun_taken_back"
	rec.Reason = fmt.Sprintf("@%s %s that asked @%s's re-run of attempt %d of run %d, before it was sent", ch.Actor.Login, did, r.By, r.Attempt, data.RunID)
	return plan.Plan{Require: []plan.Fact{guard}, Steps: []plan.Step{plan.PutSequence{Seq: next, Read: cur.Version, Edit: &edit,
		Audit: commands.AuditOf(ch.Invocation, rec)}}}, nil
}
