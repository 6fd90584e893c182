package githubtest

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The fake's Git database: the content of the commits a test gives it
// (GitCommit), and what the Git database API makes (blobs, trees, commits,
// a branch moved), as GitHub answers them. A commit the test gave no
// content has none here: the rest of the fake knows it by name alone.

// gitEntry is a file in a tree: its mode and its blob.
type gitEntry struct{ Mode, SHA string }

type gitObject struct {
	tree    string
	parents []string
	message string
	signed  bool // made through the API with no author given: GitHub signs it
	byApp   bool // and names the App's bot its committer (CommitAsTheApp), not itself
}

type gitStore struct {
	blobs   map[string]string
	trees   map[string]map[string]gitEntry
	commits map[string]gitObject
}

func (repo *Repo) gitDB() *gitStore {
	if repo.git == nil {
		repo.git = &gitStore{blobs: map[string]string{}, trees: map[string]map[string]gitEntry{}, commits: map[string]gitObject{}}
	}
	return repo.git
}

func blobSHA(content string) string {
	sum := sha1.Sum(fmt.Appendf(nil, "blob %d\x00%s", len(content), content))
	return hex.EncodeToString(sum[:])
}

// putTree stores a tree and returns its name: a sum of its sorted entries.
func (g *gitStore) putTree(files map[string]gitEntry) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "%s %s %s\n", files[p].Mode, p, files[p].SHA)
	}
	sum := sha1.Sum([]byte("tree\x00" + b.String()))
	sha := hex.EncodeToString(sum[:])
	g.trees[sha] = files
	return sha
}

// GitCommit gives commit sha of repo its content: its parents and its
// files (path to content, mode 100644), as the Git database reads them.
func (f *Fake) GitCommit(repo, sha string, parents []string, files map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.repos[strings.ToLower(repo)].gitDB()
	entries := map[string]gitEntry{}
	for p, c := range files {
		s := blobSHA(c)
		g.blobs[s] = c
		entries[p] = gitEntry{Mode: "100644", SHA: s}
	}
	g.commits[sha] = gitObject{tree: g.putTree(entries), parents: parents}
}

// SetCommitMessage gives a commit of the Git database its message (and
// makes it GitHub's: signed, as one made through the API).
func (f *Fake) SetCommitMessage(repo, sha, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.repos[strings.ToLower(repo)].gitDB()
	c := g.commits[sha]
	c.message, c.signed = message, true
	g.commits[sha] = c
}

// GitFiles are the files of commit sha as the Git database holds them
// (nil: a commit without content here).
func (f *Fake) GitFiles(repo, sha string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.repos[strings.ToLower(repo)].gitDB()
	c, ok := g.commits[sha]
	if !ok {
		return nil
	}
	out := map[string]string{}
	for p, e := range g.trees[c.tree] {
		out[p] = g.blobs[e.SHA]
	}
	return out
}

// GitMadeCommits are the commits the Git database API made, in no order.
func (f *Fake) GitMadeCommits(repo string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for sha, c := range f.repos[strings.ToLower(repo)].gitDB().commits {
		if c.signed {
			out = append(out, sha)
		}
	}
	sort.Strings(out)
	return out
}

// ancestors are c and its ancestors in the Git database, nearest first
// (breadth first).
func (g *gitStore) ancestors(c string) []string {
	var out []string
	seen := map[string]bool{}
	for queue := []string{c}; len(queue) > 0; queue = queue[1:] {
		x := queue[0]
		if seen[x] {
			continue
		}
		seen[x] = true
		out = append(out, x)
		queue = append(queue, g.commits[x].parents...)
	}
	return out
}

