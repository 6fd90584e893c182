package record

import "time"

// AllowedUser is an allow_users login as resolved to an account when the
// configuration loaded.
type AllowedUser struct {
	Login      string    `json:"login"`
	ID         int64     `json:"id,omitempty"`    // 0: it did not resolve, and allows nobody
	Error      string    `json:"error,omitempty"` // why it did not resolve
	ResolvedAt time.Time `json:"resolved_at"`
}
