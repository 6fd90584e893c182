package merge

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/changelog"
	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/runs"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// conflicted is a branch GitHub cannot update for a conflict. When the
// only files both the PR and its base changed since their merge base are
// append-only (repos[].merge.append_only: the changelog), opsbot makes the
// merge itself: the base's tree with the PR's own changes (other files
// both changed: GitHub's merge of them, githubMerge), and each append-only
// file merged by the changelog's rule (main's bytes whole, the PR's
// entries after them). The commit is made (objects nothing points at yet,
// made again harmlessly), checked path by path, and recorded on the pin
// with the act's mark (the pin covers that commit alone: its parents and
// tree); the next step, in this process, moves the branch to it if it is
// still at the head read, never forced. Anything else stops the merge:
// update the branch by hand.
func (st *stepper) conflicted(ctx context.Context, head string) (plan.Plan, string, error) {
	pr := st.pr
	if p, out, err := st.conflictMergeable(); out != "" || err != nil {
		return p, out, err
	}
	pin, tip, err := st.pinAndTip(ctx)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if pin == nil {
		return st.stopped("no_pin", noPinWhy)
	}
	branch := pr.GetHead().GetRef()
	built := st.data.Built != "" && strings.EqualFold(st.data.BuiltFor, head) && strings.EqualFold(st.data.UpdateBase, tip) &&
		strings.EqualFold(pin.ExpectBase, tip) && strings.EqualFold(pin.ExpectTree, st.data.BuiltTree)
	if built && st.h.acts.Fresh(st.data.UpdateMark) && st.now.Sub(st.data.UpdateAsked) <= MarkFresh {
		return st.moveBranch(ctx, head, branch)
	}
	if st.data.Built != "" && !st.h.acts.Fresh(st.data.UpdateMark) {
		// Marked before a restart (or tried already): the branch may have
		// moved, whatever the base has done since. Its push is waited for;
		// it is never moved again.
		st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔀 the branch conflicted with its base: opsbot's merge %s was about to be pushed "+
			"when opsbot stopped; waiting for its push", mdtext.Code(mdtext.ShortSHA(st.data.Built))))
		return st.wait(StepUpdating, "⏳ waiting for the push of opsbot's merge", "merge-conflict-possibly-pushed")
	}
	sides, p, out, err := st.conflictSides(ctx, head, tip)
	if out != "" || err != nil {
		return p, out, err
	}
	merged, p, out, err := st.mergeAppendOnly(ctx, sides)
	if out != "" || err != nil {
		return p, out, err
	}
	tree, p, out, err := st.makeMerge(ctx, head, tip, branch, sides, merged)
	if out != "" || err != nil {
		return p, out, err
	}
	st.data.BuiltFor, st.data.BuiltTree, st.data.BuiltFiles = strings.ToLower(head), strings.ToLower(tree), sides.appendOnly
	return st.markUpdate(pin.ID, tip, tree, st.data.Built, "merge-conflict-merged")
}

// byHand is what a conflict merge that stops asks of the maintainer.
const byHand = "update the branch by hand, then pin a run again"

// conflictMergeable stops a merge whose conflict opsbot does not merge:
// no append-only files, a fork's branch, opsbot not an App ("" out: it
// merges).
func (st *stepper) conflictMergeable() (plan.Plan, string, error) {
	pr := st.pr
	if len(Section.Of(st.rc).AppendOnly) == 0 {
		return st.stopped("conflict", "the branch has conflicts with its base: resolve them by hand")
	}
	if pr.GetHead().GetRepo().GetID() != pr.GetBase().GetRepo().GetID() {
		return st.stopped("conflict", "the branch has conflicts with its base, and it is a fork's, which opsbot does not push to: "+byHand)
	}
	if st.h.AppID == 0 {
		// A commit a token makes is the token's user's, not GitHub's: the
		// gate would not take its push for the one the pin covers.
		return st.stopped("conflict", "the branch has conflicts with its base, and opsbot merges them only as a GitHub App (a commit a "+
			"token makes is not signed by GitHub, so its push could not reuse the run): "+byHand)
	}
	return plan.Plan{}, "", nil
}