// compareGit answers base...head from the Git database when it holds both:
// the merge base, and the files head changed since it, as GitHub lists
// them (filename, status, sha).
func (g *gitStore) compareGit(base, head string) (map[string]any, bool) {
	if _, ok := g.commits[base]; !ok {
		return nil, false
	}
	if _, ok := g.commits[head]; !ok {
		return nil, false
	}
	onBase := map[string]bool{}
	for _, c := range g.ancestors(base) {
		onBase[c] = true
	}
	mergeBase, ahead := "", 0
	for i, c := range g.ancestors(head) {
		if onBase[c] {
			mergeBase, ahead = c, i
			break
		}
	}
	if mergeBase == "" {
		return map[string]any{"message": "No common ancestor"}, true
	}
	behind := 0
	for i, c := range g.ancestors(base) {
		if c == mergeBase {
			behind = i
			break
		}
	}
	status := "diverged"
	switch {
	case ahead == 0 && behind == 0:
		status = "identical"
	case behind == 0:
		status = "ahead"
	case ahead == 0:
		status = "behind"
	}
	from, to := g.trees[g.commits[mergeBase].tree], g.trees[g.commits[head].tree]
	var files []map[string]any
	for p, e := range to {
		old, had := from[p]
		switch {
		case !had:
			files = append(files, map[string]any{"filename": p, "status": "added", "sha": e.SHA})
		case old != e:
			files = append(files, map[string]any{"filename": p, "status": "modified", "sha": e.SHA})
		}
	}
	for p, e := range from {
		if _, ok := to[p]; !ok {
			files = append(files, map[string]any{"filename": p, "status": "removed", "sha": e.SHA})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i]["filename"].(string) < files[j]["filename"].(string) })
	return map[string]any{"status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
		"merge_base_commit": map[string]any{"sha": mergeBase}, "files": files, "commits": []any{}}, true
}

// blob is a blob's content, base64 as GitHub encodes it.
func (f *Fake) blob(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.PathValue("sha")
	content, ok := repo.gitDB().blobs[sha]
	if !ok {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, map[string]any{"sha": sha, "size": len(content), "encoding": "base64",
		"content": base64.StdEncoding.EncodeToString([]byte(content))}
}

// GitCommitModes is GitCommit with files of other modes (path to mode:
// 100755, 120000 for a symlink whose content is its target).
func (f *Fake) GitCommitModes(repo, sha string, parents []string, files map[string]string, modes map[string]string) {
	f.GitCommit(repo, sha, parents, files)
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.repos[strings.ToLower(repo)].gitDB()
	c := g.commits[sha]
	entries := map[string]gitEntry{}
	for p, e := range g.trees[c.tree] {
		if m := modes[p]; m != "" {
			e.Mode = m
		}
		entries[p] = e
	}
	c.tree = g.putTree(entries)
	g.commits[sha] = c
}

// getTree is a tree, every entry (recursive).
func (f *Fake) getTree(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	g := repo.gitDB()
	sha := r.PathValue("sha")
	t, ok := g.trees[sha]
	if !ok {
		if c, isCommit := g.commits[sha]; isCommit {
			t, ok, sha = g.trees[c.tree], true, c.tree
		}
	}
	if !ok {
		return http.StatusNotFound, notFound()
	}
	entries := []map[string]any{}
	for p, e := range t {
		entries = append(entries, map[string]any{"path": p, "mode": e.Mode, "type": "blob", "sha": e.SHA})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i]["path"].(string) < entries[j]["path"].(string) })
	return http.StatusOK, map[string]any{"sha": sha, "tree": entries, "truncated": false}
}

// createTree makes a tree from base_tree and changes: a path with content
// (a new blob), with a blob's sha, or with sha null (removed).
func (f *Fake) createTree(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		BaseTree string `json:"base_tree"`
		Tree     []struct {
			Path    string  `json:"path"`
			Mode    string  `json:"mode"`
			Type    string  `json:"type"`
			SHA     *string `json:"sha"`
			Content *string `json:"content"`
		} `json:"tree"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	g := repo.gitDB()
	files := map[string]gitEntry{}
	if in.BaseTree != "" {
		base, ok := g.trees[in.BaseTree]
		if !ok {
			return http.StatusUnprocessableEntity, map[string]string{"message": "base_tree is not a valid tree oid"}
		}
		for p, e := range base {
			files[p] = e
		}
	}
	for _, e := range in.Tree {
		switch {
		case e.Content != nil:
			s := blobSHA(*e.Content)
			g.blobs[s] = *e.Content
			files[e.Path] = gitEntry{Mode: e.Mode, SHA: s}
		case e.SHA != nil:
			if _, ok := g.blobs[*e.SHA]; !ok {
				return http.StatusUnprocessableEntity, map[string]string{"message": "tree.sha " + *e.SHA + " is not a valid blob"}
			}
			files[e.Path] = gitEntry{Mode: e.Mode, SHA: *e.SHA}
		default:
			if in.BaseTree == "" {
				return http.StatusUnprocessableEntity, map[string]string{"message": "Must supply base_tree to delete " + e.Path}
			}
			delete(files, e.Path)
		}
	}
	return http.StatusCreated, map[string]any{"sha": g.putTree(files), "truncated": false}
}

// createCommit makes a commit of a tree with parents. Without an author
// or committer given, GitHub signs it and names itself its committer.
func (f *Fake) createCommit(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		Message string          `json:"message"`
		Tree    string          `json:"tree"`
		Parents []string        `json:"parents"`
		Author  json.RawMessage `json:"author"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	g := repo.gitDB()
	if _, ok := g.trees[in.Tree]; !ok {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Tree SHA does not exist"}
	}
	for _, p := range in.Parents {
		if _, ok := g.commits[p]; !ok {
			return http.StatusUnprocessableEntity, map[string]string{"message": "Parent SHA does not exist or is not a commit object"}
		}
	}
	sum := sha1.Sum([]byte(fmt.Sprintf("commit\x00%s\x00%s\x00%s\x00%d", in.Tree, strings.Join(in.Parents, ","), in.Message, len(g.commits))))
	sha := hex.EncodeToString(sum[:])
	signed := (len(in.Author) == 0 || string(in.Author) == "null") && !repo.unsigned
	g.commits[sha] = gitObject{tree: in.Tree, parents: in.Parents, message: in.Message, signed: signed, byApp: signed && repo.appCommits}
	return http.StatusCreated, map[string]any{"sha": sha, "tree": map[string]string{"sha": in.Tree}, "message": in.Message,
		"verification": map[string]any{"verified": signed}}
}

