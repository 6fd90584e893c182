package githubtest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
)

// GitHubActionsAppID is the id of GitHub Actions' app, whose check runs
// are a workflow's jobs.
const GitHubActionsAppID = 15368

// CheckRun is a check run on a commit (a workflow's job, an app's check).
type CheckRun struct {
	Repo, SHA, Name string
	ByApp           bool   // made by opsbot's App (through the API), not by a workflow
	Status          string // queued, in_progress, completed
	Conclusion      string // success, failure, cancelled, skipped, neutral, timed_out, action_required
}

// CheckSuite is a GitHub Actions check suite on a commit (a workflow run,
// which exists before its jobs' check runs).
type CheckSuite struct {
	Repo, SHA  string
	Workflow   string // which workflow run it is (the fake's key)
	Status     string // queued, in_progress, completed
	Conclusion string
}

// Merge is a merge the API was asked for and made.
type Merge struct {
	Repo   string
	PR     int
	SHA    string // the head it was asked to merge (the request's sha)
	Method string
	Commit string // the merge commit made
}

// SetCheckRun adds a check run to a commit, or changes the one of that name.
func (f *Fake) SetCheckRun(repo, sha, name, status, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.checkRuns {
		c := &f.checkRuns[i]
		if strings.EqualFold(c.Repo, repo) && c.SHA == sha && c.Name == name {
			c.Status, c.Conclusion = status, conclusion
			return
		}
	}
	f.checkRuns = append(f.checkRuns, CheckRun{Repo: repo, SHA: sha, Name: name, Status: status, Conclusion: conclusion})
}

// SetStatus sets a commit status as another integration would.
func (f *Fake) SetStatus(repo, sha, context, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, Status{Repo: repo, SHA: sha, State: state, Context: context})
}

// SetPR changes a PR's state under the fake's lock (Behind, ReviewRequired,
// ...).
func (f *Fake) SetPR(repo string, number int, change func(p *PR)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.repos[strings.ToLower(repo)].PRs[number])
}

// Merges are the merges made through the API, oldest first.
func (f *Fake) Merges() []Merge {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Merge(nil), f.merges...)
}

// UpdateCommit is the commit update-branch adds to PR number: a merge of
// the default branch into its head.
func UpdateCommit(number int, n int) string { return fmt.Sprintf("d0d0%04d%032x", number, n) }

func unprocessable(msg string) (int, any) {
	return http.StatusUnprocessableEntity, map[string]string{"message": msg,
		"documentation_url": "https://docs.github.com/rest/pulls/pulls#update-a-pull-request-branch"}
}

// updateBranch merges the default branch into a PR's head as GitHub's
// update-branch does: refused when expected_head_sha is not the head, when
// the branch is not behind, or on a conflict; otherwise the merge commit is
// the PR's new head (files the default branch brought, as MergeDefault).
func (f *Fake) updateBranch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	var in struct {
		ExpectedHeadSHA string `json:"expected_head_sha"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil && err.Error() != "EOF" {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	switch {
	case p.State != "open":
		return unprocessable("Pull request is closed.")
	case in.ExpectedHeadSHA != "" && in.ExpectedHeadSHA != p.Head():
		return unprocessable("expected head sha didn't match current head ref.")
	case p.UpdateConflict:
		return unprocessable("merge conflict between base and head")
	case !p.Behind:
		return unprocessable("There are no new commits on the base branch.")
	}
	commit := UpdateCommit(n, len(p.Commits))
	repo.chain(p.Head(), []string{commit}, [][]string{p.UpdateFiles})
	repo.fromDefault[commit] = true
	repo.baseParent[commit] = repo.branchTip(p)
	p.Commits = append(p.Commits, commit)
	p.Behind = false
	return http.StatusAccepted, map[string]string{"message": "Updating pull request branch.",
		"url": fmt.Sprintf("https://github.com/%s/%s/pull/%d", repo.Owner, repo.Name, n)}
}

// mergePull merges a PR as GitHub's merge endpoint does: 409 when sha is
// not the head, 405 when it cannot be merged (closed, a conflict, branch
// protection wanting a review or an update), else the merge.
func (f *Fake) mergePull(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	var in struct {
		SHA         string `json:"sha"`
		MergeMethod string `json:"merge_method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	switch in.MergeMethod {
	case "", "merge", "squash", "rebase":
	default:
		return unprocessable("Invalid request.\n\n" + strconv.Quote(in.MergeMethod) + " is not a member of [\"merge\", \"squash\", \"rebase\"].")
	}
	notMergeable := func(msg string) (int, any) {
		return http.StatusMethodNotAllowed, map[string]string{"message": msg}
	}
	switch {
	case p.State != "open":
		return notMergeable("Pull Request is not mergeable")
	case in.SHA != "" && in.SHA != p.Head():
		return http.StatusConflict, map[string]string{"message": "Head branch was modified. Review and try the merge again."}
	case p.UpdateConflict:
		return notMergeable("Pull Request is not mergeable")
	case p.ReviewRequired:
		return notMergeable("At least 1 approving review is required by reviewers with write access.")
	}
	if repo.queueRequired(p) {
		return notMergeable("Repository rule violations found\n\nChanges must be made through the merge queue")
	}
	commit := fmt.Sprintf("e0e0%04d%032x", n, len(f.merges))
	p.State, p.Merged, p.MergeSHA = "closed", true, commit
	p.ClosedAt, p.UpdatedAt = f.now(), f.now()
	p.States = append(p.States, StateEvent{Event: "closed", At: f.now()})
	method := in.MergeMethod
	if method == "" {
		method = "merge"
	}
	f.merges = append(f.merges, Merge{Repo: repo.Owner + "/" + repo.Name, PR: n, SHA: p.Head(), Method: method, Commit: commit})
	return http.StatusOK, map[string]any{"sha": commit, "merged": true, "message": "Pull Request successfully merged"}
}