// conflictSides are the three trees of a conflict (the merge base's, the
// head's, the base's tip's), what each side changed since their merge base
// path by path (mode, type, content: a rename is its old path gone and its
// new one made), and the paths both changed: append-only, or other.
type conflictSides struct {
	trees                            [3]map[string]ghclient.TreeEntry
	onPR, onBase                     map[string]bool
	appendOnly, other                []string
	mergeBaseTree, headTree, tipTree map[string]ghclient.TreeEntry
}

// conflictSides reads the sides of the conflict of head with tip; a
// conflict opsbot cannot merge stops the merge (out set).
func (st *stepper) conflictSides(ctx context.Context, head, tip string) (conflictSides, plan.Plan, string, error) {
	var c conflictSides
	stop := func(why string) (conflictSides, plan.Plan, string, error) {
		p, out, err := st.stopped("conflict", why)
		return c, p, out, err
	}
	prSide, err := st.gh.Compare(ctx, st.cur.Repo, tip, head)
	if err != nil {
		return c, plan.Plan{}, "", err
	}
	if prSide.MergeBase == "" {
		return stop("the branch has conflicts with its base, and no common ancestor: " + byHand)
	}
	for i, commit := range []string{prSide.MergeBase, head, tip} {
		c.trees[i], err = st.gh.Tree(ctx, st.cur.Repo, commit)
		if errors.Is(err, ghclient.ErrTreeCut) {
			return stop("the branch has conflicts with its base, and the repository holds more files than GitHub lists in one tree: " + byHand)
		}
		if err != nil {
			return c, plan.Plan{}, "", err
		}
	}
	c.mergeBaseTree, c.headTree, c.tipTree = c.trees[0], c.trees[1], c.trees[2]
	c.onPR, c.onBase = changed(c.mergeBaseTree, c.headTree), changed(c.mergeBaseTree, c.tipTree)
	for name := range c.onPR {
		if !c.onBase[name] {
			continue
		}
		if runs.MatchAny(Section.Of(st.rc).AppendOnly, name) {
			c.appendOnly = append(c.appendOnly, name)
		} else {
			c.other = append(c.other, name)
		}
	}
	sort.Strings(c.appendOnly)
	sort.Strings(c.other)
	if len(c.appendOnly) == 0 {
		if len(c.other) == 0 {
			return stop("the branch has conflicts with its base that no file both changed explains: " + byHand)
		}
		return stop(fmt.Sprintf("the branch has conflicts with its base: both changed %s, and none of it is append-only "+
			"(`repos[].merge.append_only`): %s", mdtext.CodeList(c.other), byHand))
	}
	return c, plan.Plan{}, "", nil
}

// mergeAppendOnly merges each append-only file both sides changed by the
// changelog's rule; one the rule cannot merge stops the merge (out set).
func (st *stepper) mergeAppendOnly(ctx context.Context, c conflictSides) (map[string][]byte, plan.Plan, string, error) {
	set := Section.Of(st.rc)
	rule := changelog.Rule{Repo: set.LinkRepo}
	if rule.Repo == "" {
		rule.Repo = st.cur.Repo
	}
	stop := func(why string) (map[string][]byte, plan.Plan, string, error) {
		p, out, err := st.stopped("conflict", why)
		return nil, p, out, err
	}
	merged := map[string][]byte{}
	for _, name := range c.appendOnly {
		var sides [3][]byte
		for i, t := range c.trees {
			e, ok := t[name]
			if !ok || e.Mode != "100644" || e.Type != "blob" {
				return stop(fmt.Sprintf("the branch has conflicts with its base in %s, which is not a plain file on every side "+
					"(one side added or removed it, or made it a symlink, a submodule or an executable): %s", mdtext.Code(name), byHand))
			}
			var err error
			if sides[i], err = st.gh.Blob(ctx, st.cur.Repo, e.SHA); err != nil {
				return nil, plan.Plan{}, "", err
			}
		}
		out, err := rule.Resolve(sides[0], sides[1], sides[2], st.cur.PR)
		var refused *changelog.Error
		if errors.As(err, &refused) {
			return stop(fmt.Sprintf("the branch has conflicts with its base in %s, which the append-only rule cannot merge "+
				"(%s): %s", mdtext.Code(name), mdtext.Text(refused.Reason), byHand))
		}
		if err != nil {
			return nil, plan.Plan{}, "", err
		}
		merged[name] = out
	}
	return merged, plan.Plan{}, "", nil
}

