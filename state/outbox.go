package state

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("state: making a marker nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// channels are the outbox's sub-buckets: each sender reads only its own,
// so a backlog on one (Slack down) costs the other nothing.
var channels = [][]byte{[]byte(ChannelGitHub), []byte(ChannelSlack)}

// channelBucket is the outbox bucket of a channel.
func channelBucket(tx *bolt.Tx, channel string) (*bolt.Bucket, error) {
	b := tx.Bucket(bOutbox).Bucket([]byte(channel))
	if b == nil {
		return nil, fmt.Errorf("state: no outbox channel %q", channel)
	}
	return b, nil
}

// findNotice finds the bucket holding notice id.
func findNotice(tx *bolt.Tx, id uint64) *bolt.Bucket {
	for _, ch := range channels {
		if b := tx.Bucket(bOutbox).Bucket(ch); b != nil && b.Get(u64(id)) != nil {
			return b
		}
	}
	return nil
}

// loadNotice reads notice id and the bucket that holds it; nil when the
// outbox no longer has it (sent or failed already).
func loadNotice(tx *bolt.Tx, id uint64) (*bolt.Bucket, *Notice, error) {
	b := findNotice(tx, id)
	if b == nil {
		return nil, nil, nil
	}
	var n Notice
	if _, err := getJSON(b, u64(id), &n); err != nil {
		return nil, nil, err
	}
	return b, &n, nil
}

// Enqueue adds a notice to the outbox in this transaction.
func (t *Tx) Enqueue(n *Notice) error {
	b, err := channelBucket(t.tx, n.Channel)
	if err != nil {
		return err
	}
	id, err := t.tx.Bucket(bOutbox).NextSequence()
	if err != nil {
		return err
	}
	n.V, n.ID = 1, id
	// An edit has a nonce too: when its comment was refused or is gone, it
	// is posted as a comment of its own (ghclient's Sender).
	if (n.Kind == NoticeComment || n.Kind == NoticeEdit) && n.Nonce == "" {
		if n.Nonce, err = newNonce(); err != nil {
			return err
		}
	}
	if n.CreatedAt.IsZero() {
		n.CreatedAt = t.now()
	}
	t.enqueued = true
	t.dOut++
	return putJSON(b, u64(id), n)
}

// Outbox lists the unsent notices of a channel, oldest first.
func (s *Store) Outbox(channel string) ([]Notice, error) {
	var out []Notice
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := channelBucket(tx, channel)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var n Notice
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("outbox entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, n)
			return nil
		})
	})
	return out, err
}

// OutboxStats is the outbox's depth and oldest notice.
func (s *Store) OutboxStats() (depth int, oldest time.Time, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		depth = int(s.outboxN.Load())
		for _, ch := range channels {
			if _, v := tx.Bucket(bOutbox).Bucket(ch).Cursor().First(); v != nil {
				var n Notice
				if err := json.Unmarshal(v, &n); err != nil {
					return err
				}
				if oldest.IsZero() || n.CreatedAt.Before(oldest) {
					oldest = n.CreatedAt
				}
			}
		}
		return nil
	})
	return depth, oldest, err
}

// BeginAttempt records, durably and before the notice is sent, that an
// attempt starts; it returns the attempt number. An attempt after the first
// must look for what an earlier one may have done.
func (s *Store) BeginAttempt(id uint64) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		b, no, err := loadNotice(tx, id)
		if err != nil {
			return err
		}
		if no == nil {
			return ErrNotFound
		}
		no.Attempts++
		n = no.Attempts
		return putJSON(b, u64(id), no)
	})
	return n, err
}

// SentRef is what a sent notice produced (the comment a comment notice posted).
type SentRef struct {
	CommentID  int64     `json:"comment_id,omitempty"`
	CommentURL string    `json:"comment_url,omitempty"`
	SlackTS    string    `json:"slack_ts,omitempty"`
	Marker     string    `json:"marker,omitempty"` // the hidden marker of a comment notice, kept by its edits
	SentAt     time.Time `json:"sent_at"`
}

