package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Decision returns the stored decision for a head, or nil.
func (t *Tx) Decision(repo string, pr int, sha string) (*Decision, error) {
	return getDecision(t.tx, repo, pr, sha)
}

func getDecision(tx *bolt.Tx, repo string, pr int, sha string) (*Decision, error) {
	b, err := prBucket(tx, repo, pr, false)
	if err != nil || b == nil {
		return nil, err
	}
	var d Decision
	ok, err := getJSON(b, decKey(sha), &d)
	if err != nil || !ok {
		return nil, err
	}
	return &d, nil
}

// Decision reads a stored decision outside a write.
func (s *Store) Decision(repo string, pr int, sha string) (*Decision, error) {
	var d *Decision
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		d, err = getDecision(tx, repo, pr, sha)
		return err
	})
	return d, err
}

// PutDecision stores a decision. It fails if one exists for the head:
// callers check first, in the same transaction.
func (t *Tx) PutDecision(d *Decision) error {
	b, err := prBucket(t.tx, d.Repo, d.PR, true)
	if err != nil {
		return err
	}
	d.HeadSHA = strings.ToLower(d.HeadSHA)
	k := decKey(d.HeadSHA)
	if b.Get(k) != nil {
		return fmt.Errorf("state: decision for %s#%d@%s exists", d.Repo, d.PR, d.HeadSHA)
	}
	d.V = 1
	if d.DecidedAt.IsZero() {
		d.DecidedAt = t.now()
	}
	if err := putJSON(b, k, d); err != nil {
		return err
	}
	// Index skips by head SHA, so a run on a skipped head can be traced to the run it reused.
	if d.Decision == Skip {
		if err := addSaved(t.tx, d); err != nil {
			return err
		}
		return t.tx.Bucket(bReused).Put(reusedKey(d.Repo, d.HeadSHA), u64(uint64(d.RunID)))
	}
	return nil
}

// decKey is a decision's key in its PR's bucket. A commit is one commit
// however its SHA is spelled: the key is lower-case.
func decKey(sha string) []byte { return []byte(pDec + strings.ToLower(sha)) }

func reusedKey(repo, sha string) []byte {
	return []byte("reused\x00" + string(repoKey(repo)) + "\x00" + strings.ToLower(sha))
}

// ReusedRun returns what opsbot keeps of a head whose sweep it skipped:
// the run it reused and, after Sweep anyway, when that was asked (the
// head's runs measured it only from then on). ok is false for a head
// opsbot never skipped.
//
// It only reads one key; the one error bbolt can give here is a closed
// database, which answers "not known": the hint in a reply is lost, a
// decision never depends on it.
func (s *Store) ReusedRun(repo, sha string) (record.SkippedHead, bool) {
	var h record.SkippedHead
	_ = s.db.View(func(tx *bolt.Tx) error {
		h = decodeReused(tx.Bucket(bReused).Get(reusedKey(repo, sha)))
		return nil
	})
	return h, h.RunID > 0
}

// decodeReused reads a skipped head's key: the run (8 bytes), then, once
// the skip was overridden, when (8 bytes of Unix nanoseconds).
func decodeReused(v []byte) record.SkippedHead {
	var h record.SkippedHead
	if len(v) >= 8 {
		h.RunID = int64(binary.BigEndian.Uint64(v))
	}
	if len(v) >= 16 {
		h.OverriddenAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[8:16])))
	}
	return h
}

// Decisions lists a PR's decisions (in key order: by head SHA).
func (s *Store) Decisions(repo string, pr int) ([]Decision, error) {
	var out []Decision
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := prBucket(tx, repo, pr, false)
		if err != nil || b == nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(pDec)); k != nil && len(k) > len(pDec) && string(k[:len(pDec)]) == pDec; k, v = c.Next() {
			var d Decision
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// ErrNotSkipped is an override of a head that has no skip to override.
var ErrNotSkipped = errors.New("state: the head has no skip decision to override")

// OverrideDecision marks the skip of a PR's head overridden by login
// (record.Tx).
func (t *Tx) OverrideDecision(repo string, pr int, sha, login string) error {
	d, err := getDecision(t.tx, repo, pr, sha)
	if err != nil {
		return err
	}
	if d == nil || d.Decision != Skip {
		return fmt.Errorf("%w: %s#%d@%s", ErrNotSkipped, repo, pr, sha)
	}
	if d.OverriddenBy != "" {
		return nil // asked already
	}
	d.OverriddenBy, d.OverriddenAt = login, t.now()
	b, err := prBucket(t.tx, repo, pr, true)
	if err != nil {
		return err
	}
	if err := putJSON(b, decKey(d.HeadSHA), d); err != nil {
		return err
	}
	// The head sweeps after all: a run's attempt made from now on measures
	// it (the one that was skipped measured nothing, and stays so), and
	// the skip saved nothing.
	v := binary.BigEndian.AppendUint64(u64(uint64(d.RunID)), uint64(d.OverriddenAt.UnixNano()))
	if err := t.tx.Bucket(bReused).Put(reusedKey(d.Repo, d.HeadSHA), v); err != nil {
		return err
	}
	return unSaved(t.tx, d)
}