// makeMerge makes opsbot's merge commit (st.data.Built) of head and tip:
// the base's tip's files with the PR's own changes, or, where both changed
// other files, GitHub's own merge of them, and the append-only files as
// merged. What was made is checked path by path, and signed where the
// branch's rules require it; a merge that is not what it should be stops
// the merge (out set). It returns the merge's tree.
func (st *stepper) makeMerge(ctx context.Context, head, tip, branch string, c conflictSides, merged map[string][]byte) (string, plan.Plan, string, error) {
	cur := st.cur
	fail := func(p plan.Plan, out string, err error) (string, plan.Plan, string, error) { return "", p, out, err }
	var changes []ghclient.TreeChange
	var want map[string]ghclient.TreeEntry
	var onto string // the tree the append-only files are written onto
	if len(c.other) == 0 {
		want = make(map[string]ghclient.TreeEntry, len(c.tipTree))
		for p, e := range c.tipTree {
			want[p] = e
		}
		// Every path the PR changed is as the head has it (a renamed
		// file's old path gone, a copied file's source kept).
		for p := range c.onPR {
			if c.onBase[p] {
				continue // an append-only file: merged above
			}
			if e, ok := c.headTree[p]; ok {
				changes = append(changes, ghclient.TreeChange{Path: p, Mode: e.Mode, Type: e.Type, SHA: e.SHA})
				want[p] = e
			} else {
				changes = append(changes, ghclient.TreeChange{Path: p, Mode: "100644", Type: "blob", Remove: true})
				delete(want, p)
			}
		}
		sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
		tipInfo, err := st.gh.CommitInfo(ctx, cur.Repo, tip)
		if err != nil {
			return fail(plan.Plan{}, "", err)
		}
		onto = tipInfo.Tree
	} else {
		gm, p, out, err := st.githubMerge(ctx, head, tip, c)
		if err != nil || out != "" {
			return fail(p, out, err)
		}
		want, onto = gm.files, gm.tree
	}
	for _, name := range c.appendOnly {
		content := string(merged[name])
		changes = append(changes, ghclient.TreeChange{Path: name, Mode: "100644", Type: "blob", Content: &content})
		want[name] = ghclient.TreeEntry{Mode: "100644", Type: "blob", SHA: blobSum(merged[name])}
	}
	tree, err := st.gh.CreateTree(ctx, cur.Repo, onto, changes)
	if err == nil {
		st.data.Built, err = st.gh.CreateCommit(ctx, cur.Repo, fmt.Sprintf("Merge branch '%s' into %s\n\n%s merged by the append-only rule (opsbot, "+
			"/merge-with-reuse).", st.data.Base, branch, strings.Join(c.appendOnly, ", ")), tree, []string{head, tip})
	}
	var ref *ghclient.Refusal
	if errors.As(err, &ref) {
		return fail(st.stopped("update_refused", fmt.Sprintf("%s (%s): %s", refusedWords(ref, "make the merge"), mdtext.Text(ref.Message), byHand)))
	}
	if err != nil {
		return fail(plan.Plan{}, "", err) // nothing points at what was made: made again at the next step
	}
	if p, out, err := st.checkMade(ctx, branch, want); out != "" || err != nil {
		return fail(p, out, err)
	}
	return tree, plan.Plan{}, "", nil
}