// NoticeSent removes a notice from the outbox and keeps what it produced.
// A Slack parent message's ts becomes the PR's thread.
func (s *Store) NoticeSent(n *Notice, ref SentRef) error {
	return s.write(context.Background(), nil, func(t *Tx) error {
		tx := t.tx
		ref.SentAt = s.now()
		if n.Kind == NoticeComment {
			ref.Marker = n.Marker()
		}
		if err := putJSON(tx.Bucket(bSent), sentKey(n.ID), ref); err != nil {
			return err
		}
		if n.Kind == NoticeSlack && n.Slack != nil && n.Slack.Parent && ref.SlackTS != "" {
			info, err := t.PRInfo(n.Repo, n.PR)
			if err != nil {
				return err
			}
			if info == nil {
				info = &PRInfo{Repo: n.Repo, PR: n.PR}
			}
			info.SlackTS, info.SlackCh = ref.SlackTS, n.Slack.Channel
			if err := t.PutPRInfo(info); err != nil {
				return err
			}
		}
		b := findNotice(tx, n.ID)
		if b == nil {
			return nil // recorded already
		}
		t.dOut--
		return b.Delete(u64(n.ID))
	})
}

func sentKey(id uint64) []byte { return append([]byte("sent\x00"), u64(id)...) }

// SentRef returns what notice id produced once sent; ok is false until then.
func (s *Store) SentRef(id uint64) (SentRef, bool, error) {
	var ref SentRef
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bSent), sentKey(id), &ref)
		return err
	})
	return ref, ok, err
}

// NoticeState is where a notice is in its life.
type NoticeState int

// Notice states.
const (
	NoticeGone    NoticeState = iota // unknown: never written, or its sent record was pruned
	NoticePending                    // in the outbox, not sent yet
	NoticeDone                       // sent; SentRef has what it produced
	NoticeGaveUp                     // refused for good: among the failed notices
)

// NoticeStatus says where notice id is: pending, sent, failed or gone.
func (s *Store) NoticeStatus(id uint64) (NoticeState, error) {
	st := NoticeGone
	err := s.db.View(func(tx *bolt.Tx) error {
		switch {
		case findNotice(tx, id) != nil:
			st = NoticePending
		case tx.Bucket(bSent).Get(sentKey(id)) != nil:
			st = NoticeDone
		case tx.Bucket(bFailed).Get(failedKey(id)) != nil:
			st = NoticeGaveUp
		}
		return nil
	})
	return st, err
}

func failedKey(id uint64) []byte { return append([]byte("failed\x00"), u64(id)...) }

// NoticeRetry keeps a notice for another attempt at next.
func (s *Store) NoticeRetry(id uint64, next time.Time, lastErr string) error {
	return s.update(func(tx *bolt.Tx) error {
		b, n, err := loadNotice(tx, id)
		if err != nil || n == nil {
			return err
		}
		n.NextAt, n.LastError = next, lastErr
		return putJSON(b, u64(id), n)
	})
}

// NoticeFailed moves a notice that can never be sent (GitHub refused it for
// good) out of the outbox into the failed notices, with the reason.
func (s *Store) NoticeFailed(id uint64, reason string) error {
	return s.write(context.Background(), nil, func(t *Tx) error {
		tx := t.tx
		b, n, err := loadNotice(tx, id)
		if err != nil || n == nil {
			return err
		}
		n.LastError, n.FailedAt = reason, t.now()
		if err := putJSON(tx.Bucket(bFailed), failedKey(id), n); err != nil {
			return err
		}
		t.dOut--
		return b.Delete(u64(id))
	})
}

// Withdraw takes a notice back before any attempt to send it began, in
// this transaction, and reports whether it did: false when it was sent,
// given up, or an attempt has begun (it may have reached GitHub).
func (t *Tx) Withdraw(id uint64) (bool, error) {
	b, n, err := loadNotice(t.tx, id)
	if err != nil || n == nil || n.Attempts > 0 {
		return false, err
	}
	t.dOut--
	return true, b.Delete(u64(id))
}