// moveBranch moves a PR's branch to a commit the Git database made, as
// PATCH git/refs does without force: only when the branch's commit is the
// new one's first parent (a fast-forward); the PR's head is then it.
func (f *Fake) moveBranch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	branch := strings.TrimPrefix(r.PathValue("ref"), "heads/")
	return repo.moveTo(branch, in.SHA, "", in.Force)
}

// moveTo moves a PR's branch to sha as GitHub does: a commit that exists
// and, unless forced, follows the head; with before, only while the
// branch is at before (GraphQL's updateRefs).
func (repo *Repo) moveTo(branch, sha, before string, force bool) (int, any) {
	in := struct{ SHA string }{sha}
	var p *PR
	for _, x := range repo.PRs {
		if x.Branch == branch && x.HeadRepo == "" && x.State == "open" {
			p = x
		}
	}
	if p == nil {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Reference does not exist"}
	}
	g := repo.gitDB()
	c, ok := g.commits[in.SHA]
	if !ok {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Object does not exist"}
	}
	descends := false
	for _, a := range g.ancestors(in.SHA) {
		if a == p.Head() {
			descends = true
		}
	}
	if before != "" && before != p.Head() {
		return http.StatusUnprocessableEntity, map[string]string{"message": "A ref does not point at the expected value (beforeOid)"}
	}
	if !force && !descends {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Update is not a fast forward"}
	}
	// The rest of the fake knows it as a merge of its second parent into
	// the head, signed by GitHub, bringing the files that differ.
	from, to := g.trees[g.commits[p.Head()].tree], g.trees[c.tree]
	var changed []string
	for path, e := range to {
		if from[path] != e {
			changed = append(changed, path)
		}
	}
	for path := range from {
		if _, ok := to[path]; !ok {
			changed = append(changed, path)
		}
	}
	sort.Strings(changed)
	repo.chain(p.Head(), []string{in.SHA}, [][]string{changed})
	if len(c.parents) > 1 {
		repo.extraParent[in.SHA] = c.parents[1]
		repo.fromDefault[in.SHA] = c.parents[1] == repo.branchTip(p)
	}
	repo.byGitHub[in.SHA] = c.signed && !c.byApp
	repo.trees[in.SHA] = c.tree
	p.Commits = append(p.Commits, in.SHA)
	p.UpdateConflict, p.Behind = false, false
	return http.StatusOK, map[string]any{"ref": "refs/heads/" + branch, "object": map[string]string{"sha": in.SHA, "type": "commit"}}
}

// SetBranchTip points branch at sha (the base's tip a PR merges into).
func (f *Fake) SetBranchTip(repo, branch, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].BranchTips[branch] = sha
}

// CleanMerge tells the fake's merges how GitHub's three-way merge merges
// path when both sides changed it (by hunks that do not touch): content.
// A path both changed with no clean merge given conflicts (409).
func (f *Fake) CleanMerge(repo, path, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	if r.cleanMerges == nil {
		r.cleanMerges = map[string]string{}
	}
	r.cleanMerges[path] = content
}

