package events

import (
	"encoding/json"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state"
)

// The payload types are the webhook schema opsbot reads: only what it uses,
// since decoding GitHub's full event types costs far more (deliveries are up
// to 25 MiB) and a field opsbot does not read cannot break it. Ingest
// (Classify) reads them, the worker reads them, and reconcile writes them for
// the events it recovers, so the three agree by construction.

// Account is a GitHub user or bot as a payload names it.
type Account struct {
	Login string `json:"login"`
	ID    int64  `json:"id,omitempty"`
	Type  string `json:"type,omitempty"`
}

// Installation is the GitHub App installation a delivery came through.
type Installation struct {
	ID int64 `json:"id,omitempty"`
}

// Repository names the repository a delivery is about.
type Repository struct {
	FullName      string `json:"full_name"`
	DefaultBranch string `json:"default_branch,omitempty"`
}

// Issue is the issue (or PR conversation) of a comment.
type Issue struct {
	Number int     `json:"number"`
	State  string  `json:"state"`
	Title  string  `json:"title"`
	User   Account `json:"user"`
	// PullRequest is present (not null) only when the issue is a pull request.
	PullRequest json.RawMessage `json:"pull_request,omitempty"`
}

// IssueComment is the comment of an issue_comment delivery.
type IssueComment struct {
	ID      int64   `json:"id"`
	Body    string  `json:"body"`
	HTMLURL string  `json:"html_url"`
	User    Account `json:"user"`
}

// BodyChange is what an edit changed in a comment's body.
type BodyChange struct {
	Body *struct {
		From string `json:"from"`
	} `json:"body,omitempty"`
}

// CommentPayload is an issue_comment delivery.
type CommentPayload struct {
	Action       string        `json:"action"`
	Issue        *Issue        `json:"issue,omitempty"`
	Comment      *IssueComment `json:"comment,omitempty"`
	Changes      *BodyChange   `json:"changes,omitempty"`
	Repository   *Repository   `json:"repository,omitempty"`
	Sender       Account       `json:"sender"`
	Installation Installation  `json:"installation"`
	// Recovery is opsbot's own, in a delivery recovery made (an id with
	// RecoveryIDPrefix); read in no other delivery.
	Recovery *Recovery `json:"opsbot_recovery,omitempty"`
}

// Recovery is what recovery knew of a comment it found: the PR's head when
// the comment was posted.
type Recovery struct {
	HeadSHA string `json:"head_sha,omitempty"`
	// TakenBack marks a deletion or an edit recovery found for a lost
	// webhook: who made it is not known, and it takes back the pin whoever
	// it was (the next push sweeps, never wrong).
	TakenBack bool `json:"taken_back,omitempty"`
}

// RecoveryIDPrefix starts the delivery ids recovery makes; webhook
// deliveries may not use it (the server refuses them), so nobody can take
// an id recovery will need, nor send what only recovery may say.
const RecoveryIDPrefix = "reconcile-"

// OnPR reports whether the comment is on a pull request (not a plain issue).
func (p *CommentPayload) OnPR() bool {
	return p.Issue != nil && p.Comment != nil && isPR(p.Issue.PullRequest)
}

func isPR(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// PullHead is a PR's head branch and commit.
type PullHead struct {
	SHA string `json:"sha"`
	Ref string `json:"ref"`
}

// Label is a PR's label as a webhook carries it.
type Label struct {
	Name string `json:"name"`
}

// LabelNames are the names of the PR's labels.
func (p *PullRequest) LabelNames() []string {
	out := make([]string, 0, len(p.Labels))
	for _, l := range p.Labels {
		out = append(out, l.Name)
	}
	return out
}

// PullRequest is the PR of a pull_request delivery.
type PullRequest struct {
	Number         int       `json:"number"`
	Title          string    `json:"title"`
	State          string    `json:"state"`
	Merged         bool      `json:"merged"`
	MergeCommitSHA string    `json:"merge_commit_sha,omitempty"`
	MergedAt       time.Time `json:"merged_at,omitzero"`
	User           Account   `json:"user"`
	Head           PullHead  `json:"head"`
	Base           PullHead  `json:"base,omitzero"`
	Draft          bool      `json:"draft"`
	Labels         []Label   `json:"labels"`
	// UpdatedAt orders deliveries, which GitHub does not send in order.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// PullPayload is a pull_request delivery.
type PullPayload struct {
	Action       string       `json:"action"`
	Number       int          `json:"number"`
	PullRequest  PullRequest  `json:"pull_request"`
	Repository   *Repository  `json:"repository,omitempty"`
	Sender       Account      `json:"sender"`
	Installation Installation `json:"installation"`
}

// PRNumber is the PR the delivery is about (the top-level number, else the PR's).
func (p *PullPayload) PRNumber() int {
	if p.Number != 0 {
		return p.Number
	}
	return p.PullRequest.Number
}

// envelope is what ingest decodes of any used delivery, in one pass: the
// fields that say whether opsbot uses it and which PR orders it, and for a
// comment all the worker reads, so the comment is parsed here once.
type envelope struct {
	Action      string      `json:"action"`
	Repository  *Repository `json:"repository"`
	Number      int         `json:"number"`
	Issue       *Issue      `json:"issue"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	Comment       *IssueComment  `json:"comment"`
	Changes       *BodyChange    `json:"changes"`
	Sender        Account        `json:"sender"`
	Installation  Installation   `json:"installation"`
	ClientPayload map[string]any `json:"client_payload"`
	Recovery      *Recovery      `json:"opsbot_recovery"`
	Wakeup        *state.SeqRef  `json:"opsbot_wakeup"`
	Click         *ClickInfo     `json:"opsbot_click"`
	// The commit of an event that names only a commit: a status's sha, a
	// check suite's or a check run's head_sha.
	SHA         string      `json:"sha"`
	State       string      `json:"state"`   // a status's
	Context     string      `json:"context"` // a status's
	CheckSuite  *headCommit `json:"check_suite"`
	CheckRun    *headCommit `json:"check_run"`
	WorkflowRun *headCommit `json:"workflow_run"`
}

// mergeGroup is a merge_group event's group: its commit and its branch,
// gh-readonly-queue/<base>/pr-<N>-<base's tip>, which names its PR.
type mergeGroup struct {
	HeadSHA string `json:"head_sha"`
	HeadRef string `json:"head_ref"`
}

type headCommit struct {
	ID           int64  `json:"id"`
	HeadSHA      string `json:"head_sha"`
	ExternalID   string `json:"external_id"`   // a check run's: opsbot's own name the PR first (pr:run:nonce)
	Event        string `json:"event"`         // a workflow run's
	DisplayTitle string `json:"display_title"` // a workflow run's name (its run-name)
	Conclusion   string `json:"conclusion"`
	PullRequests []struct {
		Number int `json:"number"`
	} `json:"pull_requests"`
}

// commit is the commit an event that names no PR is about ("" for none).
func (e *envelope) commit() string {
	switch {
	case e.CheckRun != nil && e.CheckRun.HeadSHA != "":
		return e.CheckRun.HeadSHA
	case e.CheckSuite != nil && e.CheckSuite.HeadSHA != "":
		return e.CheckSuite.HeadSHA
	case e.WorkflowRun != nil && e.WorkflowRun.HeadSHA != "":
		return e.WorkflowRun.HeadSHA
	}
	return e.SHA
}

func (h *headCommit) conclusion() string {
	if h == nil {
		return ""
	}
	return h.Conclusion
}