// checkMade checks opsbot's merge (st.data.Built): it is want (the base's
// tip with the PR's own change, path by path: mode, type, content) and
// nothing else, and signed by GitHub where the branch's rules require
// signed commits; else the merge stops (out set).
func (st *stepper) checkMade(ctx context.Context, branch string, want map[string]ghclient.TreeEntry) (plan.Plan, string, error) {
	cur := st.cur
	made, err := st.gh.Tree(ctx, cur.Repo, st.data.Built)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if why := sameTree(want, made); why != "" {
		return st.stopped("conflict", fmt.Sprintf("the merge opsbot made is not the PR's own change on its base (%s), so it is not pushed: %s", why, byHand))
	}
	// A branch whose rules require signed commits takes the merge only
	// signed: GitHub signs what an App makes with no author given.
	rules, err := st.gh.BranchRules(ctx, cur.Repo, branch)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if slices.Contains(rules, ghclient.RuleRequiredSignatures) {
		cm, err := st.gh.CommitInfo(ctx, cur.Repo, st.data.Built)
		if err != nil {
			return plan.Plan{}, "", err
		}
		if !cm.Verified {
			return st.stopped("unsigned", fmt.Sprintf("the branch %s requires signed commits, and GitHub did not sign the merge opsbot made (%s), "+
				"so it is not pushed: %s", mdtext.Code(branch), mdtext.ShortSHA(st.data.Built), byHand))
		}
	}
	return plan.Plan{}, "", nil
}

// gitHubMerged is GitHub's merge of the rest: its tree and files.
type gitHubMerged struct {
	tree  string
	files map[string]ghclient.TreeEntry
}

