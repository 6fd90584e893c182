package ghclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// The Git database as the conflict merge uses it: what a PR and its base
// changed since their merge base, files and trees read, a tree and a
// commit made, and the branch moved only forward.
func TestGitDatabase(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 7, "octocat", "feature/x?force=true", "b0", []string{"h1"})
	f.GitCommit(repo, "b0", nil, map[string]string{"log.yaml": "a\n", "keep.txt": "k\n", "gone.txt": "g\n"})
	f.GitCommit(repo, "h1", []string{"b0"}, map[string]string{"log.yaml": "a\npr\n", "keep.txt": "k\n", "gone.txt": "g\n", "new.txt": "n\n"})
	f.GitCommit(repo, "m1", []string{"b0"}, map[string]string{"log.yaml": "a\nmain\n", "keep.txt": "k\n"})
	ctx := t.Context()

	cmp, err := c.Compare(ctx, repo, "m1", "h1")
	if err != nil || cmp.MergeBase != "b0" || cmp.Status != "diverged" || strings.Join(cmp.Files, ",") != "log.yaml,new.txt" {
		t.Fatalf("Compare(m1...h1) = %+v, %v", cmp, err)
	}
	tipFiles, err := c.Tree(ctx, repo, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Blob(ctx, repo, tipFiles["log.yaml"].SHA); err != nil || string(b) != "a\nmain\n" {
		t.Fatalf("Blob = %q, %v", b, err)
	}
	if _, err := c.Blob(ctx, repo, "0000000000000000000000000000000000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Blob(no such blob) = %v, want ErrNotFound", err)
	}
	tip, err := c.CommitInfo(ctx, repo, "m1")
	if err != nil || tip.Tree == "" {
		t.Fatalf("CommitInfo(m1) = %+v, %v", tip, err)
	}
	head, err := c.Tree(ctx, repo, "h1")
	if err != nil || head["new.txt"].Mode != "100644" || head["new.txt"].SHA == "" {
		t.Fatalf("Tree(h1) = %+v, %v", head, err)
	}
	merged := "a\nmain\npr\n"
	tree, err := c.CreateTree(ctx, repo, tip.Tree, []TreeChange{
		{Path: "new.txt", Mode: "100644", Type: "blob", SHA: head["new.txt"].SHA},
		{Path: "log.yaml", Mode: "100644", Type: "blob", Content: &merged},
		{Path: "keep.txt", Mode: "100644", Type: "blob", Remove: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := c.CreateCommit(ctx, repo, "Merge main into feature/x", tree, []string{"h1", "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.GitFiles(repo, commit); len(got) != 2 || got["log.yaml"] != merged || got["new.txt"] != "n\n" {
		t.Fatalf("the commit made holds %v", got)
	}
	made, err := c.CommitInfo(ctx, repo, commit)
	if err != nil || made.Tree != tree || len(made.Parents) != 2 || made.Parents[0] != "h1" || made.Parents[1] != "m1" {
		t.Fatalf("CommitInfo(the commit made) = %+v, %v", made, err)
	}
	// Not a fast-forward of the branch: refused; a branch no longer at the
	// commit named: GitHub's generic error, which does not say (the caller
	// reads the branch back). The branch stays either way. The name is a
	// GraphQL variable: nothing in it reaches a path or a query.
	node := "R_" + strings.Replace(repo, "/", "_", 1)
	if err := c.MoveBranchFrom(ctx, node, "feature/x?force=true", "h1", "m1"); !isRefusal(err, 0) {
		t.Fatalf("MoveBranchFrom to a commit that does not follow the head = %v, want a refusal", err)
	}
	if err := c.MoveBranchFrom(ctx, node, "feature/x?force=true", "m1", commit); err == nil || isRefusal(err, 0) {
		t.Fatalf("MoveBranchFrom a commit the branch is not at = %v, want an error that does not say", err)
	}
	if h := f.PRHead(repo, 7); h != "h1" {
		t.Fatalf("a move from a commit the branch is not at moved it to %s", h)
	}
	if err := c.MoveBranchFrom(ctx, node, "feature/x?force=true", "h1", commit); err != nil {
		t.Fatal(err)
	}
	if h := f.PRHead(repo, 7); h != commit {
		t.Fatalf("the PR's head is %s, want the commit made %s", h, commit)
	}
	if info, err := c.CommitInfo(ctx, repo, commit); err != nil || !info.ByGitHub {
		t.Fatalf("the commit made, as the branch's head: %+v, %v; want it signed by GitHub", info, err)
	}
	// GitHub's own merge, on a branch of opsbot's: a file both changed
	// merges cleanly (as the test tells the fake) or conflicts.
	if err := c.CreateBranch(ctx, repo, "opsbot/merge-7", "h1"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBranch(ctx, repo, "opsbot/merge-7", "h1"); !isRefusal(err, 422) {
		t.Fatalf("a branch made twice = %v, want a 422 refusal", err)
	}
	if _, err := c.MergeInto(ctx, repo, "opsbot/merge-7", "m1", "[skip ci] merge"); !isRefusal(err, 409) {
		t.Fatalf("a merge with log.yaml changed on both sides = %v, want a 409 refusal", err)
	}
	f.CleanMerge(repo, "log.yaml", "a\nboth\n")
	m, err := c.MergeInto(ctx, repo, "opsbot/merge-7", "m1", "[skip ci] merge")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.GitFiles(repo, m); got["log.yaml"] != "a\nboth\n" || got["new.txt"] != "n\n" || got["keep.txt"] != "k\n" || len(got) != 3 {
		t.Fatalf("GitHub's merge holds %v", got)
	}
	if err := c.DeleteBranch(ctx, repo, "opsbot/merge-7"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBranch(ctx, repo, "opsbot/merge-7"); err != nil {
		t.Fatalf("deleting a branch gone already = %v", err)
	}
	if _, ok := f.Branches(repo)["opsbot/merge-7"]; ok {
		t.Fatal("the branch is still there")
	}
	// A dry run makes nothing.
	_, dry, _, _ := setup(t, func(o *Options) { o.DryRun = true })
	if _, err := dry.CreateCommit(ctx, repo, "m", tree, []string{"h1"}); !isRefusal(err, 0) {
		t.Fatalf("a dry run's CreateCommit = %v", err)
	}
}

func isRefusal(err error, status int) bool {
	var r *Refusal
	return errors.As(err, &r) && r.Status == status
}

// A branch is deleted only while it is at the commit named, in one
// updateRefs whose variables have the types GitHub's schema gives them
// (RefUpdate.name is a GitRefname: a String variable there is refused
// before anything runs): a branch moved since stays, and the answer does
// not say so (GitHub's is untyped); one at the commit goes.
func TestDeleteBranchAtIsACompareAndSwap(t *testing.T) {
	f, c, _, _ := setup(t, nil)
	f.AddPR(repo, 7, "octocat", "feature/x", "b0", []string{"h1"})
	f.SetBranchTip(repo, "opsbot-merge-7-abc", "h1")
	node := "R_" + strings.ReplaceAll(repo, "/", "_")
	ctx := t.Context()
	if err := c.DeleteBranchAt(ctx, node, "opsbot-merge-7-abc", "b0"); err == nil || isRefusal(err, 0) {
		t.Fatalf("DeleteBranchAt(a branch not at b0) = %v, want an error that does not say", err)
	}
	if _, ok := f.Branches(repo)["opsbot-merge-7-abc"]; !ok {
		t.Fatal("a branch not at the commit named was deleted")
	}
	if err := c.DeleteBranchAt(ctx, node, "opsbot-merge-7-abc", "h1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Branches(repo)["opsbot-merge-7-abc"]; ok {
		t.Fatal("the branch at the commit named is still there")
	}
	var sent string
	for _, r := range f.Requests() {
		if r.Route == githubtest.RouteDeleteRef {
			sent = r.Body
		}
	}
	for _, want := range []string{`$name: GitRefname!`, `$before: GitObjectID!`, `$after: GitObjectID!`, `beforeOid: $before`, `force: false`,
		`"before":"h1"`, `"after":"0000000000000000000000000000000000000000"`, `"name":"refs/heads/opsbot-merge-7-abc"`} {
		if !strings.Contains(sent, want) {
			t.Errorf("the deletion sent lacks %s: %s", want, sent)
		}
	}
}