func (f *Fake) listCheckRuns(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	out := []*github.CheckRun{}
	for i, c := range f.checkRuns {
		if strings.EqualFold(c.Repo, full) && c.SHA == r.PathValue("ref") {
			app := int64(GitHubActionsAppID)
			if c.ByApp {
				app = AppID
			}
			cr := &github.CheckRun{ID: github.Int64(int64(7000 + i)), Name: github.String(c.Name), Status: github.String(c.Status),
				HeadSHA: github.String(c.SHA), App: &github.App{ID: github.Int64(app)}}
			if c.Conclusion != "" {
				cr.Conclusion = github.String(c.Conclusion)
			}
			out = append(out, cr)
		}
	}
	page := paginate(w, r, len(out))
	return http.StatusOK, map[string]any{"total_count": len(out), "check_runs": out[page.from:page.to]}
}

// combinedStatus is the newest status of each context on a commit, and
// their combined state as GitHub combines them.
func (f *Fake) combinedStatus(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	seen := map[string]bool{}
	out := []*github.RepoStatus{}
	state := "success"
	for i := len(f.statuses) - 1; i >= 0; i-- {
		st := f.statuses[i]
		if !strings.EqualFold(st.Repo, full) || st.SHA != r.PathValue("ref") || seen[st.Context] {
			continue
		}
		seen[st.Context] = true
		out = append(out, &github.RepoStatus{State: github.String(st.State), Context: github.String(st.Context),
			Description: github.String(st.Description), TargetURL: github.String(st.TargetURL)})
		switch {
		case st.State == "error" || st.State == "failure":
			state = "failure"
		case st.State == "pending" && state == "success":
			state = "pending"
		}
	}
	if len(out) == 0 {
		state = "pending"
	}
	return http.StatusOK, map[string]any{"state": state, "sha": r.PathValue("ref"), "total_count": len(out), "statuses": out}
}

// SetCheckSuite adds a GitHub Actions check suite (the run of workflow)
// to a commit, or changes the one of that workflow.
func (f *Fake) SetCheckSuite(repo, sha, workflow, status, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.checkSuites {
		c := &f.checkSuites[i]
		if strings.EqualFold(c.Repo, repo) && c.SHA == sha && c.Workflow == workflow {
			c.Status, c.Conclusion = status, conclusion
			return
		}
	}
	f.checkSuites = append(f.checkSuites, CheckSuite{Repo: repo, SHA: sha, Workflow: workflow, Status: status, Conclusion: conclusion})
}

