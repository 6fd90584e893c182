package record

import (
	"time"
)

// AuditRecord is one line of the append-only audit.
type AuditRecord struct {
	V          int       `json:"v"`
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`              // one of AuditKinds
	Outcome    string    `json:"outcome"`           // accepted, denied, usage_error, active, superseded, skip, sweep, ...
	Command    string    `json:"command,omitempty"` // canonical command name
	DeliveryID string    `json:"delivery_id,omitempty"`
	Repo       string    `json:"repo"`
	PR         int       `json:"pr,omitempty"`
	HeadSHA    string    `json:"head_sha,omitempty"`
	RunID      int64     `json:"run_id,omitempty"`
	PinID      uint64    `json:"pin_id,omitempty"`
	ActorID    int64     `json:"actor_id,omitempty"`
	ActorLogin string    `json:"actor_login,omitempty"`
	Role       string    `json:"role,omitempty"`
	CommentID  int64     `json:"comment_id,omitempty"`
	CommentURL string    `json:"comment_url,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}
