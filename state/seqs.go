package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// ErrSeqChanged is a sequence write that named a version the sequence no
// longer has (or a new sequence where one is recorded): someone moved it
// meanwhile, and the writer decides again from what is stored now.
var ErrSeqChanged = errors.New("state: the sequence changed since it was read")

const pSeq = "seq:"

func seqKey(kind string) []byte { return []byte(pSeq + kind) }

// wakeKey orders the wake index by time: wake unix nanos(8) pr(8) repo \0 kind.
func wakeKey(at time.Time, repo string, pr int, kind string) []byte {
	k := make([]byte, 0, 16+len(repo)+1+len(kind))
	k = binary.BigEndian.AppendUint64(k, uint64(max(at.UnixNano(), 0)))
	k = binary.BigEndian.AppendUint64(k, uint64(pr))
	k = append(k, repoKey(repo)...)
	k = append(k, 0)
	return append(k, kind...)
}

// Sequence returns the PR's sequence of a kind, if any (done or not).
func (t *Tx) Sequence(repo string, pr int, kind string) (*Sequence, error) {
	return sequence(t.tx, repo, pr, kind)
}

func sequence(tx *bolt.Tx, repo string, pr int, kind string) (*Sequence, error) {
	b, err := prBucket(tx, repo, pr, false)
	if err != nil || b == nil {
		return nil, err
	}
	var s Sequence
	ok, err := getJSON(b, seqKey(kind), &s)
	if err != nil || !ok {
		return nil, err
	}
	return &s, nil
}

// PutSequence writes s as the next version of the PR's sequence of its
// kind, provided the stored one is still at version read (0: none is
// stored, or only a done one); otherwise ErrSeqChanged and nothing is
// written. It keeps the wake index: a sequence not done is due at its
// wake-up time or its deadline, whichever comes first (record.DueAt).
// s.Version becomes the version written.
func (t *Tx) PutSequence(s *Sequence, read uint64) error {
	if s.Kind == "" || s.Repo == "" || s.PR < 0 {
		return fmt.Errorf("state: a sequence needs a kind, a repository and a PR, or PR 0 for the repository's own (%q %q %d)", s.Kind, s.Repo, s.PR)
	}
	if len(s.Commits) > record.MaxCommits || slices.ContainsFunc(s.Commits, func(c string) bool { return !fullSHA(c) }) {
		return fmt.Errorf("state: a sequence watches at most %d commits, each a full SHA (%q)", record.MaxCommits, s.Commits)
	}
	cur, err := sequence(t.tx, s.Repo, s.PR, s.Kind)
	if err != nil {
		return err
	}
	switch {
	case cur == nil && read != 0, cur != nil && cur.Version != read && !(read == 0 && cur.Done):
		return fmt.Errorf("%w: %s %s#%d", ErrSeqChanged, s.Kind, s.Repo, s.PR)
	}
	wake := t.tx.Bucket(bSeqWake)
	if cur != nil {
		if due := record.DueAt(cur); !due.IsZero() {
			if err := wake.Delete(wakeKey(due, cur.Repo, cur.PR, cur.Kind)); err != nil {
				return err
			}
		}
	}
	now := t.now()
	if cur == nil || cur.Done {
		s.Started = now
	}
	if cur != nil && cur.Done && cur.Holds() && read == 0 {
		s.Left = keepLeft(s.Left, cur.Left) // a sequence begun over a done one deletes what that one left
	}
	if cur != nil {
		s.Version = cur.Version + 1
	} else {
		s.Version = 1
	}
	s.V, s.Updated = 1, now
	switch {
	case s.Done && !s.Holds():
		s.WakeAt = time.Time{}
	case s.Done && s.WakeAt.IsZero():
		s.WakeAt = now // what it left is deleted at once
	}
	b, err := prBucket(t.tx, s.Repo, s.PR, true)
	if err != nil {
		return err
	}
	if err := putJSON(b, seqKey(s.Kind), s); err != nil {
		return err
	}
	if err := t.watchCommits(cur, s); err != nil {
		return err
	}
	due := record.DueAt(s)
	if due.IsZero() {
		return nil
	}
	return wake.Put(wakeKey(due, s.Repo, s.PR, s.Kind), nil)
}

// watchCommits keeps the index of the commits live sequences watch
// (record.Sequence.Commits): was's are dropped, s's put while it is not
// done.
func (t *Tx) watchCommits(was, s *Sequence) error {
	b := t.tx.Bucket(bSeqCommits)
	if was != nil {
		for _, c := range was.Commits {
			if err := b.Delete(watchKey(was.Repo, c, was.PR, was.Kind)); err != nil {
				return err
			}
		}
	}
	if s.Done {
		return nil
	}
	for _, c := range s.Commits {
		if err := b.Put(watchKey(s.Repo, c, s.PR, s.Kind), nil); err != nil {
			return err
		}
	}
	return nil
}