func (f *Fake) listCheckSuites(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	full := repo.Owner + "/" + repo.Name
	out := []*github.CheckSuite{}
	for i, c := range f.checkSuites {
		if strings.EqualFold(c.Repo, full) && c.SHA == r.PathValue("ref") {
			cs := &github.CheckSuite{ID: github.Int64(int64(8000 + i)), Status: github.String(c.Status), HeadSHA: github.String(c.SHA),
				App: &github.App{Slug: github.String("github-actions")}}
			if c.Conclusion != "" {
				cs.Conclusion = github.String(c.Conclusion)
			}
			out = append(out, cs)
		}
	}
	return http.StatusOK, map[string]any{"total_count": len(out), "check_suites": out}
}

// gitCommit is a commit's parents: the one it was pushed on, and for a
// merge update-branch made, the base's tip second; update-branch's merges
// are signed and committed by GitHub.
func (f *Fake) gitCommit(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.PathValue("sha")
	for _, p := range repo.PRs {
		if p.State == "open" && p.MergeSHA == "" && sha == repo.testMerge(p) {
			return http.StatusOK, map[string]any{"sha": sha, "parents": []map[string]string{{"sha": repo.branchTip(p)}, {"sha": p.Head()}},
				"tree":      map[string]string{"sha": MergeTree(repo.branchTip(p), p.Head())},
				"committer": map[string]string{"name": "GitHub", "email": "noreply@github.com"}, "verification": map[string]any{"verified": false}}
		}
	}
	parent, ok := repo.parents[sha]
	if gc, inGit := repo.gitDB().commits[sha]; inGit && !ok {
		// Known by its content alone (a base's tip a test gave content).
		parents := []map[string]string{}
		for _, p := range gc.parents {
			parents = append(parents, map[string]string{"sha": p})
		}
		committer := map[string]string{"name": "A Contributor", "email": "contributor@example.com"}
		switch {
		case gc.byApp:
			committer = map[string]string{"name": "opsbot[bot]", "email": fmt.Sprintf("%d+opsbot[bot]@users.noreply.github.com", AppID)}
		case gc.signed:
			committer = map[string]string{"name": "GitHub", "email": "noreply@github.com"}
		}
		return http.StatusOK, map[string]any{"sha": sha, "parents": parents, "tree": map[string]string{"sha": gc.tree}, "committer": committer,
			"verification": map[string]any{"verified": gc.signed}, "message": gc.message}
	}
	if !ok {
		return http.StatusNotFound, notFound()
	}
	parents := []map[string]string{{"sha": parent}}
	committer := map[string]string{"name": "A Contributor", "email": "contributor@example.com"}
	verification := map[string]any{"verified": false, "reason": "unsigned"}
	tree := repo.treeFor(sha)
	if b := repo.baseParent[sha]; b != "" {
		parents = append(parents, map[string]string{"sha": b})
		committer = map[string]string{"name": "GitHub", "email": "noreply@github.com"}
		verification = map[string]any{"verified": true, "reason": "valid"}
	}
	if extra := repo.extraParent[sha]; extra != "" {
		parents = append(parents, map[string]string{"sha": extra})
	}
	if repo.byGitHub[sha] {
		committer = map[string]string{"name": "GitHub", "email": "noreply@github.com"}
		verification = map[string]any{"verified": true, "reason": "valid"}
	}
	if gc, ok := repo.gitDB().commits[sha]; ok && gc.byApp {
		committer = map[string]string{"name": "opsbot[bot]", "email": fmt.Sprintf("%d+opsbot[bot]@users.noreply.github.com", AppID)}
		verification = map[string]any{"verified": true, "reason": "valid"}
	}
	return http.StatusOK, map[string]any{"sha": sha, "parents": parents, "tree": map[string]string{"sha": tree}, "committer": committer,
		"verification": verification}
}

// treeFor is the tree of a commit of the repository's chains: one set for
// it (a crafted merge's), its content's (a commit a test gave content),
// update-branch's merge's, or its own.
func (repo *Repo) treeFor(sha string) string {
	if t := repo.trees[sha]; t != "" {
		return t
	}
	if gc, inGit := repo.gitDB().commits[sha]; inGit {
		return gc.tree
	}
	if b := repo.baseParent[sha]; b != "" {
		return MergeTree(repo.parents[sha], b)
	}
	return treeOf(sha)
}

// treeOf is the tree of an ordinary commit: its own.
func treeOf(commit string) string {
	sum := sha1.Sum([]byte("tree\x00" + commit))
	return hex.EncodeToString(sum[:])
}

