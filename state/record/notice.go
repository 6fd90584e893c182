package record

import (
	"fmt"
	"time"
)

// Notice channels.
const (
	ChannelGitHub = "github"
	ChannelSlack  = "slack"
)

// NoticeKind is what a notice asks a sender to do.
type NoticeKind string

// Notice kinds, as stored.
const (
	NoticeComment  NoticeKind = "comment"   // a PR comment, carrying a hidden marker
	NoticeEdit     NoticeKind = "edit"      // edit a comment opsbot posted (EditOf) or TargetComment
	NoticeReaction NoticeKind = "reaction"  // react to TargetComment
	NoticeStatus   NoticeKind = "status"    // commit status on SHA
	NoticeDispatch NoticeKind = "dispatch"  // repository_dispatch to Repo
	NoticeSlack    NoticeKind = "slack"     // a Slack message in the PR's thread
	NoticeCheckRun NoticeKind = "check_run" // a check run on SHA (a GitHub App's), with its buttons
)

// Notice is one message opsbot owes GitHub or Slack. It is written in the
// transaction of the change that causes it, and sent by a sender with retries.
type Notice struct {
	V             int            `json:"v"`
	ID            uint64         `json:"id"`
	Channel       string         `json:"channel"`
	Kind          NoticeKind     `json:"kind"`
	Repo          string         `json:"repo"`
	PR            int            `json:"pr,omitempty"`
	Installation  int64          `json:"installation,omitempty"`
	Body          string         `json:"body,omitempty"`
	TargetComment int64          `json:"target_comment,omitempty"`
	Nonce         string         `json:"nonce,omitempty"` // a comment's unguessable marker part (Marker)
	EditOf        uint64         `json:"edit_of,omitempty"`
	Reaction      string         `json:"reaction,omitempty"`
	SHA           string         `json:"sha,omitempty"`
	State         string         `json:"state,omitempty"`
	Description   string         `json:"description,omitempty"`
	Context       string         `json:"context,omitempty"`
	TargetURL     string         `json:"target_url,omitempty"`
	EventType     string         `json:"event_type,omitempty"`
	Payload       map[string]any `json:"payload,omitempty"`
	Slack         *SlackMessage  `json:"slack,omitempty"`
	// Actions and ExternalID are a check run's buttons and its reference
	// (the run a button reuses); its name is Context, its conclusion State,
	// its title Description and its summary Body.
	Actions    []CheckAction `json:"actions,omitempty"`
	ExternalID string        `json:"external_id,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
	Attempts   int           `json:"attempts,omitempty"`
	NextAt     time.Time     `json:"next_at,omitzero"`
	LastError  string        `json:"last_error,omitempty"`
	// FailedAt is when the notice was given up (failed records only); the
	// failed records are pruned after retention.processed from it.
	FailedAt time.Time `json:"failed_at,omitzero"`
}

// SlackMessage is the content of a Slack notice.
type SlackMessage struct {
	Channel string `json:"channel"`
	Text    string `json:"text"`              // mrkdwn, already escaped
	Context string `json:"context,omitempty"` // a line of links under it
	// Buttons are actions under the message (a click comes back to
	// /slack/interactions).
	Buttons []SlackButton `json:"buttons,omitempty"`
	// ResponseURL, when set, makes this an answer to a click, shown only
	// to the one who clicked (ephemeral), posted to the click's
	// response_url (a Slack host) instead of the channel.
	ResponseURL string `json:"response_url,omitempty"`
	// Parent makes this the PR thread's first message (PR title, number, author).
	Parent bool `json:"parent,omitempty"`
	// Broadcast also shows a thread reply in the channel.
	Broadcast bool `json:"broadcast,omitempty"`
}

// CheckAction is a button on a check run: GitHub's limits are 20
// characters for the label and the identifier, 40 for the description.
type CheckAction struct {
	Label       string `json:"label"`
	Description string `json:"description"`
	Identifier  string `json:"identifier"`
}

// SlackButton is a button on a Slack message: its words, its action and
// the value opsbot reads back from the click.
type SlackButton struct {
	Text     string `json:"text"`
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	Style    string `json:"style,omitempty"` // primary, danger
}

// Key orders notices: those of one PR (or repository) are sent in order.
func (n *Notice) Key() string { return fmt.Sprintf("%s#%d", n.Repo, n.PR) }

// Marker is the hidden text a comment notice carries, so a retry after a
// crash finds the comment it already posted: the notice id and a random
// nonce kept with the notice, so no one can plant the marker of a notice
// before opsbot posts it. A notice written before nonces has none.
func Marker(id uint64, nonce string) string {
	if nonce == "" {
		return fmt.Sprintf("<!-- opsbot:notice=%d -->", id)
	}
	return fmt.Sprintf("<!-- opsbot:notice=%d.%s -->", id, nonce)
}

// Marker is the hidden text of this comment notice.
func (n *Notice) Marker() string { return Marker(n.ID, n.Nonce) }
