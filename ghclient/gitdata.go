package ghclient

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// Blob reads a blob (a file's content) by its object id, whatever its
// size up to GitHub's 100 MB.
func (c *Client) Blob(ctx context.Context, repo, sha string) ([]byte, error) {
	o, r := split(repo)
	b, resp, err := c.gh.Git.GetBlob(ctx, o, r, sha)
	if err := wrap("reading the blob "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return nil, err
	}
	if b.GetEncoding() != "base64" {
		return nil, fmt.Errorf("reading the blob %s: GitHub encoded it %q, not base64", mdtext.ShortSHA(sha), b.GetEncoding())
	}
	out, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(b.GetContent(), "\n", ""))
	if err != nil {
		return nil, fmt.Errorf("reading the blob %s: %w", mdtext.ShortSHA(sha), err)
	}
	return out, nil
}

// ErrTreeCut is a tree GitHub did not list whole (over 100,000 entries):
// trying again changes nothing.
var ErrTreeCut = errors.New("ghclient: GitHub cut the tree (too many files)")

// TreeEntry is a path of a tree: its mode (100644, 100755, 120000, …),
// its type (blob, commit for a submodule) and its object.
type TreeEntry struct {
	Mode, Type, SHA string
}

// Tree reads every path of a tree (or a commit's tree). A tree GitHub
// cuts (over 100,000 entries) is an error: a partial tree would name
// files as absent that are not.
func (c *Client) Tree(ctx context.Context, repo, sha string) (map[string]TreeEntry, error) {
	o, r := split(repo)
	t, resp, err := c.gh.Git.GetTree(ctx, o, r, sha, true)
	if err := wrap("reading the tree of "+mdtext.ShortSHA(sha), resp, err); err != nil {
		return nil, err
	}
	if t.GetTruncated() {
		return nil, fmt.Errorf("reading the tree of %s: %w", mdtext.ShortSHA(sha), ErrTreeCut)
	}
	out := make(map[string]TreeEntry, len(t.Entries))
	for _, e := range t.Entries {
		if e.GetType() == "tree" {
			continue
		}
		out[e.GetPath()] = TreeEntry{Mode: e.GetMode(), Type: e.GetType(), SHA: e.GetSHA()}
	}
	return out, nil
}

// TreeChange is one path of a new tree: its mode and type with its
// object (SHA) or its new content, or removed.
type TreeChange struct {
	Path, Mode, Type, SHA string
	Content               *string
	Remove                bool
}

// dryRunRefusal is every Git database write of a dry run.
var dryRunRefusal = &Refusal{Message: "opsbot runs with --dry-run and writes nothing to GitHub"}

// CreateTree makes a tree: base's paths with changes. Nothing points at
// it: making one again is harmless.
func (c *Client) CreateTree(ctx context.Context, repo, base string, changes []TreeChange) (string, error) {
	if c.dryRun {
		return "", dryRunRefusal
	}
	entries := make([]*github.TreeEntry, 0, len(changes))
	for _, ch := range changes {
		e := &github.TreeEntry{Path: github.String(ch.Path), Mode: github.String(ch.Mode), Type: github.String(ch.Type)}
		switch {
		case ch.Remove: // sha null: removed
		case ch.Content != nil:
			e.Content = ch.Content
		default:
			e.SHA = github.String(ch.SHA)
		}
		entries = append(entries, e)
	}
	o, r := split(repo)
	t, resp, err := c.gh.Git.CreateTree(ctx, o, r, base, entries)
	if err := refusal("making a tree", resp, err); err != nil {
		return "", err
	}
	return t.GetSHA(), nil
}

// CreateCommit makes a commit of tree with parents, naming no author or
// committer: GitHub makes it as opsbot's account and signs it. Nothing
// points at it: making one again is harmless.
func (c *Client) CreateCommit(ctx context.Context, repo, message, tree string, parents []string) (string, error) {
	if c.dryRun {
		return "", dryRunRefusal
	}
	ps := make([]*github.Commit, 0, len(parents))
	for _, p := range parents {
		ps = append(ps, &github.Commit{SHA: github.String(p)})
	}
	o, r := split(repo)
	cm, resp, err := c.gh.Git.CreateCommit(ctx, o, r, &github.Commit{Message: github.String(message), Tree: &github.Tree{SHA: github.String(tree)},
		Parents: ps}, nil)
	if err := refusal("making a commit", resp, err); err != nil {
		return "", err
	}
	return cm.GetSHA(), nil
}

// updateRefsPreview is the media type GitHub's schema previews list for
// updateRefs: sent, so the mutation is answered wherever it is still a
// preview.
const updateRefsPreview = "application/vnd.github.update-refs-preview+json"

