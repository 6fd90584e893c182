package githubtest

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"
)

func (f *Fake) prJSON(repo *Repo, p *PR) *github.PullRequest {
	full := repo.Owner + "/" + repo.Name
	headID, headName, headNode := p.HeadRepoID, p.HeadRepo, "R_fork_"+p.HeadRepo
	if headID == 0 {
		headID, headName, headNode = repo.ID, full, repoNodeID(repo)
	}
	baseRef := p.BaseRef
	if baseRef == "" {
		baseRef = repo.DefaultBranch
	}
	out := &github.PullRequest{
		Number: github.Int(p.Number), NodeID: github.String(nodeID(repo, p.Number)), Title: github.String(p.Title), State: github.String(p.State),
		Merged: github.Bool(p.Merged), Commits: github.Int(len(p.Commits)),
		User:    f.users[strings.ToLower(p.Author)],
		HTMLURL: github.String(fmt.Sprintf("https://github.com/%s/pull/%d", full, p.Number)),
		Head: &github.PullRequestBranch{SHA: github.String(p.Head()), Ref: github.String(p.Branch),
			Label: github.String(strings.SplitN(headName, "/", 2)[0] + ":" + p.Branch),
			Repo:  &github.Repository{ID: github.Int64(headID), FullName: github.String(headName), NodeID: github.String(headNode)}},
		Base: &github.PullRequestBranch{SHA: github.String(p.BaseSHA), Ref: github.String(baseRef),
			Repo: &github.Repository{ID: github.Int64(repo.ID), FullName: github.String(full), DefaultBranch: github.String(repo.DefaultBranch),
				NodeID: github.String(repoNodeID(repo))}},
	}
	if p.MergeSHA != "" {
		out.MergeCommitSHA = github.String(p.MergeSHA)
	} else if p.State == "open" && !p.MergeableUnknown && !p.UpdateConflict {
		out.MergeCommitSHA = github.String(repo.testMerge(p))
	}
	if !p.ClosedAt.IsZero() {
		out.ClosedAt = &github.Timestamp{Time: p.ClosedAt}
		if p.Merged {
			out.MergedAt = &github.Timestamp{Time: p.ClosedAt}
		}
	}
	if !p.UpdatedAt.IsZero() {
		out.UpdatedAt = &github.Timestamp{Time: p.UpdatedAt}
	}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, &github.Label{Name: github.String(l)})
	}
	out.Draft = github.Bool(p.Draft)
	if p.State == "open" {
		state := "clean"
		switch {
		case p.MergeableUnknown:
			state = "unknown"
		case p.Draft:
			state = "draft"
		case p.UpdateConflict:
			state = "dirty"
		case p.Behind:
			state = "behind"
		case p.ReviewRequired:
			state = "blocked"
		}
		out.MergeableState = github.String(state)
		if !p.MergeableUnknown {
			out.Mergeable = github.Bool(state != "dirty")
		}
	}
	return out
}

func (f *Fake) repository(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	return http.StatusOK, &github.Repository{ID: github.Int64(repo.ID), Name: github.String(repo.Name),
		FullName: github.String(repo.Owner + "/" + repo.Name), DefaultBranch: github.String(repo.DefaultBranch)}
}

func (f *Fake) pull(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.prJSON(repo, p)
}

func (f *Fake) pullCommits(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	p := repo.PRs[n]
	if p == nil {
		return http.StatusNotFound, notFound()
	}
	commits := p.Commits
	if len(commits) > 250 { // GitHub lists at most 250 commits of a PR
		commits = commits[:250]
	}
	page := paginate(w, r, len(commits))
	out := []*github.RepositoryCommit{}
	for _, c := range commits[page.from:page.to] {
		out = append(out, &github.RepositoryCommit{SHA: github.String(c)})
	}
	return http.StatusOK, out
}

// ancestors returns head's chain, head first.
func (repo *Repo) ancestors(head string) []string {
	var out []string
	seen := map[string]bool{}
	for c := head; c != "" && !seen[c]; c = repo.parents[c] {
		seen[c] = true
		out = append(out, c)
	}
	return out
}