// watchKey is the index key of a sequence watching sha: repo \0 sha \0
// pr(8) kind, the repository and the SHA in lower case.
func watchKey(repo, sha string, pr int, kind string) []byte {
	return append(headKey(repo, sha, pr), kind...)
}

// PRsOfCommit lists, in order, the PRs an event about sha is for: those
// whose recorded head it is (PRsOfHead), or else those with a live
// sequence that watches it (record.Sequence.Commits: a merge commit whose
// run a watch follows). How an event that names only a commit finds the
// PR that orders it.
func (s *Store) PRsOfCommit(repo, sha string) ([]int, error) {
	var out []int
	err := s.db.View(func(tx *bolt.Tx) error {
		if out = prsOfHead(tx, repo, sha); len(out) > 0 {
			return nil
		}
		var err error
		out, err = watching(tx, repo, sha)
		return err
	})
	return out, err
}

// watching lists, in order and once each, the PRs with a live sequence
// that watches sha, as the sequence itself says (an index entry a build
// that knew no Commits left behind finds nothing).
func watching(tx *bolt.Tx, repo, sha string) ([]int, error) {
	var out []int
	p := headPrefix(repo, sha)
	c := tx.Bucket(bSeqCommits).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && len(k) > len(p)+8; k, _ = c.Next() {
		pr := int(binary.BigEndian.Uint64(k[len(p) : len(p)+8]))
		if slices.Contains(out, pr) {
			continue
		}
		seq, err := sequence(tx, repo, pr, string(k[len(p)+8:]))
		if err != nil {
			return nil, err
		}
		if seq != nil && !seq.Done && slices.ContainsFunc(seq.Commits, func(c string) bool { return strings.EqualFold(c, sha) }) {
			out = append(out, pr)
		}
	}
	return out, nil
}

// WakeWatching makes the live sequences of the PRs other than pr that
// watch sha due by at, as WakeSequences does: an event about a commit that
// is one PR's head (which orders it) and another's watched merge commit
// wakes both.
func (t *Tx) WakeWatching(repo, sha string, pr int, at time.Time) error {
	prs, err := watching(t.tx, repo, sha)
	if err != nil {
		return err
	}
	for _, n := range prs {
		if n == pr {
			continue
		}
		if err := t.WakeSequences(repo, n, at); err != nil {
			return err
		}
	}
	return nil
}

// Sequence reads the PR's sequence of a kind, if any (done or not).
func (s *Store) Sequence(repo string, pr int, kind string) (*Sequence, error) {
	var out *Sequence
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = sequence(tx, repo, pr, kind)
		return err
	})
	return out, err
}

// WakeSequences makes the PR's sequences that are not done due by at
// (record.Sequences).
func (t *Tx) WakeSequences(repo string, pr int, at time.Time) error {
	b, err := prBucket(t.tx, repo, pr, false)
	if err != nil || b == nil {
		return err
	}
	var wake []Sequence
	c := b.Cursor()
	for k, v := c.Seek([]byte(pSeq)); k != nil && bytes.HasPrefix(k, []byte(pSeq)); k, v = c.Next() {
		var s Sequence
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("state: reading the sequence %s of %s#%d: %w", k, repo, pr, err)
		}
		if due := record.WakeAfterEvent(&s, at); !s.Done && (s.WakeAt.IsZero() || s.WakeAt.After(due)) {
			wake = append(wake, s)
		}
	}
	for i := range wake {
		s := wake[i]
		read := s.Version
		s.WakeAt = record.WakeAfterEvent(&s, at)
		if err := t.PutSequence(&s, read); err != nil {
			return err
		}
	}
	return nil
}

// DueSequences lists the sequences due at or before now (their wake-up
// time or their deadline, record.DueAt),
// earliest first, at most max of them, with the version that is due.
func (s *Store) DueSequences(now time.Time, max int) ([]SeqRef, error) {
	var out []SeqRef
	err := s.db.View(func(tx *bolt.Tx) error {
		wake := tx.Bucket(bSeqWake)
		if wake == nil {
			return nil // a database opened read-only before sequences existed
		}
		c := wake.Cursor()
		end := binary.BigEndian.AppendUint64(nil, uint64(max64(now.UnixNano(), 0)))
		for k, _ := c.First(); k != nil && len(out) < max; k, _ = c.Next() {
			if len(k) < 17 || bytes.Compare(k[:8], end) > 0 {
				break
			}
			pr := int(binary.BigEndian.Uint64(k[8:16]))
			repo, kind, ok := bytes.Cut(k[16:], []byte{0})
			if !ok {
				return fmt.Errorf("state: corrupt wake-up key %x", k)
			}
			seq, err := sequence(tx, string(repo), pr, string(kind))
			if err != nil {
				return err
			}
			if seq == nil || (seq.Done && !seq.Holds()) || !record.DueAt(seq).Equal(time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))) {
				continue // a key no write keeps (a build that did not clean up): nothing to wake
			}
			out = append(out, SeqRef{Repo: seq.Repo, PR: pr, Kind: seq.Kind, Version: seq.Version})
		}
		return nil
	})
	return out, err
}