// MoveBranchFrom moves branch (of the repository whose GraphQL id is
// repoNode) from the commit from to sha in one compare-and-swap
// (updateRefs with beforeOid), never forced: a branch no longer at from,
// or a sha that does not follow it, is a Refusal and nothing moves.
func (c *Client) MoveBranchFrom(ctx context.Context, repoNode, branch, from, sha string) error {
	if c.dryRun {
		c.log.Info("dry-run: would move a branch", "branch", branch, "from", from, "sha", sha)
		return dryRunRefusal
	}
	const q = `mutation($repo: ID!, $name: GitRefname!, $before: GitObjectID!, $after: GitObjectID!) {
  updateRefs(input: {repositoryId: $repo, refUpdates: [{name: $name, beforeOid: $before, afterOid: $after, force: false}]}) { clientMutationId }
}`
	return c.graphql(ctx, fmt.Sprintf("moving the branch %s from %s to %s", branch, mdtext.ShortSHA(from), mdtext.ShortSHA(sha)), q,
		map[string]any{"repo": repoNode, "name": "refs/heads/" + branch, "before": from, "after": sha}, nil, updateRefsPreview)
}

// BranchesWithPrefix lists the branches whose names start with prefix,
// and the commit each points to (GET git/matching-refs/heads/{prefix}, as
// GitHub lists them: the endpoint has no pages).
func (c *Client) BranchesWithPrefix(ctx context.Context, repo, prefix string) (map[string]string, error) {
	req, err := c.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/git/matching-refs/heads/%s", repo, escapedBranch(prefix)), nil)
	if err != nil {
		return nil, err
	}
	var refs []struct {
		Ref    string `json:"ref"`
		Object struct {
			SHA string `json:"sha"`
		} `json:"object"`
	}
	resp, err := c.gh.Do(ctx, req, &refs)
	if err := wrap("listing the branches "+prefix+"*", resp, err); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range refs {
		if name, ok := strings.CutPrefix(r.Ref, "refs/heads/"); ok {
			out[name] = r.Object.SHA
		}
	}
	return out, nil
}

// escapedBranch is a branch's name with each part escaped for a path.
func escapedBranch(branch string) string {
	parts := strings.Split(branch, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// CreateBranch makes a branch at sha (POST git/refs); a name taken is a
// Refusal.
func (c *Client) CreateBranch(ctx context.Context, repo, branch, sha string) error {
	if c.dryRun {
		return dryRunRefusal
	}
	req, err := c.gh.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/git/refs", repo), map[string]string{"ref": "refs/heads/" + branch, "sha": sha})
	if err != nil {
		return err
	}
	resp, err := c.gh.Do(ctx, req, nil)
	return refusal("making the branch "+branch, resp, err)
}

// DeleteBranch deletes a branch; one already gone is no error.
func (c *Client) DeleteBranch(ctx context.Context, repo, branch string) error {
	if c.dryRun {
		return dryRunRefusal
	}
	req, err := c.gh.NewRequest(http.MethodDelete, fmt.Sprintf("repos/%s/git/refs/heads/%s", repo, escapedBranch(branch)), nil)
	if err != nil {
		return err
	}
	resp, err := c.gh.Do(ctx, req, nil)
	var er *github.ErrorResponse
	if resp != nil && resp.StatusCode == http.StatusUnprocessableEntity && errors.As(err, &er) && strings.Contains(er.Message, "Reference does not exist") {
		return nil // gone already
	}
	return refusal("deleting the branch "+branch, resp, err)
}

// zeroOid is the object id updateRefs takes for "no ref": as afterOid, the
// ref is deleted.
const zeroOid = "0000000000000000000000000000000000000000"

// DeleteBranchAt deletes branch (of the repository whose GraphQL id is
// repoNode) only while it points at at, in one compare-and-swap (updateRefs
// with beforeOid and a zero afterOid): a push landing between the read of
// the branch and its deletion is never deleted with it. GitHub answers a
// branch no longer at at with an untyped error, which says nothing of
// whether the branch is gone: the caller reads the branch again.
func (c *Client) DeleteBranchAt(ctx context.Context, repoNode, branch, at string) error {
	if c.dryRun {
		c.log.Info("dry-run: would delete a branch", "branch", branch, "at", at)
		return dryRunRefusal
	}
	const q = `mutation($repo: ID!, $name: GitRefname!, $before: GitObjectID!, $after: GitObjectID!) {
  updateRefs(input: {repositoryId: $repo, refUpdates: [{name: $name, beforeOid: $before, afterOid: $after, force: false}]}) { clientMutationId }
}`
	return c.graphql(ctx, fmt.Sprintf("deleting the branch %s at %s", branch, mdtext.ShortSHA(at)), q,
		map[string]any{"repo": repoNode, "name": "refs/heads/" + branch, "before": at, "after": zeroOid}, nil, updateRefsPreview)
}

// MergeInto merges head into the branch base with GitHub's own merge
// (POST /merges) and returns the merge commit; a conflict (409) is a
// Refusal.
func (c *Client) MergeInto(ctx context.Context, repo, base, head, message string) (string, error) {
	if c.dryRun {
		return "", dryRunRefusal
	}
	o, r := split(repo)
	cm, resp, err := c.gh.Repositories.Merge(ctx, o, r, &github.RepositoryMergeRequest{Base: github.String(base), Head: github.String(head),
		CommitMessage: github.String(message)})
	if err := refusal(fmt.Sprintf("merging %s into %s", mdtext.ShortSHA(head), base), resp, err); err != nil {
		return "", err
	}
	if cm.GetSHA() == "" {
		return "", &Refusal{Status: resp.StatusCode, Message: "nothing to merge"}
	}
	return cm.GetSHA(), nil
}