// githubMerge has GitHub merge what both changed besides the append-only
// files (by hunks, as update-branch would have): the head with its changes
// to those files undone, on a branch of opsbot's (its commits say [skip
// ci], so no push or pull_request workflow runs on them; a workflow on
// branches being created or deleted still does), merged with the base's
// tip (POST /merges), the branch deleted after. GitHub's merge is checked: each file only one side
// changed is that side's, and the append-only files the base's tip's. A
// conflict there too (409) stops the merge; p and out, when out is set,
// are that step.
func (st *stepper) githubMerge(ctx context.Context, head, tip string, c conflictSides) (gitHubMerged, plan.Plan, string, error) {
	cur := st.cur
	stop := func(code, why string) (gitHubMerged, plan.Plan, string, error) {
		p, out, err := st.stopped(code, why)
		return gitHubMerged{}, p, out, err
	}
	st.sweepLeftBranches(ctx)
	skip := fmt.Sprintf("[skip ci] opsbot: #%d without its changes to %s, to merge the rest", cur.PR, strings.Join(c.appendOnly, ", "))
	var ref *ghclient.Refusal
	// The commit is for this head, this tip and these append-only files
	// (a reload may change which are): any of them other, it is made anew.
	key := strings.ToLower(head + ".." + tip + ":" + strings.Join(c.appendOnly, ","))
	undone := st.data.Undone
	if st.data.UndoneFor != key || undone == "" || !st.holds(tempBranch(cur.PR, undone)) {
		p, out, err := st.noteUndone(ctx, head, key, skip, c)
		return gitHubMerged{}, p, out, err
	}
	temp := tempBranch(cur.PR, undone)
	// A cancel, a deleted command or a push that waits goes first: nothing
	// is deleted or made for a merge about to stop (asked again right
	// before the branch is made, with nothing read from GitHub after).
	if err := st.w.CheckClear(); err != nil {
		return gitHubMerged{}, plan.Plan{}, "", err
	}
	if !st.h.acts.Try(st.data.BranchMark) {
		// Made before a restart, or tried already: it may be there, and
		// moved by anyone who can push. Deleted first while it is
		// opsbot's, made afresh; someone else's, or a deletion GitHub
		// refuses, stops the merge (asking again would not change that).
		switch d := st.dropBranch(ctx, temp); d {
		case dropKept:
			return gitHubMerged{}, plan.Plan{}, "", fmt.Errorf("deleting opsbot's temporary branch %s to make it again got no answer", temp)
		case dropTheirs, dropFailed:
			return stop("conflict", fmt.Sprintf("opsbot could not make its temporary branch %s again: %s", mdtext.Code(temp), byHand))
		}
		st.noteLeft(temp, undone) // made again below
	}
	// Again, as the last thing before the branch is made (its making
	// starts any workflow on branches made): a stop stored while the old
	// one was read and deleted goes first.
	if err := st.w.CheckClear(); err != nil {
		return gitHubMerged{}, plan.Plan{}, "", err
	}
	err := st.gh.CreateBranch(ctx, cur.Repo, temp, undone)
	if errors.As(err, &ref) {
		st.dropBranch(ctx, temp) // only while it is opsbot's: a branch someone made under the name stays
		return stop("update_refused", fmt.Sprintf("%s (%s%s): %s", refusedWords(ref, "make the merge"), mdtext.Text(ref.Message), workflowHint(ref), byHand))
	}
	if err != nil {
		return gitHubMerged{}, plan.Plan{}, "", err // its answer lost, it may exist: deleted first at the next try
	}
	stop = func(code, why string) (gitHubMerged, plan.Plan, string, error) {
		st.dropBranch(ctx, temp)
		p, out, err := st.stopped(code, why)
		return gitHubMerged{}, p, out, err
	}
	gm, err := st.gh.MergeInto(ctx, cur.Repo, temp, tip, skip)
	switch {
	case errors.As(err, &ref) && ref.Status == 409:
		return stop("conflict", fmt.Sprintf("the branch has conflicts with its base, and GitHub's merge of %s, which both changed, conflicts too "+
			"(%s): %s", mdtext.CodeList(c.other), mdtext.Text(ref.Message), byHand))
	case errors.As(err, &ref) && ref.Message == "nothing to merge", errors.Is(err, ghclient.ErrNotFound):
		return stop("conflict", fmt.Sprintf("opsbot's branch %s was moved or deleted before GitHub merged it: %s", mdtext.Code(temp), byHand))
	case errors.As(err, &ref):
		return stop("update_refused", fmt.Sprintf("%s (%s%s): %s", refusedWords(ref, "merge the rest"), mdtext.Text(ref.Message), workflowHint(ref), byHand))
	case err != nil:
		return gitHubMerged{}, plan.Plan{}, "", err
	}
	gmInfo, err := st.gh.CommitInfo(ctx, cur.Repo, gm)
	if err != nil {
		return gitHubMerged{}, plan.Plan{}, "", err
	}
	// GitHub merged into the branch as it was then: anyone who can push
	// could have moved it first. Only a merge of opsbot's own commit with
	// the base's tip is GitHub's merge of the two.
	if len(gmInfo.Parents) != 2 || !strings.EqualFold(gmInfo.Parents[0], undone) || !strings.EqualFold(gmInfo.Parents[1], tip) {
		return stop("conflict", fmt.Sprintf("GitHub's merge of the rest is not a merge of opsbot's commit %s with the base's tip (the branch %s "+
			"was moved meanwhile): %s", mdtext.ShortSHA(undone), mdtext.Code(temp), byHand))
	}
	files, err := st.gh.Tree(ctx, cur.Repo, gm)
	if errors.Is(err, ghclient.ErrTreeCut) {
		return stop("conflict", "GitHub's merge of the rest holds more files than GitHub lists in one tree: "+byHand)
	}
	if err != nil {
		return gitHubMerged{}, plan.Plan{}, "", err
	}
	if p := c.unlike(Section.Of(st.rc).AppendOnly, files); p != "" {
		return stop("conflict", fmt.Sprintf("GitHub's merge of the rest is not what each side changed (%s): %s", mdtext.Code(p), byHand))
	}
	st.dropBranch(ctx, temp) // GitHub's merge is read: the branch has done its part
	return gitHubMerged{tree: gmInfo.Tree, files: files}, plan.Plan{}, "", nil
}