// keepLeft is mine with what was left before that mine does not name.
func keepLeft(mine, before []record.Leftover) []record.Leftover {
	out := append([]record.Leftover(nil), mine...)
	for _, l := range before {
		if !slices.ContainsFunc(out, func(m record.Leftover) bool { return m.Branch == l.Branch }) {
			out = append(out, l)
		}
	}
	return out
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// seqsDueIndexed (schema 6 to 7) builds the wake index again from the
// sequences: a sequence is due at its wake-up time or its deadline,
// whichever comes first (record.DueAt), where schema 6 indexed the wake-up
// time alone, so a deadline without a wake-up never fired.
func seqsDueIndexed(tx *bolt.Tx) error {
	if err := tx.DeleteBucket(bSeqWake); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
		return err
	}
	wake, err := tx.CreateBucket(bSeqWake)
	if err != nil {
		return err
	}
	root := tx.Bucket(bPRs)
	return root.ForEachBucket(func(repo []byte) error {
		rb := root.Bucket(repo)
		return rb.ForEachBucket(func(pr []byte) error {
			c := rb.Bucket(pr).Cursor()
			for k, v := c.Seek([]byte(pSeq)); k != nil && bytes.HasPrefix(k, []byte(pSeq)); k, v = c.Next() {
				var s Sequence
				if err := json.Unmarshal(v, &s); err != nil {
					return fmt.Errorf("the sequence %s of PR %x of %s: %w", k, pr, repo, err)
				}
				if due := record.DueAt(&s); !due.IsZero() {
					if err := wake.Put(wakeKey(due, s.Repo, s.PR, s.Kind), nil); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
}

// LiveSequences lists the sequences of repo that are not done, in the
// order they are due. Every live sequence is in the wake index (a merge and
// an approval always have a deadline); one with neither a wake-up nor a
// deadline waits for events and is not listed.
func (s *Store) LiveSequences(repo string) ([]Sequence, error) {
	return s.indexed(repo, func(seq *Sequence) bool { return !seq.Done })
}

// SequencesHolding lists the sequences of repo, done or not, that hold
// something on GitHub (record.Sequence.Left), in the order they are due:
// every such sequence is in the wake index until it holds nothing.
func (s *Store) SequencesHolding(repo string) ([]Sequence, error) {
	return s.indexed(repo, func(seq *Sequence) bool { return seq.Holds() })
}

// indexed lists the sequences of repo in the wake index that keep says to.
func (s *Store) indexed(repo string, keep func(*Sequence) bool) ([]Sequence, error) {
	var out []Sequence
	want := repoKey(repo)
	err := s.db.View(func(tx *bolt.Tx) error {
		wake := tx.Bucket(bSeqWake)
		if wake == nil {
			return nil
		}
		return wake.ForEach(func(k, _ []byte) error {
			if len(k) < 17 {
				return fmt.Errorf("state: corrupt wake-up key %x", k)
			}
			r, kind, ok := bytes.Cut(k[16:], []byte{0})
			if !ok {
				return fmt.Errorf("state: corrupt wake-up key %x", k)
			}
			if !bytes.Equal(r, want) {
				return nil
			}
			seq, err := sequence(tx, string(r), int(binary.BigEndian.Uint64(k[8:16])), string(kind))
			if err != nil || seq == nil || !keep(seq) {
				return err
			}
			out = append(out, *seq)
			return nil
		})
	})
	return out, err
}

// WakeNow makes the sequence due now, if it is still at version v and
// due later: what waits for its next try is tried at once.
func (s *Store) WakeNow(ref SeqRef) error {
	return s.Update(func(tx *Tx) error {
		cur, err := tx.Sequence(ref.Repo, ref.PR, ref.Kind)
		if err != nil || cur == nil || cur.Version != ref.Version || !cur.WakeAt.After(tx.Now()) {
			return err
		}
		next := *cur
		next.WakeAt = tx.Now()
		return tx.PutSequence(&next, cur.Version)
	})
}

// fullSHA reports whether c is a commit's full SHA (40 hex digits).
func fullSHA(c string) bool {
	return len(c) == 40 && !strings.ContainsFunc(c, func(r rune) bool {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
	})
}
