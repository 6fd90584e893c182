package state

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A comment's seen mark (bComments) is 8 bytes (unix time) once a `created`
// delivery of it was processed (its commands run, or it had none), or those 8
// bytes and a letter once an `edited` (markEdited) or `deleted` (markDeleted)
// webhook named it before any `created` delivery was processed. Recovery runs
// only comments with no mark, and gives those it lists and does not run the
// processed mark, except a comment whose `created` delivery is waiting in the
// inbox when it writes (NoteComments); a `created` delivery runs a comment
// unless it was processed before, and after an edit or a deletion runs at
// most what the comment still says (events.Handler).
const (
	markEdited  = 'n'
	markDeleted = 'd'
)

func markOf(v []byte) CommentMark {
	switch {
	case v == nil:
		return MarkNone
	case len(v) == 8:
		return MarkProcessed
	case len(v) == 9 && v[8] == markDeleted:
		return MarkDeleted
	}
	return MarkEdited
}

func commentBucket(tx *bolt.Tx, repo string) (*bolt.Bucket, error) {
	return tx.Bucket(bComments).CreateBucketIfNotExists(repoKey(repo))
}

// CommentSeen reports whether a `created` delivery of a comment was processed
// before, and marks it processed: the idempotency key for commands is (repo,
// comment id). A comment only noted (NoteComment) is not processed yet.
func (t *Tx) CommentSeen(repo string, commentID int64) (bool, error) {
	rb, err := commentBucket(t.tx, repo)
	if err != nil {
		return false, err
	}
	k := u64(uint64(commentID))
	if v := rb.Get(k); len(v) == 8 {
		return true, nil
	}
	return false, rb.Put(k, u64(uint64(t.now().Unix())))
}

// CommentMark reads what opsbot has seen of a comment, in this transaction.
func (t *Tx) CommentMark(repo string, commentID int64) (CommentMark, error) {
	return commentMark(t.tx, repo, commentID), nil
}

func commentMark(tx *bolt.Tx, repo string, commentID int64) CommentMark {
	rb := tx.Bucket(bComments).Bucket(repoKey(repo))
	if rb == nil {
		return MarkNone
	}
	return markOf(rb.Get(u64(uint64(commentID))))
}

// CommentMark reads what opsbot has seen of a comment outside a write.
func (s *Store) CommentMark(repo string, commentID int64) (CommentMark, error) {
	m := MarkNone
	err := s.db.View(func(tx *bolt.Tx) error {
		m = commentMark(tx, repo, commentID)
		return nil
	})
	return m, err
}

// NoteComment records that opsbot saw a comment edited (deleted false) or
// deleted without running it, so recovery never runs it later and a
// `created` delivery that comes after runs at most what the comment still
// says; a processed mark stays as it is, and a deletion outranks an edit.
func (t *Tx) NoteComment(repo string, commentID int64, deleted bool) error {
	return noteComment(t.tx, repo, commentID, t.now(), deleted)
}

func noteComment(tx *bolt.Tx, repo string, commentID int64, now time.Time, deleted bool) error {
	rb, err := commentBucket(tx, repo)
	if err != nil {
		return err
	}
	k := u64(uint64(commentID))
	old := markOf(rb.Get(k))
	if old == MarkProcessed || old == MarkDeleted || (old == MarkEdited && !deleted) {
		return nil
	}
	letter := byte(markEdited)
	if deleted {
		letter = markDeleted
	}
	return rb.Put(k, append(u64(uint64(now.Unix())), letter))
}

// CommentNote is a comment recovery saw and does not run, with the audit
// record that says why (nil for a comment that holds no command).
type CommentNote struct {
	CommentID int64
	Audit     *AuditRecord
	// Unmarked notes a comment recovery could not judge (a read failed):
	// its audit record is written, but no mark, so its created delivery,
	// late rather than lost, still runs it.
	Unmarked bool
}

// NoteComments records, in one write, comments recovery saw and does not
// run as processed (a `created` delivery of one stored later, late,
// redelivered or replayed, runs nothing), with the audit records that say
// why, and audit, which is written whatever is left alone. It decides in
// that write, and leaves alone (no mark, no audit record of its own), every
// comment whose `created` delivery is stored and not yet processed (that
// delivery decides, as if recovery had never looked) and every comment
// opsbot has marked since recovery read it (a delivery processed, an edit
// or a deletion noted meanwhile). It returns the comments it left alone.
func (s *Store) NoteComments(repo string, notes []CommentNote, audit []AuditRecord) (left []int64, err error) {
	if len(notes) == 0 && len(audit) == 0 {
		return nil, nil
	}
	err = s.Update(func(t *Tx) error {
		left = nil
		pending, err := pendingCreated(t.tx, repo)
		if err != nil {
			return err
		}
		for _, n := range notes {
			if pending[n.CommentID] || commentMark(t.tx, repo, n.CommentID) != MarkNone {
				left = append(left, n.CommentID)
				continue
			}
			if !n.Unmarked {
				if _, err := t.CommentSeen(repo, n.CommentID); err != nil {
					return err
				}
			}
			if n.Audit != nil {
				if err := t.Audit(*n.Audit); err != nil {
					return err
				}
			}
		}
		for _, r := range audit {
			if err := t.Audit(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return left, nil
}

// pendingCreated is the set of a repository's comments whose `created`
// delivery (a webhook's, or one recovery queued) is in the inbox, read in
// the transaction that is about to mark comments.
func pendingCreated(tx *bolt.Tx, repo string) (map[int64]bool, error) {
	out := map[int64]bool{}
	err := tx.Bucket(bInbox).ForEach(func(k, v []byte) error {
		d, err := decodeDelivery(k, v, false)
		if err != nil {
			return fmt.Errorf("inbox entry %d: %w", binary.BigEndian.Uint64(k), err)
		}
		if d.CommentID != 0 && d.Action == "created" && strings.EqualFold(d.Repo, repo) {
			out[d.CommentID] = true
		}
		return nil
	})
	return out, err
}
