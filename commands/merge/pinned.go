package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// pinned looks at the branch of the head the command read: up to date, it
// is the head merged; behind its base, the update is asked (marked first).
func (st *stepper) pinned(ctx context.Context, head string) (plan.Plan, string, error) {
	cur, pr := st.cur, st.pr
	// The merge's own pin, by its id from now on: a pin of the same run
	// that replaced it (a /reuse-sweep-run) is not the merge's.
	pin, err := st.pin()
	if err != nil {
		return plan.Plan{}, "", err
	}
	if pin == nil {
		return st.stopped("no_pin", "the pin the merge took was revoked or replaced before the branch was looked at: a merge now would reuse nothing")
	}
	st.data.PinID = pin.ID
	switch pr.GetMergeableState() {
	case "", "unknown":
		return st.wait(StepPinned, "⏳ GitHub is still working out whether the branch can be merged", "merge-waiting-mergeable")
	case "dirty":
		return st.conflicted(ctx, head)
	case "draft":
		return st.stopped("draft", "the PR is a draft")
	case "behind":
		return st.behind(ctx, head)
	}
	// Up to date: the head the merge is for is the head itself.
	st.data.Decided = head
	st.data.Trail = append(st.data.Trail, fmt.Sprintf("✅ the branch is up to date with its base (head %s)", mdtext.Code(mdtext.ShortSHA(cur.Head))))
	return st.checks(ctx, head)
}

// noPinWhy is why a merge whose pin is gone stops before the branch is
// updated.
const noPinWhy = "the pin the merge took was revoked or replaced before the branch was updated: a merge now would reuse nothing"

// pinAndTip are the merge's own pin (nil: revoked or replaced) and the
// base's tip, read before the branch is updated.
func (st *stepper) pinAndTip(ctx context.Context) (*record.Pin, string, error) {
	pin, err := st.pin()
	if err != nil || pin == nil {
		return pin, "", err
	}
	tip, err := st.gh.BranchHead(ctx, st.cur.Repo, st.data.Base)
	return pin, tip, err
}

// markUpdate records on the pin what the branch's update will be (the
// base's tip it merges, its tree and, for a merge opsbot made, its commit:
// the only push the pin covers), with the act's mark; the next step, due
// at once, asks it.
func (st *stepper) markUpdate(pinID uint64, tip, tree, commit, out string) (plan.Plan, string, error) {
	cur := st.cur
	st.data.UpdateMark, st.data.UpdateAsked, st.data.UpdateBase = st.h.acts.New(), st.now, strings.ToLower(tip)
	if commit == "" {
		// GitHub's update-branch, not a merge opsbot made: one it made
		// before (never pushed: its mark was this process's) is not the
		// update any more.
		st.data.Built, st.data.BuiltFor, st.data.BuiltTree, st.data.BuiltFiles = "", "", "", nil
	}
	next := *cur
	next.WakeAt = st.now
	next.Data, _ = json.Marshal(st.data) // plain fields: cannot fail
	return plan.Plan{Require: []plan.Fact{st.guard(), plan.ActivePin{Repo: cur.Repo, PR: cur.PR, ID: pinID}},
		Steps: []plan.Step{plan.ExpectUpdate{Repo: cur.Repo, PR: cur.PR, PinID: pinID, Base: tip, Tree: tree, Commit: commit},
			plan.PutSequence{Seq: next, Read: cur.Version}}}, out, nil
}

// behind asks GitHub to update the branch: the pin first records what the
// update will be (the base's tip it merges and the tree GitHub's merge of
// it makes, read from the PR's test merge commit), with the act's mark; the
// next step, in this process, asks it once.
func (st *stepper) behind(ctx context.Context, head string) (plan.Plan, string, error) {
	cur := st.cur
	pin, tip, err := st.pinAndTip(ctx)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if pin == nil {
		return st.stopped("no_pin", noPinWhy)
	}
	tree, err := st.mergeTree(ctx, tip, head)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if tree == "" {
		return st.wait(StepPinned, "⏳ GitHub is still making the merge of the base into the branch", "merge-waiting-test-merge")
	}
	stale := st.h.acts.Fresh(st.data.UpdateMark) && st.now.Sub(st.data.UpdateAsked) > MarkFresh // never sent, but old: marked anew
	if st.data.UpdateMark == "" || stale || !strings.EqualFold(pin.ExpectBase, tip) || !strings.EqualFold(pin.ExpectTree, tree) {
		// The pin covers the update only once it names the base's tip the
		// update merges and its tree: recorded with the mark, asked at the
		// next wake-up.
		return st.markUpdate(pin.ID, tip, tree, "", "merge-update-named")
	}
	if !st.h.acts.Fresh(st.data.UpdateMark) {
		// Marked before a restart (or tried already): the update may have
		// been asked. Its push is waited for; it is never asked again.
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔄 the branch was behind its base: an update was about to be asked (from %s) "+
			"when opsbot stopped; waiting for its push", mdtext.Code(mdtext.ShortSHA(head))))
		return st.wait(StepUpdating, "⏳ waiting for the update's push", "merge-update-possibly-asked")
	}
	st.data.UpdateAsked = st.now
	// GitHub makes the update's merge after it answers: nothing read at
	// once tells whether a lost one was taken (no Verify), its push does.
	a, stop := st.send(ctx, seq.Act{Mark: st.data.UpdateMark, Do: func(ctx context.Context) error { return st.gh.UpdateBranch(ctx, cur.Repo, cur.PR, head) }})
	err = a.Err
	if stop != nil {
		return plan.Plan{}, "", stop // a cancel or a push waits, or the step ended (opsbot stopping, its time up): the next step finds the mark, and waits for the push
	}
	var ref *ghclient.Refusal
	if errors.As(err, &ref) {
		return st.stopped("update_refused", fmt.Sprintf("%s (%s). Update the branch by hand, then pin a run again",
			refusedWords(ref, "update the branch"), mdtext.Text(ref.Message)))
	}
	if err != nil {
		// Whether GitHub took it is not known: its push is waited for, and
		// the update is never asked again.
		st.h.log().Warn("asking GitHub to update a branch got no answer; waiting for its push", "repo", cur.Repo, "pr", cur.PR, "err", err)
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔄 the branch was behind its base: update asked (from %s); GitHub's answer was lost",
			mdtext.Code(mdtext.ShortSHA(head))))
		return st.wait(StepUpdating, "⏳ waiting for the update's push", "merge-update-unanswered")
	}
	st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔄 the branch was behind its base: update asked (from %s)", mdtext.Code(mdtext.ShortSHA(head))))
	return st.wait(StepUpdating, "⏳ waiting for the update's push", "merge-update-asked")
}

// mergeTree is the tree of GitHub's merge of tip into head: the tree of
// the PR's test merge commit, once GitHub has made it of these two ("":
// not yet).
func (st *stepper) mergeTree(ctx context.Context, tip, head string) (string, error) {
	mc := st.pr.GetMergeCommitSHA()
	if mc == "" {
		return "", nil
	}
	cm, err := st.gh.CommitInfo(ctx, st.cur.Repo, mc)
	if errors.Is(err, ghclient.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if len(cm.Parents) != 2 || !strings.EqualFold(cm.Parents[0], tip) || !strings.EqualFold(cm.Parents[1], head) || cm.Tree == "" {
		return "", nil // a test merge of an older base or head: GitHub is making the new one
	}
	return cm.Tree, nil
}
