package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	kActive = []byte("active")
	kInfo   = []byte("info")
	pPin    = "pin:"
	pDec    = "dec:"
)

// prBucket returns (creating when write) the bucket of one PR.
func prBucket(tx *bolt.Tx, repo string, pr int, write bool) (*bolt.Bucket, error) {
	root := tx.Bucket(bPRs)
	rk := repoKey(repo)
	rb := root.Bucket(rk)
	if rb == nil {
		if !write {
			return nil, nil
		}
		var err error
		if rb, err = root.CreateBucket(rk); err != nil {
			return nil, err
		}
	}
	pk := u64(uint64(pr))
	b := rb.Bucket(pk)
	if b == nil && write {
		return rb.CreateBucket(pk)
	}
	return b, nil
}

func pinKey(id uint64) []byte { return append([]byte(pPin), u64(id)...) }

// ActivePin returns the PR's active pin, if any.
func (t *Tx) ActivePin(repo string, pr int) (*Pin, error) {
	return activePin(t.tx, repo, pr)
}

func activePin(tx *bolt.Tx, repo string, pr int) (*Pin, error) {
	b, err := prBucket(tx, repo, pr, false)
	if err != nil || b == nil {
		return nil, err
	}
	id := b.Get(kActive)
	if id == nil {
		return nil, nil
	}
	var p Pin
	ok, err := getJSON(b, append([]byte(pPin), id...), &p)
	if err != nil || !ok {
		return nil, err
	}
	if p.State != PinActive {
		return nil, nil
	}
	return &p, nil
}

// Pins lists every pin of a PR, oldest first.
func (s *Store) Pins(repo string, pr int) ([]Pin, error) {
	var out []Pin
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := prBucket(tx, repo, pr, false)
		if err != nil || b == nil {
			return err
		}
		c := b.Cursor()
		for k, v := c.Seek([]byte(pPin)); k != nil && len(k) == len(pPin)+8 && string(k[:len(pPin)]) == pPin; k, v = c.Next() {
			var p Pin
			if err := json.Unmarshal(v, &p); err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// ActivePin reads a PR's active pin outside a write.
func (s *Store) ActivePin(repo string, pr int) (*Pin, error) {
	var p *Pin
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		p, err = activePin(tx, repo, pr)
		return err
	})
	return p, err
}

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
		return t.tx.Bucket(bRepos).Put(reusedKey(d.Repo, d.HeadSHA), u64(uint64(d.RunID)))
	}
	return nil
}

// decKey is a decision's key in its PR's bucket. A commit is one commit
// however its SHA is spelled: the key is lower-case.
func decKey(sha string) []byte { return []byte(pDec + strings.ToLower(sha)) }

func reusedKey(repo, sha string) []byte {
	return []byte("reused\x00" + string(repoKey(repo)) + "\x00" + strings.ToLower(sha))
}

// ReusedRun returns the run a skipped head reused, if opsbot skipped it.
//
// It only reads one key; the one error bbolt can give here is a closed
// database, which answers "not known": the hint in a reply is lost, a
// decision never depends on it.
func (s *Store) ReusedRun(repo, sha string) (int64, bool) {
	var id int64
	_ = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bRepos).Get(reusedKey(repo, sha)); v != nil {
			id = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return id, id > 0
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

// PRInfo reads what is known of a PR.
func (t *Tx) PRInfo(repo string, pr int) (*PRInfo, error) {
	b, err := prBucket(t.tx, repo, pr, false)
	if err != nil || b == nil {
		return nil, err
	}
	var p PRInfo
	ok, err := getJSON(b, kInfo, &p)
	if err != nil || !ok {
		return nil, err
	}
	return &p, nil
}

// PutPRInfo records what is known of a PR.
func (t *Tx) PutPRInfo(p *PRInfo) error {
	b, err := prBucket(t.tx, p.Repo, p.PR, true)
	if err != nil {
		return err
	}
	p.Updated = t.now()
	return putJSON(b, kInfo, p)
}

// PRInfo reads what is known of a PR outside a write.
func (s *Store) PRInfo(repo string, pr int) (*PRInfo, error) {
	var p *PRInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		p, err = (&Tx{tx: tx, now: s.now}).PRInfo(repo, pr)
		return err
	})
	return p, err
}

// A comment's seen mark (bComments) is 8 bytes (unix time) once a `created`
// delivery of it was processed (its commands run, or it had none), or those 8
// bytes and a letter once an `edited` (markEdited) or `deleted` (markDeleted)
// webhook named it before any `created` delivery was processed. Recovery runs
// only comments with no mark, and gives those it lists and does not run the
// processed mark; a `created` delivery runs a comment unless it was processed
// before, and after an edit or a deletion runs at most what the comment still
// says (events.Handler).
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

// NoteComments records, in one write, comments recovery saw and does not
// run as processed (a `created` delivery of one that comes later, late,
// redelivered or replayed, runs nothing), with the audit records that say why.
func (s *Store) NoteComments(repo string, commentIDs []int64, audit []AuditRecord) error {
	if len(commentIDs) == 0 && len(audit) == 0 {
		return nil
	}
	return s.Update(func(t *Tx) error {
		for _, id := range commentIDs {
			if _, err := t.CommentSeen(repo, id); err != nil {
				return err
			}
		}
		for _, r := range audit {
			if err := t.Audit(r); err != nil {
				return err
			}
		}
		return nil
	})
}
