package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// What a merge leaves on GitHub for a while: the temporary branch GitHub
// merges the rest on (conflicted.go). It is in the sequence's record
// (record.Sequence.Left) before it is made, so whatever ends the merge (a
// push, a cancel, a close, the deadline, a crash and any of those after
// it) ends with it named in the status comment, and the engine's cleanup
// deletes it once the merge is done.

// MaxCleanupTries and CleanupFor bound the deletions of a branch GitHub
// did not answer (a rate limit, an outage): past both, the status comment
// says to delete it by hand.
const (
	MaxCleanupTries = 10
	CleanupFor      = time.Hour
)

// tempBranch is the name of the branch for opsbot's commit undone: no
// slash (no branch named as its folder can block it), and opsbot's new
// commit (nobody can have taken it before).
func tempBranch(pr int, undone string) string {
	return fmt.Sprintf("opsbot-merge-%d-%s", pr, mdtext.ShortSHA(undone))
}

// tempNow is the temporary branch of the merge's current try ("": none).
func (st *stepper) tempNow() string {
	if st.data.Undone == "" {
		return ""
	}
	return tempBranch(st.cur.PR, st.data.Undone)
}

// holds reports whether the merge's record names branch as left.
func (st *stepper) holds(branch string) bool {
	return slices.ContainsFunc(st.cur.Left, func(l record.Leftover) bool { return l.Branch == branch })
}

// noteLeft records branch, for commit, as the merge's before it is made.
func (st *stepper) noteLeft(branch, commit string) {
	if !st.holds(branch) {
		st.cur.Left = append(slices.Clip(st.cur.Left), record.Leftover{Branch: branch, Commit: commit,
			RepoNode: st.pr.GetBase().GetRepo().GetNodeID()})
	}
}

// dropped is what became of a branch the merge left.
type dropped int

const (
	dropKept    dropped = iota // GitHub did not answer: tried again
	dropDeleted                // deleted
	dropGone                   // not on GitHub: never made, or gone already
	dropTheirs                 // not opsbot's any more: left alone
	dropFailed                 // refused, or unanswered for too long: delete it by hand
)

// ownBranch says whether branch, made at opsbot's commit, is still
// opsbot's: at that commit, or at a merge onto it (GitHub's merge of the
// rest, first parent that commit). gone: not on GitHub. Anything else is
// someone else's (a branch made under the name opsbot had said, or moved).
func (st *stepper) ownBranch(ctx context.Context, branch, commit string) (ours, gone bool, tip string, err error) {
	tip, err = st.gh.BranchHead(ctx, st.cur.Repo, branch)
	if errors.Is(err, ghclient.ErrNotFound) {
		return false, true, "", nil
	}
	if err != nil {
		return false, false, "", err
	}
	if commit == "" || strings.EqualFold(tip, commit) {
		return true, false, tip, nil
	}
	cm, err := st.gh.CommitInfo(ctx, st.cur.Repo, tip)
	if err != nil {
		return false, false, "", err
	}
	// GitHub's merge has two parents, the first opsbot's commit: a commit
	// someone pushed on top of it has one.
	return len(cm.Parents) == 2 && strings.EqualFold(cm.Parents[0], commit), false, tip, nil
}

// dropBranch deletes one branch the merge left, if it is still opsbot's,
// and says what became of it: deleted or gone, it is no longer the
// merge's; someone else's, it is left alone and said; refused, the trail
// says to delete it by hand (asking again would not change GitHub's mind);
// unanswered, it stays for the next try, until both MaxCleanupTries and
// CleanupFor have passed.
func (st *stepper) dropBranch(ctx context.Context, branch string) dropped {
	ctx = context.WithoutCancel(ctx)
	i := slices.IndexFunc(st.cur.Left, func(l record.Leftover) bool { return l.Branch == branch })
	var left record.Leftover
	if i >= 0 {
		left = st.cur.Left[i]
	}
	out := dropDeleted
	ours, gone, tip, err := st.ownBranch(ctx, branch, left.Commit)
	if err == nil && ours && !gone {
		if err = st.deleteAt(ctx, left, branch, tip); err != nil {
			// The answer does not say, or says no (GitHub answers a branch
			// no longer at tip with an untyped error): the branch read
			// again says whether it is gone or someone else's now.
			var rerr error
			if ours, gone, tip, rerr = st.ownBranch(ctx, branch, left.Commit); rerr == nil && (gone || !ours) {
				err = nil
			}
		}
	}
	switch {
	case err != nil:
	case gone:
		out = dropGone
	case !ours:
		out = dropTheirs
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("⚠️ the branch %s is not opsbot's any more (it points at %s, which opsbot did not "+
			"make there): opsbot leaves it", mdtext.Code(branch), mdtext.Code(mdtext.ShortSHA(tip))))
	}
	var ref *ghclient.Refusal
	switch {
	case err == nil:
	case errors.As(err, &ref) || (i >= 0 && st.cur.Left[i].Tries+1 >= MaxCleanupTries && !st.cur.Left[i].Failing.IsZero() &&
		st.now.Sub(st.cur.Left[i].Failing) >= CleanupFor):
		st.h.log().Warn("deleting the merge's branch failed; it is left behind", "repo", st.cur.Repo, "branch", branch, "err", err)
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("⚠️ opsbot could not delete its branch %s (%s): delete it by hand",
			mdtext.Code(branch), mdtext.Text(err.Error())))
		out = dropFailed
	default:
		st.h.log().Warn("deleting the merge's branch got no answer; it is tried again", "repo", st.cur.Repo, "branch", branch, "err", err)
		if i >= 0 {
			left := slices.Clone(st.cur.Left)
			left[i].Tries++
			if left[i].Failing.IsZero() {
				left[i].Failing = st.now
			}
			st.cur.Left = left
		}
		return dropKept
	}
	st.forgetLeft(branch)
	return out
}

