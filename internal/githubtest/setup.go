package githubtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// Repo is one repository.
type Repo struct {
	Owner, Name   string
	ID            int64
	DefaultBranch string
	Workflows     map[string]int64 // file name -> workflow id
	Runs          map[int64]*Run
	PRs           map[int]*PR
	Roles         map[string]string   // login -> role_name
	parents       map[string]string   // commit -> parent
	files         map[string][]string // commit -> files it touched
	fromDefault   map[string]bool     // merges of the default branch: their files are the default branch's
	baseParent    map[string]string   // update-branch's merge commits: their second parent, the base's tip
	extraParent   map[string]string   // merges pushed by hand: their second parent
	trees         map[string]string   // commit -> its tree, where not the one treeOf gives (a crafted merge's)
	byGitHub      map[string]bool     // commits signed and committed by GitHub besides update-branch's (made with the Git database API)
	// BranchTips are the commits branches point to (the default branch's
	// when unset: the base of a PR into it).
	BranchTips map[string]string
	// noRunDetails refuses return_run_details (RefuseRunDetails);
	// dropDispatches are dispatches whose answer is lost.
	noRunDetails   bool
	dropDispatches int
	// git is the Git database: the content of commits (gitdata.go);
	// cleanMerges how its merges merge a file both sides changed.
	git         *gitStore
	cleanMerges map[string]string
	// rules are the rule types of each branch (SetBranchRules); queue the
	// merge queue's entries, PR -> state (queue.go).
	rules map[string][]string
	queue map[int]string
	added map[int]int // PR -> times added to the queue (its timeline)
	// unsigned: the commits made through the API are not signed
	// (SignNothing).
	unsigned bool
	// appCommits: the commits made through the API with no author name
	// the App's bot their committer, not GitHub (CommitAsTheApp).
	appCommits bool
	// classicQueue are branches whose classic protection requires the
	// merge queue: their rules do not list it (SetClassicQueue).
	classicQueue map[string]bool
}

// AddUser registers an account. kind is "User" or "Bot". Adding a login
// that exists hands it to the new account (a renamed or deleted account's
// login taken by someone else).
func (f *Fake) AddUser(login string, id int64, kind string) *github.User {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := &github.User{Login: github.String(login), ID: github.Int64(id), Type: github.String(kind),
		HTMLURL: github.String("https://github.com/" + login)}
	f.users[strings.ToLower(login)] = u
	return u
}

// AddRepo registers a repository with a sweep workflow at file (e.g. run-sweep.yml).
func (f *Fake) AddRepo(fullName string, workflowFile string, workflowID int64) *Repo {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner, name, _ := strings.Cut(fullName, "/")
	r := &Repo{Owner: owner, Name: name, ID: int64(len(f.repos) + 100), DefaultBranch: "main",
		Workflows: map[string]int64{workflowFile: workflowID}, Runs: map[int64]*Run{}, PRs: map[int]*PR{},
		Roles: map[string]string{}, parents: map[string]string{}, files: map[string][]string{}, fromDefault: map[string]bool{},
		baseParent: map[string]string{}, extraParent: map[string]string{}, BranchTips: map[string]string{}, trees: map[string]string{}, byGitHub: map[string]bool{}}
	f.repos[strings.ToLower(fullName)] = r
	return r
}

// Repo returns a registered repository.
func (f *Fake) Repo(fullName string) *Repo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[strings.ToLower(fullName)]
}

// SetRole gives login a role (none, read, triage, write, maintain, admin, or a custom name).
func (f *Fake) SetRole(repo, login, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].Roles[strings.ToLower(login)] = role
}

// AddTeamMember puts login in team org/slug.
func (f *Fake) AddTeamMember(team, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.teams[strings.ToLower(team)] == nil {
		f.teams[strings.ToLower(team)] = map[string]bool{}
	}
	f.teams[strings.ToLower(team)][strings.ToLower(login)] = true
}

// DefaultLabels are the labels AddPR gives a PR: a full sweep's, as the
// served repository's PRs whose sweeps are reused carry.
var DefaultLabels = []string{"full-sweep-enabled"}

// AddPR opens a PR whose commits follow base in order; files[i] are the
// files commit i touched (may be shorter than commits). It carries
// DefaultLabels (SetLabels changes them).
func (f *Fake) AddPR(repo string, number int, author, branch, base string, commits []string, files ...[]string) *PR {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := &PR{Number: number, Title: fmt.Sprintf("PR %d", number), Author: author, Branch: branch, BaseSHA: base,
		Commits: append([]string(nil), commits...), State: "open", Labels: append([]string(nil), DefaultLabels...)}
	r.PRs[number] = p
	r.chain(base, commits, files)
	return p
}

// Push adds commits to a PR's head (a synchronize).
func (f *Fake) Push(repo string, number int, commits []string, files ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.Head(), commits, files)
	p.Commits = append(p.Commits, commits...)
}

// MergeDefault pushes commit to a PR: a merge of the default branch into it,
// bringing files the default branch changed. A three-dot compare from the
// default branch leaves those files out, as GitHub's does (they are the
// same on both sides); a compare from an older commit of the PR lists them.
func (f *Fake) MergeDefault(repo string, number int, commit string, files ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.Head(), []string{commit}, [][]string{files})
	r.fromDefault[commit] = true
	p.Commits = append(p.Commits, commit)
}

// ForcePush replaces a PR's commits (a rebase): the old ones leave the PR.
func (f *Fake) ForcePush(repo string, number int, commits []string, files ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	p := r.PRs[number]
	r.chain(p.BaseSHA, commits, files)
	p.Commits = append([]string(nil), commits...)
}