// noteUndone makes opsbot's commit of head without its changes to the
// append-only files (skip its message), and notes the temporary branch
// GitHub merges the rest on in the merge's record before it is made: the
// step due at once makes it.
func (st *stepper) noteUndone(ctx context.Context, head, key, skip string, c conflictSides) (plan.Plan, string, error) {
	cur := st.cur
	var ref *ghclient.Refusal
	var undone string
	headInfo, err := st.gh.CommitInfo(ctx, cur.Repo, head)
	if err != nil {
		return plan.Plan{}, "", err
	}
	var undo []ghclient.TreeChange
	for _, name := range c.appendOnly {
		e := c.mergeBaseTree[name] // a plain file on every side: checked before
		undo = append(undo, ghclient.TreeChange{Path: name, Mode: e.Mode, Type: e.Type, SHA: e.SHA})
	}
	undoTree, err := st.gh.CreateTree(ctx, cur.Repo, headInfo.Tree, undo)
	if err == nil {
		undone, err = st.gh.CreateCommit(ctx, cur.Repo, skip, undoTree, []string{head})
	}
	if errors.As(err, &ref) {
		return st.stopped("update_refused", fmt.Sprintf("%s (%s%s): %s", refusedWords(ref, "make the merge"), mdtext.Text(ref.Message), workflowHint(ref), byHand))
	}
	if err != nil {
		return plan.Plan{}, "", err // nothing points at what was made: made again at the next step
	}
	// The branch is the merge's before it is made: written first, so
	// whatever ends the merge from now on deletes it.
	st.dropLeftBut(ctx, "") // an older try's, for another head or tip
	st.data.Undone, st.data.UndoneFor, st.data.BranchMark = undone, key, st.h.acts.New()
	st.noteLeft(tempBranch(cur.PR, undone), undone)
	return st.waitFor(st.cur.Step, fmt.Sprintf("⏳ GitHub merges what both changed on opsbot's temporary branch %s",
		mdtext.Code(tempBranch(cur.PR, undone))), "merge-conflict-branch-noted", 0)
}

// unlike is a path where GitHub's merge of the rest (files) is not what
// each side changed: a path only one side changed is that side's, and an
// append-only file the base's tip's ("": none).
func (c conflictSides) unlike(appendOnlyGlobs []string, files map[string]ghclient.TreeEntry) string {
	both := map[string]bool{}
	for _, n := range c.other {
		both[n] = true
	}
	for _, n := range c.appendOnly {
		both[n] = true
	}
	paths := map[string]bool{}
	for _, t := range []map[string]ghclient.TreeEntry{c.headTree, c.tipTree, files} {
		for p := range t {
			paths[p] = true
		}
	}
	for p := range paths {
		if both[p] && !runs.MatchAny(appendOnlyGlobs, p) {
			continue // both changed it: GitHub's merge of the two
		}
		side := c.tipTree
		if c.onPR[p] && !both[p] {
			side = c.headTree
		}
		w, inSide := side[p]
		g, inMerge := files[p]
		if inSide != inMerge || w != g {
			return p
		}
	}
	return ""
}

// sweepLeftBranches deletes the branches of opsbot's for this PR that a
// process stopped between making and deleting one left behind: named
// opsbot-merge-<pr>-…, pointing at a commit of opsbot's (its message). A
// failure to list them is logged: they stay, as before.
func (st *stepper) sweepLeftBranches(ctx context.Context) {
	left, err := st.gh.BranchesWithPrefix(ctx, st.cur.Repo, fmt.Sprintf("opsbot-merge-%d-", st.cur.PR))
	if err != nil {
		st.h.log().Warn("listing the merge branches left behind failed", "repo", st.cur.Repo, "pr", st.cur.PR, "err", err)
		return
	}
	own := fmt.Sprintf("[skip ci] opsbot: #%d without its changes to ", st.cur.PR)
	prefix := fmt.Sprintf("opsbot-merge-%d-", st.cur.PR)
	looked := 0
	for name, sha := range left {
		if st.holds(name) {
			continue // the merge's record holds it: deleted as the merge's (dropBranch), and said
		}
		if looked == 10 {
			break // a few a merge: more are no crash's, and cost a read each
		}
		looked++
		cm, err := st.gh.CommitInfo(ctx, st.cur.Repo, sha)
		if err != nil || !strings.HasPrefix(cm.Message, own) || len(cm.Parents) == 0 {
			continue // not a commit of opsbot's merge: someone else's branch
		}
		// opsbot names its branch for its own commit: the branch's tip,
		// or (once GitHub merged the rest on it) the tip's first parent.
		suffix := strings.TrimPrefix(name, prefix)
		if suffix != mdtext.ShortSHA(sha) && suffix != mdtext.ShortSHA(cm.Parents[0]) {
			continue
		}
		// Only while it is still at the commit read: a push since stays.
		if err := st.deleteAt(context.WithoutCancel(ctx), record.Leftover{}, name, sha); err != nil {
			st.h.log().Warn("deleting a merge branch left behind failed", "repo", st.cur.Repo, "branch", name, "err", err)
		}
	}
}

