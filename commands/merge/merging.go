package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// merged ends the merge: the PR was merged at the decided head (found
// merged: by a wake-up after the merge, or by someone at that head).
func (st *stepper) merged(commit string, found bool) (plan.Plan, string, error) {
	cur := st.cur
	next := *cur
	next.Step, next.Done = StepMerged, true
	st.data.MergeCommit = commit
	line := fmt.Sprintf("🎉 merged %s as %s", mdtext.Code(mdtext.ShortSHA(st.data.Decided)), mdtext.Code(mdtext.ShortSHA(commit)))
	if found {
		line = fmt.Sprintf("🎉 the PR was found merged at %s, as %s", mdtext.Code(mdtext.ShortSHA(st.data.Decided)), mdtext.Code(mdtext.ShortSHA(commit)))
	}
	if st.data.Queue && st.data.QueueGroup != "" && strings.EqualFold(commit, st.data.QueueGroup) {
		line = fmt.Sprintf("🎉 the merge queue merged %s as %s", mdtext.Code(mdtext.ShortSHA(st.data.Decided)), mdtext.Code(mdtext.ShortSHA(commit)))
	}
	st.data.Trail = append(st.data.Trail, line)
	if l := leftWords(next.Left); l != "" {
		st.data.Trail = append(st.data.Trail, l) // the engine's cleanup runs next
	}
	next.Data, _ = json.Marshal(st.data)
	e := st.h.statusEdit(&next, st.data, "")
	rec := record.AuditRecord{Kind: record.AuditMerge, Outcome: StepMerged, Repo: cur.Repo, PR: cur.PR, RunID: st.data.RunID,
		HeadSHA: st.data.Decided, ActorID: cur.ActorID, ActorLogin: cur.ActorLogin,
		Reason: fmt.Sprintf("merged %s as %s (%s)", st.data.Decided, commit, st.data.Method)}
	if found {
		rec.Reason = fmt.Sprintf("found merged at %s as %s", st.data.Decided, commit)
	}
	rec.SetOrigin(cur.Origin())
	return plan.Plan{Require: []plan.Fact{st.guard()}, Steps: []plan.Step{plan.PutSequence{Seq: next, Read: cur.Version, Edit: &e, Audit: rec}}},
		"merge-merged", nil
}

// merge asks the merge marked (mark, this process's, fresh): a stop that
// waits goes first, then the merge (or, through the queue, the enqueue) is
// asked once; a refusal stops it, unless the PR is found merged at the
// head anyway, and a lost answer is read back, never asked again blindly.
func (st *stepper) merge(ctx context.Context, head, mark string) (plan.Plan, string, error) {
	cur := st.cur
	if st.data.Queue {
		return st.enqueue(ctx, head, mark)
	}
	var commit string
	a, stop := st.send(ctx, seq.Act{Mark: mark, Do: func(ctx context.Context) (err error) {
		commit, err = st.gh.MergePR(ctx, cur.Repo, cur.PR, head, st.data.Method)
		return err
	}, Verify: func(ctx context.Context) (seq.Shown, error) {
		// Merged at the head: merged. Open: GitHub may still be making
		// it; the PR is read again later, never merged again blindly.
		pr, err := st.gh.PullRequest(ctx, cur.Repo, cur.PR)
		if err != nil || !pr.GetMerged() || !strings.EqualFold(pr.GetHead().GetSHA(), head) {
			return seq.NotShown, err
		}
		commit = pr.GetMergeCommitSHA()
		return seq.ShownTaken, nil
	}})
	if stop != nil {
		return plan.Plan{}, "", stop // a cancel or a push waits, or the step ended (opsbot stopping, its time up): the next step finds the mark, and reads the PR
	}
	err := a.Err
	if a.Unclear() && a.Taken() {
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("✅ the checks of %s passed", mdtext.Code(mdtext.ShortSHA(head))))
		return st.merged(commit, true)
	}
	var ref *ghclient.Refusal
	if ghclient.QueueRequired(err) {
		// Classic branch protection's merge queue: the rules list
		// only rulesets. Marked anew, the next step adds it to the queue.
		st.data.Queue = true
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("🚦 GitHub takes merges into %s through its merge queue (%s)",
			mdtext.Code(st.data.Base), mdtext.Text(err.Error())))
		st.data.EnqueueAt, st.data.MergeTries = time.Time{}, 0 // marked anew as the enqueue's
		if err := st.noteQueueBefore(ctx); err != nil {
			return plan.Plan{}, "", err
		}
		return st.markMerge()
	}
	if errors.As(err, &ref) {
		// Merged meanwhile at this head (by someone, or by a merge whose
		// answer was lost): merged, whatever this answer says.
		if again, rerr := st.gh.PullRequest(ctx, cur.Repo, cur.PR); rerr == nil && again.GetMerged() && strings.EqualFold(again.GetHead().GetSHA(), head) {
			st.data.Trail = append(st.data.Trail, fmt.Sprintf("✅ the checks of %s passed", mdtext.Code(mdtext.ShortSHA(head))))
			return st.merged(again.GetMergeCommitSHA(), true)
		}
		status := ""
		if ref.Status != 0 {
			status = fmt.Sprintf("%d: ", ref.Status)
		}
		return st.stopped("merge_refused", fmt.Sprintf("%s of %s (%s%s)", refusedWords(ref, "merge"), mdtext.ShortSHA(head), status, mdtext.Text(ref.Message)))
	}
	if err != nil {
		// Whether GitHub merged it is not known: the PR is read again, and
		// the merge is never asked again blindly.
		st.h.log().Warn("a merge got no answer; reading the PR again", "repo", cur.Repo, "pr", cur.PR, "head", head, "err", err)
		st.data.MergeAsked = st.now
		return st.waitFor(StepChecks, "⏳ GitHub did not answer the merge: reading the PR again", "merge-merge-unanswered", MergeWait/4)
	}
	st.data.Trail = append(st.data.Trail, fmt.Sprintf("✅ the checks of %s passed", mdtext.Code(mdtext.ShortSHA(head))))
	return st.merged(commit, false)
}
