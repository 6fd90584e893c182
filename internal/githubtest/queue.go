package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The merge queue, as GitHub's rules and GraphQL API show it: a branch's
// rules (GET rules/branches/{b}), a PR added to and taken out of its base's
// queue (enqueuePullRequest, dequeuePullRequest), its entry read
// (pullRequest.mergeQueueEntry), and the queue's groups made and merged by
// the test (MergeGroup, MergeByQueue, LeaveQueue).

// repoNodeID is a repository's GraphQL id.
func repoNodeID(repo *Repo) string { return fmt.Sprintf("R_%s_%s", repo.Owner, repo.Name) }

// BranchDeletions is how many branches updateRefs deleted.
func (f *Fake) BranchDeletions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deletions
}

// BranchMoves is how many branch moves (updateRefs) GitHub made.
func (f *Fake) BranchMoves() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.moves
}

// nodeID is a PR's GraphQL id.
func nodeID(repo *Repo, n int) string { return fmt.Sprintf("PR_%s_%s_%d", repo.Owner, repo.Name, n) }

// SetBranchRules sets the types of the rules that apply to a branch
// (merge_queue, required_signatures, ...).
func (f *Fake) SetBranchRules(repo, branch string, rules ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	if r.rules == nil {
		r.rules = map[string][]string{}
	}
	r.rules[branch] = rules
}

// SignNothing makes GitHub sign none of the commits made through the
// API (as for an account whose commits it does not sign).
func (f *Fake) SignNothing(repo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].unsigned = true
}

// CommitAsTheApp makes the commits made through the API with no author
// given name the App's bot (opsbot[bot]) their author and committer,
// signed, instead of GitHub: GitHub documents that it signs them as the
// App, not whom it records.
func (f *Fake) CommitAsTheApp(repo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].appCommits = true
}

// SetClassicQueue makes a branch's classic protection require the merge
// queue: GitHub then refuses a merge through the API, but the branch's
// rules (rulesets only) do not list it.
func (f *Fake) SetClassicQueue(repo, branch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	if r.classicQueue == nil {
		r.classicQueue = map[string]bool{}
	}
	r.classicQueue[branch] = true
}

func (repo *Repo) queueRequired(p *PR) bool {
	base := p.BaseRef
	if base == "" {
		base = repo.DefaultBranch
	}
	return slices.Contains(repo.rules[base], "merge_queue") || repo.classicQueue[base]
}

func (f *Fake) branchRules(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	out := []map[string]any{}
	for _, t := range repo.rules[r.PathValue("branch")] {
		out = append(out, map[string]any{"type": t, "ruleset_source_type": "Repository", "ruleset_id": 42})
	}
	return http.StatusOK, out
}

// Queued is PR n's merge queue entry's state ("" when not queued).
func (f *Fake) Queued(repo string, n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[strings.ToLower(repo)].queue[n]
}

// MergeGroup makes the queue's group commit for PR n on the base's tip
// (its only parent, as the queue's are): with the PR's head's files when
// same, else other files (the base moved under the PR). It returns the
// group's branch, gh-readonly-queue/<base>/pr-<n>-<base tip>.
func (f *Fake) MergeGroup(repo string, n int, group string, same bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[n]
	tip := r.branchTip(p)
	r.parents[group] = tip
	if same {
		r.trees[group] = r.treeFor(p.Head())
	}
	if r.queue == nil {
		r.queue = map[int]string{}
	}
	r.queue[n] = "AWAITING_CHECKS"
	return fmt.Sprintf("refs/heads/gh-readonly-queue/%s/pr-%d-%s", r.DefaultBranch, n, tip)
}

// MergeByQueue merges PR n as its queue does: the base branch moves to
// the group commit, which is the PR's merge commit.
func (f *Fake) MergeByQueue(repo string, n int, group string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[n]
	delete(r.queue, n)
	p.State, p.Merged, p.MergeSHA = "closed", true, group
	p.ClosedAt, p.UpdatedAt = f.now(), f.now()
	p.States = append(p.States, StateEvent{Event: "closed", At: f.now()})
	if r.BranchTips == nil {
		r.BranchTips = map[string]string{}
	}
	r.BranchTips[r.DefaultBranch] = group
}

// LeaveQueue takes PR n out of its queue unmerged (its group's checks
// failed, or someone removed it).
func (f *Fake) LeaveQueue(repo string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.repos[strings.ToLower(repo)].queue, n)
}

// Enqueues are the heads asked to be queued (expectedHeadOid), oldest first.
func (f *Fake) Enqueues() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.enqueues...)
}

