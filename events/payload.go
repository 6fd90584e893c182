package events

import (
	"encoding/json"
	"time"
)

// The payload types read only what opsbot uses: decoding GitHub's full
// event types costs far more (deliveries are up to 25 MiB), and a field
// opsbot does not read cannot break it.

type account struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type installation struct {
	ID int64 `json:"id"`
}

type commentPayload struct {
	Action string `json:"action"`
	Issue  *struct {
		Number      int             `json:"number"`
		State       string          `json:"state"`
		Title       string          `json:"title"`
		User        account         `json:"user"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Comment *struct {
		ID      int64   `json:"id"`
		Body    string  `json:"body"`
		HTMLURL string  `json:"html_url"`
		User    account `json:"user"`
	} `json:"comment"`
	Changes *struct {
		Body *struct {
			From string `json:"from"`
		} `json:"body"`
	} `json:"changes"`
	Sender       account      `json:"sender"`
	Installation installation `json:"installation"`
}

func (p *commentPayload) onPR() bool {
	return p.Issue != nil && p.Comment != nil && len(p.Issue.PullRequest) > 0 && string(p.Issue.PullRequest) != "null"
}

type pullPayload struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest struct {
		Number         int     `json:"number"`
		Title          string  `json:"title"`
		State          string  `json:"state"`
		Merged         bool    `json:"merged"`
		MergeCommitSHA string  `json:"merge_commit_sha"`
		User           account `json:"user"`
		Head           struct {
			SHA string `json:"sha"`
			Ref string `json:"ref"`
		} `json:"head"`
		// UpdatedAt orders deliveries, which GitHub does not send in order.
		UpdatedAt time.Time `json:"updated_at"`
	} `json:"pull_request"`
	Sender       account      `json:"sender"`
	Installation installation `json:"installation"`
}