// workflowHint is what a refusal about workflows asks of the App.
func workflowHint(ref *ghclient.Refusal) string {
	if strings.Contains(strings.ToLower(ref.Message), "workflow") {
		return "; the base's changes touch `.github/workflows`, which needs the App's Workflows permission (`opsbot github app-manifest --merge`)"
	}
	return ""
}

// changed are the paths whose entry (mode, type, object) differs from
// from to to, or that only one of them has.
func changed(from, to map[string]ghclient.TreeEntry) map[string]bool {
	out := map[string]bool{}
	for p, e := range to {
		if from[p] != e {
			out[p] = true
		}
	}
	for p := range from {
		if _, ok := to[p]; !ok {
			out[p] = true
		}
	}
	return out
}

// sameTree says where made differs from want ("": nowhere).
func sameTree(want, made map[string]ghclient.TreeEntry) string {
	for p, e := range made {
		w, ok := want[p]
		switch {
		case !ok:
			return "it holds " + mdtext.Code(p) + ", which it should not"
		case w.Mode != e.Mode || w.Type != e.Type || !strings.EqualFold(w.SHA, e.SHA):
			return mdtext.Code(p) + " differs"
		}
	}
	for p := range want {
		if _, ok := made[p]; !ok {
			return "it lacks " + mdtext.Code(p)
		}
	}
	return ""
}