// graphql answers the three GraphQL operations opsbot sends, as GitHub
// does: data, or errors with a message (HTTP 200 either way).
func (f *Fake) graphql(w http.ResponseWriter, r *http.Request, _ *Repo) (int, any) {
	var in struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	fail := func(typ, msg string) (int, any) {
		return http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"type": typ, "message": msg}}}
	}
	str := func(k string) string { s, _ := in.Variables[k].(string); return s }
	byNode := func(id string) (*Repo, *PR) {
		for _, repo := range f.repos {
			for n, p := range repo.PRs {
				if nodeID(repo, n) == id {
					return repo, p
				}
			}
		}
		return nil, nil
	}
	switch {
	case strings.Contains(in.Query, "enqueuePullRequest"):
		repo, p := byNode(str("pr"))
		switch {
		case p == nil:
			return fail("NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("pr")))
		case !repo.queueRequired(p):
			return fail("UNPROCESSABLE", "Merge queue is not enabled for the base branch of this pull request")
		case p.State != "open":
			return fail("UNPROCESSABLE", "Pull request is closed")
		case str("head") != "" && str("head") != p.Head():
			return fail("UNPROCESSABLE", "The expected head oid does not match the pull request's head")
		case repo.queue[p.Number] != "":
			return fail("UNPROCESSABLE", "Pull request is already in the merge queue")
		}
		if repo.queue == nil {
			repo.queue = map[int]string{}
		}
		repo.queue[p.Number] = "QUEUED"
		if repo.added == nil {
			repo.added = map[int]int{}
		}
		repo.added[p.Number]++
		f.enqueues = append(f.enqueues, p.Head())
		return http.StatusOK, map[string]any{"data": map[string]any{"enqueuePullRequest": map[string]any{"mergeQueueEntry": map[string]any{"state": "QUEUED"}}}}
	case strings.Contains(in.Query, "updateRefs"):
		var repo *Repo
		for _, r := range f.repos {
			if repoNodeID(r) == str("repo") {
				repo = r
			}
		}
		if repo == nil {
			return fail("NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", str("repo")))
		}
		if str("after") == strings.Repeat("0", 40) {
			// A deletion: only while the branch is at beforeOid. GitHub
			// answers one that is not with an untyped error.
			branch := strings.TrimPrefix(str("name"), "refs/heads/")
			tip, ok := repo.BranchTips[branch]
			if !ok || tip != str("before") {
				return http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"message": "Something went wrong while executing your query."}}}
			}
			delete(repo.BranchTips, branch)
			f.deletions++
			return http.StatusOK, map[string]any{"data": map[string]any{"updateRefs": map[string]any{"clientMutationId": nil}}}
		}
		// force is written in the query (opsbot's never forces) or given
		// as a variable.
		force, _ := in.Variables["force"].(bool)
		force = force || strings.Contains(in.Query, "force: true")
		code, out := repo.moveTo(strings.TrimPrefix(str("name"), "refs/heads/"), str("after"), str("before"), force)
		if code != http.StatusOK {
			msg, _ := out.(map[string]string)
			if strings.Contains(msg["message"], "beforeOid") {
				// GitHub answers a failed beforeOid comparison with a generic
				// error: no type, nothing that says the ref moved.
				return http.StatusOK, map[string]any{"data": nil, "errors": []map[string]any{{"message": "Something went wrong while executing your query."}}}
			}
			return fail("UNPROCESSABLE", msg["message"])
		}
		f.moves++
		return http.StatusOK, map[string]any{"data": map[string]any{"updateRefs": map[string]any{"clientMutationId": nil}}}
	case strings.Contains(in.Query, "dequeuePullRequest"):
		repo, p := byNode(str("pr"))
		if p == nil || repo.queue[p.Number] == "" {
			return fail("UNPROCESSABLE", "Pull request is not in the merge queue")
		}
		delete(repo.queue, p.Number)
		return http.StatusOK, map[string]any{"data": map[string]any{"dequeuePullRequest": map[string]any{"mergeQueueEntry": map[string]any{"state": "DEQUEUED"}}}}
	case strings.Contains(in.Query, "mergeQueueEntry"):
		repo := f.repos[strings.ToLower(str("owner")+"/"+str("name"))]
		n, _ := in.Variables["n"].(float64)
		if repo == nil || repo.PRs[int(n)] == nil {
			return fail("NOT_FOUND", "Could not resolve to a PullRequest")
		}
		var entry any
		if st := repo.queue[int(n)]; st != "" {
			entry = map[string]any{"state": st, "position": 1}
		}
		return http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{"mergeQueueEntry": entry,
			"timelineItems": map[string]any{"totalCount": repo.added[int(n)]}}}}}
	}
	return fail("PARSE", "the fake answers no such query")
}