// NoticesDropped moves notices the outbox chose not to send (the oldest of
// a PR's too deep reaction backlog) out of the outbox into the failed
// notices with the reason, and audits each (kind notice, outcome dropped).
func (s *Store) NoticesDropped(ids []uint64, reason string) error {
	return s.write(context.Background(), nil, func(t *Tx) error {
		for _, id := range ids {
			b, n, err := loadNotice(t.tx, id)
			if err != nil {
				return err
			}
			if n == nil {
				continue // sent or failed meanwhile
			}
			n.LastError, n.FailedAt = reason, t.now()
			if err := putJSON(t.tx.Bucket(bFailed), failedKey(id), n); err != nil {
				return err
			}
			t.dOut--
			if err := b.Delete(u64(id)); err != nil {
				return err
			}
			if err := t.Audit(AuditRecord{Kind: "notice", Outcome: "dropped", Repo: n.Repo, PR: n.PR, Reason: fmt.Sprintf("%s %s: %s", n.Kind, n.Reaction, reason), OriginRef: OriginRef{CommentID: n.TargetComment}}); err != nil {
				return err
			}
		}
		return nil
	})
}

// PruneFailed forgets failed notices given up before cutoff (at most limit
// of them; a record from before FailedAt was kept counts from its
// CreatedAt), returning how many went.
func (s *Store) PruneFailed(cutoff time.Time, limit int) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bFailed).Cursor()
		prefix := []byte("failed\x00")
		var doomed [][]byte
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(doomed) < limit; k, v = c.Next() {
			var no Notice
			if err := json.Unmarshal(v, &no); err != nil {
				return err
			}
			at := no.FailedAt
			if at.IsZero() {
				at = no.CreatedAt
			}
			if at.Before(cutoff) {
				doomed = append(doomed, append([]byte(nil), k...))
			}
		}
		for _, k := range doomed {
			if err := tx.Bucket(bFailed).Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	return n, err
}

// FailedNotices lists the notices that could not be sent.
func (s *Store) FailedNotices() ([]Notice, error) {
	var out []Notice
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bFailed).Cursor()
		prefix := []byte("failed\x00")
		for k, v := c.Seek(prefix); k != nil && len(k) > len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
			var n Notice
			if err := json.Unmarshal(v, &n); err != nil {
				return err
			}
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// Subscribe returns a channel that receives a value after each transaction
// that enqueued notices commits. Each sender subscribes once.
func (s *Store) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.subMu.Lock()
	s.subs = append(s.subs, ch)
	s.subMu.Unlock()
	return ch
}

func (s *Store) wake() {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// PruneSent forgets what notices sent before cutoff produced (at most limit
// of them), returning how many went. The records an edit may still need are
// kept: the target of an edit waiting in the outbox, and the acknowledgement
// of a stage request the staging side has not finished (its callback edits it).
func (s *Store) PruneSent(cutoff time.Time, limit int) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		keep, err := editTargets(tx)
		if err != nil {
			return err
		}
		c := tx.Bucket(bSent).Cursor()
		prefix := []byte("sent\x00")
		var doomed [][]byte
		for k, v := c.Seek(prefix); k != nil && len(k) > len(prefix) && string(k[:len(prefix)]) == string(prefix) && len(doomed) < limit; k, v = c.Next() {
			var ref SentRef
			if err := json.Unmarshal(v, &ref); err != nil {
				return err
			}
			if ref.SentAt.Before(cutoff) && !keep[binary.BigEndian.Uint64(k[len(prefix):])] {
				doomed = append(doomed, append([]byte(nil), k...))
			}
		}
		for _, k := range doomed {
			if err := tx.Bucket(bSent).Delete(k); err != nil {
				return err
			}
		}
		n = len(doomed)
		return nil
	})
	return n, err
}

// editTargets are the notices whose sent records an edit may still need.
func editTargets(tx *bolt.Tx) (map[uint64]bool, error) {
	keep := map[uint64]bool{}
	err := tx.Bucket(bOutbox).Bucket([]byte(ChannelGitHub)).ForEach(func(_, v []byte) error {
		var n Notice
		if err := json.Unmarshal(v, &n); err != nil {
			return err
		}
		if n.EditOf != 0 {
			keep[n.EditOf] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Bucket(bStage).ForEach(func(repo, v []byte) error {
		if v != nil {
			return nil
		}
		reqs, err := stageRequests(tx, string(repo))
		if err != nil {
			return err
		}
		for _, r := range reqs {
			if r.Pending() && r.AckNotice != 0 {
				keep[r.AckNotice] = true
			}
		}
		return nil
	})
	return keep, err
}