// Branches are the repository's branches besides its PRs' (BranchTips),
// for a test to see what is left.
func (f *Fake) Branches(repo string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for b, sha := range f.repos[strings.ToLower(repo)].BranchTips {
		out[b] = sha
	}
	return out
}

// createRef makes a branch pointing at a commit of the Git database.
func (f *Fake) createRef(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct{ Ref, SHA string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	branch, ok := strings.CutPrefix(in.Ref, "refs/heads/")
	if !ok || branch == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Reference name must start with 'refs/'"}
	}
	if _, ok := repo.gitDB().commits[in.SHA]; !ok {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Object does not exist"}
	}
	if _, taken := repo.BranchTips[branch]; taken {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Reference already exists"}
	}
	repo.BranchTips[branch] = in.SHA
	return http.StatusCreated, map[string]any{"ref": in.Ref, "object": map[string]string{"sha": in.SHA, "type": "commit"}}
}

// matchingRefs lists the branches whose names start with the prefix.
func (f *Fake) matchingRefs(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	prefix, ok := strings.CutPrefix(r.PathValue("ref"), "heads/")
	if !ok {
		return http.StatusOK, []any{}
	}
	out := []map[string]any{}
	for b, sha := range repo.BranchTips {
		if strings.HasPrefix(b, prefix) {
			out = append(out, map[string]any{"ref": "refs/heads/" + b, "object": map[string]string{"sha": sha, "type": "commit"}})
		}
	}
	return http.StatusOK, out
}

// deleteRef deletes a branch that is no PR's.
func (f *Fake) deleteRef(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	branch := strings.TrimPrefix(r.PathValue("ref"), "heads/")
	if _, ok := repo.BranchTips[branch]; !ok {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Reference does not exist"}
	}
	delete(repo.BranchTips, branch)
	return http.StatusNoContent, nil
}

// mergeInto is POST /merges: head merged into the branch base, by files
// (a file one side changed is that side's; one both changed is the clean
// merge CleanMerge gave, else a conflict), the merge commit GitHub's.
func (f *Fake) mergeInto(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		Base, Head    string
		CommitMessage string `json:"commit_message"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	g := repo.gitDB()
	ours, ok := repo.BranchTips[in.Base]
	if !ok {
		return http.StatusNotFound, map[string]string{"message": "Base does not exist"}
	}
	if _, ok := g.commits[in.Head]; !ok {
		return http.StatusNotFound, map[string]string{"message": "Head does not exist"}
	}
	cmp, _ := g.compareGit(ours, in.Head)
	mb, _ := cmp["merge_base_commit"].(map[string]any)
	if mb == nil {
		return http.StatusConflict, map[string]string{"message": "Merge conflict"}
	}
	base := g.trees[g.commits[mb["sha"].(string)].tree]
	a, b := g.trees[g.commits[ours].tree], g.trees[g.commits[in.Head].tree]
	out := map[string]gitEntry{}
	paths := map[string]bool{}
	for _, t := range []map[string]gitEntry{base, a, b} {
		for p := range t {
			paths[p] = true
		}
	}
	for p := range paths {
		o, inBase := base[p]
		x, inA := a[p]
		y, inB := b[p]
		aChanged, bChanged := inA != inBase || x != o, inB != inBase || y != o
		switch {
		case !bChanged || (inA == inB && x == y):
			if inA {
				out[p] = x
			}
		case !aChanged:
			if inB {
				out[p] = y
			}
		default:
			content, clean := repo.cleanMerges[p]
			if !clean {
				return http.StatusConflict, map[string]string{"message": "Merge conflict"}
			}
			s := blobSHA(content)
			g.blobs[s] = content
			out[p] = gitEntry{Mode: "100644", SHA: s}
		}
	}
	tree := g.putTree(out)
	sum := sha1.Sum([]byte("merges\x00" + ours + "\x00" + in.Head + "\x00" + in.CommitMessage))
	sha := hex.EncodeToString(sum[:])
	g.commits[sha] = gitObject{tree: tree, parents: []string{ours, in.Head}, message: in.CommitMessage, signed: true}
	repo.BranchTips[in.Base] = sha
	return http.StatusCreated, map[string]any{"sha": sha, "commit": map[string]any{"tree": map[string]string{"sha": tree}, "message": in.CommitMessage}}
}