// deleteAt deletes branch, read at tip and opsbot's: only while it is still
// at tip (a push landing since is left alone), in the repository the record
// names or, for a record of a build before, the one the PR read in this
// step names; by name only where neither does (a cleanup of such a record
// reads no PR).
func (st *stepper) deleteAt(ctx context.Context, left record.Leftover, branch, tip string) error {
	node := left.RepoNode
	if node == "" {
		node = st.pr.GetBase().GetRepo().GetNodeID()
	}
	if node == "" {
		return st.gh.DeleteBranch(ctx, st.cur.Repo, branch)
	}
	return st.gh.DeleteBranchAt(ctx, node, branch, tip)
}

// forgetLeft drops branch from what the merge holds on GitHub.
func (st *stepper) forgetLeft(branch string) {
	if i := slices.IndexFunc(st.cur.Left, func(l record.Leftover) bool { return l.Branch == branch }); i >= 0 {
		st.cur.Left = slices.Delete(slices.Clone(st.cur.Left), i, i+1)
	}
}

// droppedWords is the status comment's line for a branch dropped by a
// merge that ended ("": nothing to say).
func droppedWords(branch string, d dropped) string {
	switch d {
	case dropDeleted:
		return fmt.Sprintf("🧹 opsbot's temporary branch %s is deleted", mdtext.Code(branch))
	case dropGone:
		return fmt.Sprintf("🧹 opsbot's temporary branch %s is not on GitHub (never made, or gone already)", mdtext.Code(branch))
	}
	return ""
}

// dropLeftBut deletes what the record holds besides keep: what an earlier
// merge of the PR left (a sequence begun over a done one takes its Left).
func (st *stepper) dropLeftBut(ctx context.Context, keep string) {
	for _, l := range slices.Clone(st.cur.Left) {
		if l.Branch != keep && st.dropBranch(ctx, l.Branch) == dropDeleted {
			st.data.Trail = append(st.data.Trail, fmt.Sprintf("🧹 opsbot deleted its temporary branch %s, left by an earlier try", mdtext.Code(l.Branch)))
		}
	}
}

// leftWords is the status comment's line for what a merge that ended
// still holds on GitHub ("": nothing).
func leftWords(left []record.Leftover) string {
	if len(left) == 0 {
		return ""
	}
	names := make([]string, len(left))
	for i, l := range left {
		names[i] = l.Branch
	}
	return fmt.Sprintf("🧹 opsbot's temporary %s %s may still be on GitHub: opsbot deletes %s now", plural(len(names), "branch", "branches"),
		mdtext.CodeList(names), plural(len(names), "it", "them"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cleanup is the engine's step of a done merge that still holds a branch
// on GitHub: each is deleted, and the status comment says so; one GitHub
// did not answer is tried again after Poll.
func (h *Handler) cleanup(ctx context.Context, rc *config.Repo, s seq.Step[Data]) (string, plan.Plan, error) {
	st := h.stepperOf(rc, s)
	var err error
	if st.gh, err = h.Clients(st.data.Installation); err != nil {
		return "", plan.Plan{}, err
	}
	for _, l := range slices.Clone(st.cur.Left) {
		if line := droppedWords(l.Branch, st.dropBranch(ctx, l.Branch)); line != "" {
			st.data.Trail = append(st.data.Trail, line)
		}
	}
	next, read := *st.cur, s.Seq.Version
	next.WakeAt = st.now.Add(Poll) // kept only while something is left
	next.Data, err = json.Marshal(st.data)
	if err != nil {
		return "", plan.Plan{}, err
	}
	edit := h.statusEdit(&next, st.data, "")
	// Guarded by the write itself (a done sequence is version 0 to a
	// plan's SequenceAt): one begun over it since takes what is left.
	p := plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: read, Edit: &edit}}}
	out := "merge-left-deleted"
	if next.Holds() {
		out = "merge-left-kept"
	}
	return out, p, nil
}