// MergeTree is the tree of GitHub's merge of two commits: the same in
// either order, as a merge without conflicts is (the PR's test merge, base
// first, and update-branch's, head first, have one tree).
func MergeTree(a, b string) string {
	if b < a {
		a, b = b, a
	}
	sum := sha1.Sum([]byte("merge-tree\x00" + a + "\x00" + b))
	return hex.EncodeToString(sum[:])
}

// CraftMerge pushes a merge commit the PR's author made with the Git
// database API and a GitHub App's token (a workflow's GITHUB_TOKEN): its
// parents are the PR's head and second, GitHub signs it and names itself
// its committer, and its tree is tree ("": the tree of GitHub's own merge
// of the two, the same content).
func (f *Fake) CraftMerge(repo string, number int, commit, second, tree string, files ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	if tree == "" {
		tree = MergeTree(p.Head(), second)
	}
	r.chain(p.Head(), []string{commit}, [][]string{files})
	r.extraParent[commit] = second
	r.byGitHub[commit] = true
	r.trees[commit] = tree
	p.Commits = append(p.Commits, commit)
	if second == r.branchTip(p) {
		p.Behind = false // it merges the base's tip, as an update does
	}
}

// branch is a branch and the commit it points to: a BranchTips entry, or
// the base of a PR that merges into it.
func (f *Fake) branch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	name := r.PathValue("branch")
	tip := repo.BranchTips[name]
	for _, p := range repo.PRs {
		if tip == "" && p.Branch == name && p.HeadRepo == "" && p.State == "open" {
			tip = p.Head() // a PR's own branch
		}
	}
	if tip == "" {
		for _, p := range repo.PRs {
			base := p.BaseRef
			if base == "" {
				base = repo.DefaultBranch
			}
			if base == name {
				tip = p.BaseSHA
				break
			}
		}
	}
	if tip == "" {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, map[string]any{"name": name, "commit": map[string]any{"sha": tip}}
}

// branchTip is the tip of the branch p merges into.
func (repo *Repo) branchTip(p *PR) string {
	base := p.BaseRef
	if base == "" {
		base = repo.DefaultBranch
	}
	if tip := repo.BranchTips[base]; tip != "" {
		return tip
	}
	return p.BaseSHA
}

// PushMerge pushes a merge commit the PR's author made themselves (not
// GitHub), with parents the PR's head and second.
func (f *Fake) PushMerge(repo string, number int, commit, second string, files ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.Head(), []string{commit}, [][]string{files})
	r.extraParent[commit] = second
	p.Commits = append(p.Commits, commit)
}

// CreatedCheckRun is a check run created through the API (an App's).
type CreatedCheckRun struct {
	ID                                                      int64
	Repo, SHA, Name, Conclusion, Title, Summary, ExternalID string
	Actions                                                 []string // their identifiers
	Labels                                                  []string
}

// CreatedCheckRuns are the check runs created through the API, oldest
// first.
func (f *Fake) CreatedCheckRuns() []CreatedCheckRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]CreatedCheckRun(nil), f.created...)
}

func (f *Fake) createCheckRun(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in github.CreateCheckRunOptions
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" || in.HeadSHA == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	if len(in.Actions) > 3 {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Only 3 actions may be given"}
	}
	c := CreatedCheckRun{ID: int64(9000 + len(f.created) + 1), Repo: repo.Owner + "/" + repo.Name, SHA: in.HeadSHA, Name: in.Name,
		Conclusion: in.GetConclusion(), ExternalID: in.GetExternalID()}
	if in.Output != nil {
		c.Title, c.Summary = in.Output.GetTitle(), in.Output.GetSummary()
	}
	for _, a := range in.Actions {
		if len(a.Label) > 20 || len(a.Description) > 40 || len(a.Identifier) > 20 {
			return http.StatusUnprocessableEntity, map[string]string{"message": "action label, description or identifier too long"}
		}
		c.Actions, c.Labels = append(c.Actions, a.Identifier), append(c.Labels, a.Label)
	}
	f.created = append(f.created, c)
	f.checkRuns = append(f.checkRuns, CheckRun{Repo: c.Repo, SHA: c.SHA, Name: c.Name, Status: "completed", Conclusion: c.Conclusion, ByApp: true})
	return http.StatusCreated, map[string]any{"id": c.ID, "name": c.Name, "head_sha": c.SHA}
}