// blobSum is the object id Git gives content as a blob.
func blobSum(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// moveBranch moves the branch to the merge opsbot made, marked before:
// from the head opsbot read only (a push since wins, and the merge
// stops), asked once.
func (st *stepper) moveBranch(ctx context.Context, head, branch string) (plan.Plan, string, error) {
	// The move is a compare-and-swap from the head read (updateRefs'
	// beforeOid): a push since, even one that set the branch back to an
	// older commit opsbot's merge also follows, is refused. The branch is
	// read first only to say which push won.
	at, err := st.gh.BranchHead(ctx, st.cur.Repo, branch)
	if err != nil {
		return plan.Plan{}, "", err
	}
	if !strings.EqualFold(at, head) {
		return st.stopped("pushed", fmt.Sprintf("the branch moved to %s while opsbot made its merge from %s: a push since wins. "+
			"Run `/merge-with-reuse` again once its sweep has run", mdtext.ShortSHA(at), mdtext.ShortSHA(head)))
	}
	// The last thing before the move, with no GitHub read after it: a
	// cancel, a deleted command or a push that waits goes first.
	st.data.UpdateAsked = st.now
	var now string // the branch read back
	a, stop := st.send(ctx, seq.Act{Mark: st.data.UpdateMark, Do: func(ctx context.Context) error {
		return st.gh.MoveBranchFrom(ctx, st.pr.GetHead().GetRepo().GetNodeID(), branch, head, st.data.Built)
	}, Verify: func(ctx context.Context) (seq.Shown, error) {
		// The move is a compare-and-swap: at opsbot's merge, moved; at
		// another commit than the head read, not moved, and it cannot be
		// now. Still at the head read, it says nothing yet: GitHub may be
		// moving it still (an answer lost, or GitHub's untyped error, which
		// it also gives a move that timed out inside).
		var err error
		if now, err = st.gh.BranchHead(ctx, st.cur.Repo, branch); err != nil {
			return seq.NotShown, err
		}
		switch {
		case strings.EqualFold(now, st.data.Built):
			return seq.ShownTaken, nil
		case strings.EqualFold(now, head):
			return seq.NotShown, nil
		}
		return seq.ShownNotTaken, nil
	}})
	if stop != nil {
		return plan.Plan{}, "", stop // a cancel or a push waits, or the step ended: the next step finds the mark, and waits for the push
	}
	err = a.Err
	var ref *ghclient.Refusal
	if errors.As(err, &ref) {
		return st.stopped("update_refused", fmt.Sprintf("%s (%s%s): a push since opsbot read %s wins. Update the branch by hand, then pin a run again",
			refusedWords(ref, "move the branch to opsbot's merge"), mdtext.Text(ref.Message), workflowHint(ref), mdtext.ShortSHA(head)))
	}
	what := fmt.Sprintf("🔀 the branch conflicted with its base in %s: opsbot merged it by the append-only rule as %s (from %s)",
		mdtext.CodeList(st.data.BuiltFiles), mdtext.Code(mdtext.ShortSHA(st.data.Built)), mdtext.Code(mdtext.ShortSHA(head)))
	if err != nil {
		// An answer lost, or one that does not say (an untyped GraphQL
		// error): GitHub is read back before anything is said.
		st.h.log().Warn("moving a branch got no clear answer; the branch was read back", "repo", st.cur.Repo, "pr", st.cur.PR, "err", err,
			"read_err", a.ReadErr)
		switch {
		case a.Shown == seq.ShownTaken:
			st.data.Trail = append(st.data.Trail, what+" (GitHub's answer did not say so; the branch read back did)")
		case strings.EqualFold(now, head):
			// Still at the head read: GitHub may still move it. Its push is
			// waited for (the merge stops when none comes), and the move is
			// never asked again.
			said := "GitHub's answer was lost"
			if strings.Contains(err.Error(), "GraphQL API failed") {
				said = "GitHub answered with an error that does not say whether it did (" + mdtext.Text(err.Error()) + ")"
			}
			st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔀 the branch conflicted with its base in %s: opsbot made its merge %s (from %s) "+
				"and asked GitHub to move the branch to it; %s, and the branch was still at %s when read back",
				mdtext.CodeList(st.data.BuiltFiles), mdtext.Code(mdtext.ShortSHA(st.data.Built)), mdtext.Code(mdtext.ShortSHA(head)),
				said, mdtext.Code(mdtext.ShortSHA(head))))
			return st.wait(StepUpdating, "⏳ waiting for the push of opsbot's merge", "merge-conflict-unanswered")
		case a.Shown == seq.ShownNotTaken:
			return st.stopped("pushed", fmt.Sprintf("the branch is at %s, neither opsbot's merge %s nor %s, the head it read: a push "+
				"since wins. Run `/merge-with-reuse` again once its sweep has run", mdtext.ShortSHA(now), mdtext.ShortSHA(st.data.Built),
				mdtext.ShortSHA(head)))
		default:
			st.data.Trail = append(st.data.Trail, fmt.Sprintf("🔀 the branch conflicted with its base in %s: opsbot made its merge %s (from %s) "+
				"and asked GitHub to move the branch to it; GitHub's answer did not say whether it did, and the branch could not be read back",
				mdtext.CodeList(st.data.BuiltFiles), mdtext.Code(mdtext.ShortSHA(st.data.Built)), mdtext.Code(mdtext.ShortSHA(head))))
			return st.wait(StepUpdating, "⏳ waiting for the push of opsbot's merge", "merge-conflict-unanswered")
		}
		return st.wait(StepUpdating, "⏳ waiting for the push of opsbot's merge", "merge-conflict-pushed")
	}
	st.data.Trail = append(st.data.Trail, what)
	return st.wait(StepUpdating, "⏳ waiting for the push of opsbot's merge", "merge-conflict-pushed")
}
