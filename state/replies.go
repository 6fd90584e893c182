package state

import (
	"bytes"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ReplyWindow is the rolling window TakeReply counts replies in.
const ReplyWindow = time.Hour

// replyLog is the times of the replies one user got on one repository in
// the last ReplyWindow, oldest first. Stored in bBudgets under
// "replies\x00" repo "\x00" user id(8).
type replyLog struct {
	V  int     `json:"v"`
	At []int64 `json:"at"` // unix nanoseconds
}

func replyKey(repo string, userID int64) []byte {
	k := append([]byte("replies\x00"), repoKey(repo)...)
	k = append(k, 0)
	return append(k, u64(uint64(userID))...)
}

// TakeReply decides whether opsbot may post one more reply comment to user
// userID on repo: true while the user got fewer than limit replies there in
// the last ReplyWindow (the reply is then counted), false past it (nothing
// is counted). A limit below 1 allows nothing.
func (t *Tx) TakeReply(repo string, userID int64, limit int) (bool, error) {
	return t.take(replyKey(repo, userID), limit, true)
}

// reactionKey is the key of the reactions one user (or, with userID
// repoWide, every commenter below triage) got on one repository:
// "reactions\x00" repo "\x00" user id(8), in bBudgets.
func reactionKey(repo string, userID uint64) []byte {
	k := append([]byte("reactions\x00"), repoKey(repo)...)
	k = append(k, 0)
	return append(k, u64(userID)...)
}

const repoWide = ^uint64(0)

// TakeReaction decides whether opsbot may add one more reaction to a
// command of user userID, who holds no role that earns a reply, on repo:
// true while that user got fewer than perUser such reactions there in the
// last ReplyWindow and all such users together fewer than perRepo (the
// reaction is then counted in both), false past either (nothing is
// counted).
func (t *Tx) TakeReaction(repo string, userID int64, perUser, perRepo int) (bool, error) {
	uk, rk := reactionKey(repo, uint64(userID)), reactionKey(repo, repoWide)
	for _, c := range []struct {
		k     []byte
		limit int
	}{{uk, perUser}, {rk, perRepo}} {
		if ok, err := t.take(c.k, c.limit, false); err != nil || !ok {
			return false, err
		}
	}
	for _, k := range [][]byte{uk, rk} {
		if _, err := t.take(k, 1<<30, true); err != nil {
			return false, err
		}
	}
	return true, nil
}

// take reads the log under k, forgets times older than ReplyWindow, and
// answers whether it holds fewer than limit; when it does and count is
// set, now is added.
func (t *Tx) take(k []byte, limit int, count bool) (bool, error) {
	b := t.tx.Bucket(bBudgets)
	var log replyLog
	if _, err := getJSON(b, k, &log); err != nil {
		return false, err
	}
	now := t.now()
	cutoff := now.Add(-ReplyWindow).UnixNano()
	kept := log.At[:0]
	for _, at := range log.At {
		if at > cutoff {
			kept = append(kept, at)
		}
	}
	log.At = kept
	if len(log.At) >= limit {
		return false, nil
	}
	if !count {
		return true, nil
	}
	log.V, log.At = 1, append(log.At, now.UnixNano())
	return true, putJSON(b, k, &log)
}

// PruneReplies forgets the reply and reaction counts of users who got no
// reply (or reaction) since cutoff (at most limit of them), returning how
// many went.
func (s *Store) PruneReplies(cutoff time.Time, limit int) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(bBudgets)
		c := b.Cursor()
		var doomed [][]byte
		for _, prefix := range [][]byte{[]byte("replies\x00"), []byte("reactions\x00")} {
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(doomed) < limit; k, v = c.Next() {
				var log replyLog
				if err := json.Unmarshal(v, &log); err != nil {
					return err
				}
				if len(log.At) == 0 || log.At[len(log.At)-1] < cutoff.UnixNano() {
					doomed = append(doomed, bytes.Clone(k))
				}
			}
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	return n, err
}
