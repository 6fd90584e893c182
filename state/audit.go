package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

const auditVersion = 1

// repoKey is the case-folded repository name used in keys: GitHub names are
// case-insensitive, and '\x00' never occurs in one.
func repoKey(repo string) []byte { return []byte(strings.ToLower(repo)) }

func prPrefix(repo string, pr int) []byte {
	k := append(repoKey(repo), 0)
	return append(k, u64(uint64(pr))...)
}

func appendAuditTx(tx *bolt.Tx, r *AuditRecord) error {
	b := tx.Bucket(bAudit)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	r.V, r.Seq = auditVersion, seq
	if err := putJSON(b, u64(seq), r); err != nil {
		return err
	}
	if r.Repo != "" && r.PR > 0 {
		if err := tx.Bucket(bAuditPR).Put(append(prPrefix(r.Repo, r.PR), u64(seq)...), nil); err != nil {
			return err
		}
	}
	if r.HeadSHA != "" {
		k := append([]byte(strings.ToLower(r.HeadSHA)+"\x00"), u64(seq)...)
		if err := tx.Bucket(bAuditSHA).Put(k, nil); err != nil {
			return err
		}
	}
	if r.RunID > 0 {
		if err := tx.Bucket(bAuditRun).Put(append(u64(uint64(r.RunID)), u64(seq)...), nil); err != nil {
			return err
		}
	}
	return nil
}

// AuditQuery filters the audit. Zero fields match everything. Results come in
// sequence order, starting after After, at most Limit (default 100, max 10,000).
type AuditQuery struct {
	Repo  string
	PR    int
	SHA   string
	RunID int64
	Since time.Time
	After uint64
	Limit int
	Kind  string
}

// Audit returns the records matching q and the cursor to pass as After for
// the next page (0 when there is none). It walks an index when the query
// names a PR, a head SHA or a run, so one PR's records do not cost a scan of
// all of them.
func (s *Store) Audit(q AuditQuery) ([]AuditRecord, uint64, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 10000 {
		q.Limit = 10000
	}
	var out []AuditRecord
	var next uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		recs := tx.Bucket(bAudit)
		match := func(seq uint64) (bool, error) {
			raw := recs.Get(u64(seq))
			if raw == nil {
				return false, nil
			}
			var r AuditRecord
			if err := json.Unmarshal(raw, &r); err != nil {
				return false, err
			}
			if !q.matches(&r) {
				return false, nil
			}
			if len(out) == q.Limit {
				next = out[len(out)-1].Seq
				return true, nil
			}
			out = append(out, r)
			return false, nil
		}
		if q.SHA != "" {
			full, err := resolveSHA(tx.Bucket(bAuditSHA), q.SHA)
			if err != nil || full == "" {
				return err // no record names a commit beginning with it
			}
			q.SHA = full
		}
		// Choose an index: each yields sequence numbers in order.
		var bucket *bolt.Bucket
		var prefix []byte
		switch {
		case q.Repo != "" && q.PR > 0:
			bucket, prefix = tx.Bucket(bAuditPR), prPrefix(q.Repo, q.PR)
		case q.SHA != "":
			bucket, prefix = tx.Bucket(bAuditSHA), []byte(strings.ToLower(q.SHA)+"\x00")
		case q.RunID > 0:
			bucket, prefix = tx.Bucket(bAuditRun), u64(uint64(q.RunID))
		}
		if bucket == nil {
			c := recs.Cursor()
			from := q.After + 1
			if !q.Since.IsZero() {
				// Records are appended in time order: the first at or after
				// Since is found by bisection, not by reading every older one.
				from = max(from, firstSince(recs, q.Since))
			}
			for k, _ := c.Seek(u64(from)); k != nil; k, _ = c.Next() {
				stop, err := match(binary.BigEndian.Uint64(k))
				if err != nil || stop {
					return err
				}
			}
			return nil
		}
		c := bucket.Cursor()
		for k, _ := c.Seek(append(bytes.Clone(prefix), u64(q.After+1)...)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if len(k) != len(prefix)+8 {
				continue
			}
			stop, err := match(binary.BigEndian.Uint64(k[len(prefix):]))
			if err != nil || stop {
				return err
			}
		}
		return nil
	})
	return out, next, err
}

func (q *AuditQuery) matches(r *AuditRecord) bool {
	switch {
	case r.Seq <= q.After:
		return false
	case q.Repo != "" && !strings.EqualFold(q.Repo, r.Repo):
		return false
	case q.PR > 0 && q.PR != r.PR:
		return false
	case q.SHA != "" && !strings.EqualFold(q.SHA, r.HeadSHA):
		return false
	case q.RunID > 0 && q.RunID != r.RunID:
		return false
	case !q.Since.IsZero() && r.Time.Before(q.Since):
		return false
	case q.Kind != "" && q.Kind != string(r.Kind):
		return false
	}
	return true
}

// AmbiguousSHAError is Audit's answer for a SHA prefix that begins more
// than one commit the audit names.
type AmbiguousSHAError struct {
	Prefix  string
	Matches []string // the commits it begins (at most maxSHAMatches), in order
	More    bool     // there are more than Matches
}

func (e *AmbiguousSHAError) Error() string {
	more := ""
	if e.More {
		more = ", …"
	}
	return fmt.Sprintf("sha %s is ambiguous: it begins %s%s; give more characters", e.Prefix, strings.Join(e.Matches, ", "), more)
}

// maxSHAMatches is how many commits an AmbiguousSHAError lists.
const maxSHAMatches = 10

// resolveSHA finds the one commit in the index by head SHA that sha names:
// itself when the index has it, else the only commit it is a prefix of
// (case-insensitive). "" is no commit; more than one is AmbiguousSHAError.
func resolveSHA(idx *bolt.Bucket, sha string) (string, error) {
	p := []byte(strings.ToLower(sha))
	c := idx.Cursor()
	if k, _ := c.Seek(append(bytes.Clone(p), 0)); k != nil && bytes.HasPrefix(k, append(bytes.Clone(p), 0)) {
		return string(p), nil
	}
	var found []string
	more := false
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); {
		end := bytes.IndexByte(k, 0)
		if end < 0 {
			k, _ = c.Next()
			continue
		}
		if len(found) == maxSHAMatches {
			more = true
			break
		}
		found = append(found, string(k[:end]))
		// Past every record of this commit: its key, then \x01.
		k, _ = c.Seek(append(bytes.Clone(k[:end]), 1))
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", &AmbiguousSHAError{Prefix: sha, Matches: found, More: more}
}

// AuditKinds are every kind of audit record opsbot writes.
var AuditKinds = func() []string {
	var out []string
	for _, k := range record.AuditKinds {
		out = append(out, string(k))
	}
	return out
}()

// firstSince is the lowest sequence number of a record at or after since,
// by bisection over the sequence numbers (records are appended as they
// happen, so their times rise with them); a record that cannot be read
// ends the search low, which only costs a longer scan.
func firstSince(recs *bolt.Bucket, since time.Time) uint64 {
	c := recs.Cursor()
	k, _ := c.Last()
	if k == nil {
		return 1
	}
	lo, hi := uint64(1), binary.BigEndian.Uint64(k)
	for lo < hi {
		mid := lo + (hi-lo)/2
		mk, raw := c.Seek(u64(mid))
		if mk == nil {
			hi = mid
			continue
		}
		var r struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return lo
		}
		if r.Time.Before(since) {
			lo = binary.BigEndian.Uint64(mk) + 1
		} else {
			hi = mid
		}
	}
	return lo
}
