package record

import (
	"encoding/json"
	"time"
)

// Sequence is a multi-step request's durable record (a merge request, a
// stage request, an approval): one per PR and kind; PR 0 is the
// repository's own (its weekly digest). Its step changes only
// through guarded writes (Tx.PutSequence checks the version read), and its
// wake-up time is data: whatever is due is due again after a restart.
type Sequence struct {
	V    int    `json:"v"`
	Kind string `json:"kind"`
	Repo string `json:"repo"`
	PR   int    `json:"pr"`
	// Head is the head commit the sequence acts for.
	Head string `json:"head,omitempty"`
	// Commits are other commits whose events wake the sequence while it
	// is not done (the merge commit whose run a watch follows): an event
	// that names only a commit (a workflow run's completion, a check
	// suite's, a status) finds a PR by its recorded head first, then by
	// these. At most MaxCommits, each a full SHA.
	Commits []string `json:"commits,omitempty"`
	// Step is where the sequence is; Done marks a step it never leaves.
	Step string `json:"step"`
	Done bool   `json:"done,omitempty"`
	// Why says, for a sequence that stopped, why (a code and its words).
	Why string `json:"why,omitempty"`
	// Notice is the outbox notice of the sequence's status comment, which
	// its steps edit (0: none).
	Notice uint64 `json:"notice,omitempty"`
	// Data is the kind's own state, as its JSON.
	Data json.RawMessage `json:"data,omitempty"`
	// Origin is the invocation that started it, and who.
	OriginKind OriginKind `json:"origin_kind,omitempty"`
	OriginID   int64      `json:"origin_id,omitempty"`
	OriginURL  string     `json:"origin_url,omitempty"`
	ActorID    int64      `json:"actor_id,omitempty"`
	ActorLogin string     `json:"actor_login,omitempty"`
	// OriginSeen says that a deletion of the origin's comment, or an edit
	// that took its command away, was processed and did not take the
	// sequence back (whoever did it lacked the command's role): "deleted"
	// or "edited". Recovery does not take it back in its place.
	OriginSeen string `json:"origin_seen,omitempty"`
	// WakeAt is when the sequence is woken (zero: never, it waits for
	// events); Deadline is when it gives up.
	WakeAt   time.Time `json:"wake_at,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Left is what the sequence made on GitHub that is opsbot's to delete
	// (a temporary branch), recorded before it is made and dropped once
	// GitHub confirms it gone. A done sequence that still holds something
	// stays due at WakeAt, so the engine's cleanup (seq.Kind.Cleanup) runs
	// until it is gone; a sequence begun over a done one takes its Left.
	Left []Leftover `json:"left,omitempty"`
	// Version counts its writes; a write names the version it read.
	Version uint64    `json:"version"`
	Started time.Time `json:"started,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
}

// Origin is the invocation that started the sequence.
func (s *Sequence) Origin() Origin { return originOf(s.OriginKind, s.OriginID, s.OriginURL) }

// Line is the command line that started the sequence, as written: a kind
// a command starts keeps it in its data's "line" (editing it away takes
// the sequence back). "" for a kind that keeps none.
func (s *Sequence) Line() string {
	var d struct {
		Line string `json:"line"`
	}
	if json.Unmarshal(s.Data, &d) != nil {
		return ""
	}
	return d.Line
}

// SetOrigin records the invocation that started the sequence.
func (s *Sequence) SetOrigin(o Origin) {
	s.OriginID, s.OriginURL, s.OriginKind = o.ID, o.URL, storedKind(o.Kind)
}

// Leftover is a branch a sequence made on GitHub for a while (the merge's
// temporary branch), named for Commit, opsbot's commit it was made at.
// Tries counts the deletions GitHub did not answer, the first of them at
// Failing.
type Leftover struct {
	Branch string `json:"branch"`
	// RepoNode is the GraphQL id of the repository the branch is in: the
	// deletion is a compare-and-swap on it ("": a record of a build
	// before, deleted by name).
	RepoNode string    `json:"repo_node,omitempty"`
	Commit   string    `json:"commit,omitempty"`
	Tries    int       `json:"tries,omitempty"`
	Failing  time.Time `json:"failing,omitzero"`
}

// Holds reports whether the sequence still holds something on GitHub.
func (s *Sequence) Holds() bool { return len(s.Left) > 0 }

// DueAt is when s is next due: its wake-up or its deadline, whichever
// comes first (zero: never, it waits for events). The wake index holds
// this time, so a deadline fires whether or not a wake-up is set.
func DueAt(s *Sequence) time.Time {
	switch {
	case s.Done && s.Holds():
		return s.WakeAt // its cleanup: no deadline stops it
	case s.Done:
		return time.Time{}
	case s.WakeAt.IsZero():
		return s.Deadline
	case !s.Deadline.IsZero() && s.Deadline.Before(s.WakeAt):
		return s.Deadline
	}
	return s.WakeAt
}

// MaxCommits bounds Sequence.Commits.
const MaxCommits = 4

// WakeGap is the least time between a sequence's write and a wake-up an
// event asks for (Sequences.WakeSequences).
const WakeGap = 10 * time.Second

// WakeAfterEvent is when an event at at makes s due: at, or WakeGap after
// its last write if that is later.
func WakeAfterEvent(s *Sequence, at time.Time) time.Time {
	if gap := s.Updated.Add(WakeGap); gap.After(at) {
		return gap
	}
	return at
}

// SeqRef names a sequence: its repository, PR and kind.
type SeqRef struct {
	Repo string `json:"repo"`
	PR   int    `json:"pr"`
	Kind string `json:"kind"`
	// Version is the version that was due (a wake-up names it, so a
	// wake-up of a sequence that moved on meanwhile finds it changed).
	Version uint64 `json:"version"`
}