// Retarget changes the branch a PR merges into ("" is the default branch).
func (f *Fake) Retarget(repo string, number int, baseRef string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.BaseRef = baseRef
	p.States = append(p.States, StateEvent{Event: "base_ref_changed", At: f.now()})
}

// FromFork puts a PR's head branch in a fork (repository id and full name).
func (f *Fake) FromFork(repo string, number int, forkID int64, fork string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.HeadRepoID, p.HeadRepo = forkID, fork
}

// SetLabels replaces a PR's labels now: the timeline gains a labeled or
// unlabeled event for each change.
func (f *Fake) SetLabels(repo string, number int, labels ...string) {
	f.SetLabelsAt(repo, number, f.clock(), labels...)
}

// SetLabelsAt replaces a PR's labels as of at (the timeline's events are
// dated at).
func (f *Fake) SetLabelsAt(repo string, number int, at time.Time, labels ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	has := func(list []string, l string) bool {
		for _, x := range list {
			if x == l {
				return true
			}
		}
		return false
	}
	for _, l := range p.Labels {
		if !has(labels, l) {
			p.LabelHistory = append(p.LabelHistory, LabelChange{Label: l, At: at})
		}
	}
	for _, l := range labels {
		if !has(p.Labels, l) {
			p.LabelHistory = append(p.LabelHistory, LabelChange{Label: l, Added: true, At: at})
		}
	}
	p.Labels = append([]string(nil), labels...)
}

func (f *Fake) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now()
}

// SetDraft makes a PR a draft, or ready for review.
func (f *Fake) SetDraft(repo string, number int, draft bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].PRs[number].Draft = draft
}

// PRLabels returns a PR's labels and draft flag.
func (f *Fake) PRLabels(repo string, number int) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	return append([]string(nil), p.Labels...), p.Draft
}

// PRHead is a PR's head commit now.
func (f *Fake) PRHead(repo string, number int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[strings.ToLower(repo)].PRs[number].Head()
}

// ClosePR closes a PR, merged or not.
func (f *Fake) ClosePR(repo string, number int, merged bool, mergeSHA string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.State, p.Merged, p.MergeSHA = "closed", merged, mergeSHA
	p.ClosedAt, p.UpdatedAt = f.now(), f.now()
	p.States = append(p.States, StateEvent{Event: "closed", At: f.now()})
}

// ReopenPR reopens a closed, unmerged PR.
func (f *Fake) ReopenPR(repo string, number int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.repos[strings.ToLower(repo)].PRs[number]
	p.State, p.ClosedAt, p.UpdatedAt = "open", time.Time{}, f.now()
	p.States = append(p.States, StateEvent{Event: "reopened", At: f.now()})
}

func (r *Repo) chain(parent string, commits []string, files [][]string) {
	for i, c := range commits {
		r.parents[c] = parent
		if i < len(files) {
			r.files[c] = files[i]
		}
		parent = c
	}
}

// AddRun registers a workflow run.
func (f *Fake) AddRun(repo string, run Run) *Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	if run.Attempt == 0 {
		run.Attempt = 1
	}
	if run.CreatedAt.IsZero() {
		run.CreatedAt = f.now()
	}
	run.Artifacts = append([]Artifact(nil), run.Artifacts...) // the caller's slice stays theirs
	r := &run
	f.repos[strings.ToLower(repo)].Runs[run.ID] = r
	return r
}

// Rerun re-runs a run: its attempt goes up by one and it completes again
// with conclusion.
func (f *Fake) Rerun(repo string, runID int64, conclusion string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[runID]
	run.Attempt++
	run.Status, run.Conclusion = "completed", conclusion
}

// ExpireArtifacts marks every artifact of a run expired.
func (f *Fake) ExpireArtifacts(repo string, runID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[runID]
	for i := range run.Artifacts {
		run.Artifacts[i].Expired = true
	}
}

// Comments returns the comments of a PR, oldest first.
func (f *Fake) Comments(repo string, pr int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, repo) && c.PR == pr {
			out = append(out, *c)
		}
	}
	return out
}

// AddComment records a comment as written by login (a user's comment the
// tests then announce in a webhook). It returns the comment's id.
func (f *Fake) AddComment(repo string, pr int, login string, body string) Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.addComment(repo, pr, login, body)
}

func (f *Fake) addComment(repo string, pr int, login, body string) *Comment {
	f.nextID++
	u := f.users[strings.ToLower(login)]
	var uid int64
	if u != nil {
		uid = u.GetID()
	}
	now := f.now()
	c := &Comment{ID: f.nextID, Repo: repo, PR: pr, Body: body, Login: login, UserID: uid, CreatedAt: now, UpdatedAt: now}
	f.comments = append(f.comments, c)
	return c
}

// Statuses returns the statuses set on a commit, oldest first.
func (f *Fake) Statuses(repo, sha string) []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Status
	for _, s := range f.statuses {
		if strings.EqualFold(s.Repo, repo) && s.SHA == sha {
			out = append(out, s)
		}
	}
	return out
}

// AddReaction adds login's reaction of kind content to a comment, as a
// person reacting on GitHub would.
func (f *Fake) AddReaction(repo string, commentID int64, login, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reactions = append(f.reactions, Reaction{Repo: repo, CommentID: commentID, Content: content, Login: login})
}

// Reactions returns the reactions added to a comment.
func (f *Fake) Reactions(commentID int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reactions {
		if r.CommentID == commentID {
			out = append(out, r.Content)
		}
	}
	return out
}

// Dispatches returns the repository_dispatch events sent.
func (f *Fake) Dispatches() []Dispatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Dispatch(nil), f.dispatches...)
}