func (f *Fake) compare(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	base, head, ok := strings.Cut(r.PathValue("basehead"), "...")
	if !ok {
		return http.StatusNotFound, notFound()
	}
	if out, ok := repo.gitDB().compareGit(base, head); ok {
		if _, found := out["message"]; found {
			return http.StatusNotFound, out
		}
		return http.StatusOK, out
	}
	known := func(c string) bool { _, ok := repo.parents[c]; return ok || isBase(repo, c) }
	onBase := map[string]bool{} // the commits of base: a commit's ancestors, or the default branch's
	if base == repo.DefaultBranch {
		// The default branch holds every PR's base and merge commit.
		for _, p := range repo.PRs {
			for _, c := range append(repo.ancestors(p.BaseSHA), repo.ancestors(p.MergeSHA)...) {
				onBase[c] = true
			}
		}
	} else if known(base) {
		for _, c := range repo.ancestors(base) {
			onBase[c] = true
		}
	}
	if len(onBase) == 0 || !known(head) {
		return http.StatusNotFound, notFound()
	}
	// Three dots: the changes on head since its merge base with base.
	status, ahead, behind := "", 0, 0
	var between []string
	hc := repo.ancestors(head)
	for i, c := range hc {
		if onBase[c] {
			ahead, between = i, hc[:i]
			switch {
			case c == base && i == 0:
				status = "identical"
			case c == base || base == repo.DefaultBranch:
				status = "ahead"
			case i == 0:
				status = "behind"
				for j, b := range repo.ancestors(base) {
					if b == head {
						behind = j
					}
				}
			default:
				status = "diverged"
			}
			break
		}
	}
	if status == "" {
		return http.StatusNotFound, map[string]string{"message": "No common ancestor between " + base + " and " + head + "."}
	}
	files := map[string]bool{}
	for _, c := range between {
		if base == repo.DefaultBranch && repo.fromDefault[c] {
			continue // the default branch's own changes, merged in: the same on both sides
		}
		for _, fl := range repo.files[c] {
			files[fl] = true
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &github.CommitsComparison{Status: github.String(status), AheadBy: github.Int(ahead), BehindBy: github.Int(behind),
		TotalCommits: github.Int(ahead)}
	for i := len(between) - 1; i >= 0; i-- {
		out.Commits = append(out.Commits, &github.RepositoryCommit{SHA: github.String(between[i])})
	}
	for _, n := range names {
		out.Files = append(out.Files, &github.CommitFile{Filename: github.String(n), Status: github.String("modified")})
	}
	return http.StatusOK, out
}

func isBase(repo *Repo, c string) bool {
	for _, p := range repo.PRs {
		if p.BaseSHA == c || p.MergeSHA == c {
			return true
		}
	}
	return false
}

func (f *Fake) commitPulls(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.PathValue("sha")
	out := []*github.PullRequest{}
	nums := make([]int, 0, len(repo.PRs))
	for n := range repo.PRs {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		p := repo.PRs[n]
		hit := p.MergeSHA == sha
		for _, c := range p.Commits {
			hit = hit || c == sha
		}
		if hit {
			j := f.prJSON(repo, p)
			j.Merged = nil // the short form GitHub lists a commit's PRs in: merged_at, no merged flag
			out = append(out, j)
		}
	}
	return http.StatusOK, out
}

func (f *Fake) listPulls(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	want := r.URL.Query().Get("state")
	if want == "" {
		want = "open"
	}
	head := r.URL.Query().Get("head") // OWNER:BRANCH
	nums := make([]int, 0, len(repo.PRs))
	for n, p := range repo.PRs {
		if (want == "all" || p.State == want) && (head == "" || strings.EqualFold(f.prJSON(repo, p).GetHead().GetLabel(), head)) {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	if r.URL.Query().Get("sort") == "updated" {
		desc := r.URL.Query().Get("direction") != "asc"
		sort.SliceStable(nums, func(i, j int) bool {
			a, b := repo.PRs[nums[i]].UpdatedAt, repo.PRs[nums[j]].UpdatedAt
			if desc {
				return a.After(b)
			}
			return a.Before(b)
		})
	}
	page := paginate(w, r, len(nums))
	out := []*github.PullRequest{}
	for _, n := range nums[page.from:page.to] {
		j := f.prJSON(repo, repo.PRs[n])
		j.Merged = nil // the short form GitHub lists PRs in: merged_at, no merged flag
		out = append(out, j)
	}
	return http.StatusOK, out
}
