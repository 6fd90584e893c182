package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PRSummary is one PR's line on the audit page.
type PRSummary struct {
	Repo         string    `json:"repo"`
	PR           int       `json:"pr"`
	Info         *PRInfo   `json:"info,omitempty"`
	ActivePin    *Pin      `json:"active_pin,omitempty"`
	LastDecision *Decision `json:"last_decision,omitempty"`
	Decisions    int       `json:"decisions"`
	Pins         int       `json:"pins"`
}

// PRSummaries lists a repository's PRs, highest number first, starting
// below before (0: from the top), at most limit. It walks the PR buckets
// with a cursor, so a page costs its own PRs, not all of them. next is the
// value of before for the following page (0 when there is none).
func (s *Store) PRSummaries(repo string, before, limit int) (out []PRSummary, next int, err error) {
	if limit <= 0 {
		limit = 50
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bPRs).Bucket(repoKey(repo))
		if rb == nil {
			return nil
		}
		c := rb.Cursor()
		var k, v []byte
		if before > 0 {
			k, v = c.Seek(u64(uint64(before)))
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && (len(k) != 8 || binary.BigEndian.Uint64(k) >= uint64(before)) {
				k, v = c.Prev()
			}
		} else {
			k, v = c.Last()
		}
		for ; k != nil; k, v = c.Prev() {
			if v != nil || len(k) != 8 {
				continue // not a PR bucket
			}
			if len(out) == limit {
				next = out[len(out)-1].PR
				return nil
			}
			sum, err := summarize(rb.Bucket(k), repo, int(binary.BigEndian.Uint64(k)))
			if err != nil {
				return err
			}
			out = append(out, sum)
		}
		return nil
	})
	return out, next, err
}

func summarize(b *bolt.Bucket, repo string, pr int) (PRSummary, error) {
	sum := PRSummary{Repo: repo, PR: pr}
	var info PRInfo
	if ok, err := getJSON(b, kInfo, &info); err != nil {
		return sum, err
	} else if ok {
		sum.Info = &info
	}
	var active []byte
	if id := b.Get(kActive); id != nil {
		active = append([]byte(pPin), id...)
	}
	err := b.ForEach(func(k, v []byte) error {
		switch {
		case len(k) > len(pDec) && string(k[:len(pDec)]) == pDec:
			sum.Decisions++
			var d Decision
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			if sum.LastDecision == nil || d.DecidedAt.After(sum.LastDecision.DecidedAt) {
				sum.LastDecision = &d
			}
		case len(k) == len(pPin)+8 && string(k[:len(pPin)]) == pPin:
			sum.Pins++
			if active != nil && string(k) == string(active) {
				var p Pin
				if err := json.Unmarshal(v, &p); err != nil {
					return err
				}
				if p.State == PinActive {
					sum.ActivePin = &p
				}
			}
		}
		return nil
	})
	return sum, err
}

// Timeline is everything the audit page shows of one PR.
type Timeline struct {
	Summary   PRSummary  `json:"summary"`
	Decisions []Decision `json:"decisions"` // oldest first
	Pins      []Pin      `json:"pins"`      // oldest first
}

// PRTimeline reads one PR's decisions and pins.
func (s *Store) PRTimeline(repo string, pr int) (Timeline, error) {
	var tl Timeline
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := prBucket(tx, repo, pr, false)
		if err != nil || b == nil {
			return err
		}
		if tl.Summary, err = summarize(b, repo, pr); err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			switch {
			case len(k) > len(pDec) && string(k[:len(pDec)]) == pDec:
				var d Decision
				if err := json.Unmarshal(v, &d); err != nil {
					return err
				}
				tl.Decisions = append(tl.Decisions, d)
			case len(k) == len(pPin)+8 && string(k[:len(pPin)]) == pPin:
				var p Pin
				if err := json.Unmarshal(v, &p); err != nil {
					return err
				}
				tl.Pins = append(tl.Pins, p)
			}
			return nil
		})
	})
	sort.Slice(tl.Decisions, func(i, j int) bool { return tl.Decisions[i].DecidedAt.Before(tl.Decisions[j].DecidedAt) })
	return tl, err
}

// CommentKnown reports whether opsbot has seen a comment at all: processed
// its `created` delivery (with commands or without), or noted it otherwise.
func (s *Store) CommentKnown(repo string, commentID int64) (bool, error) {
	known := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if rb := tx.Bucket(bComments).Bucket(repoKey(repo)); rb != nil {
			known = rb.Get(u64(uint64(commentID))) != nil
		}
		return nil
	})
	return known, err
}

// PRsWithActivePin lists the PRs of a repository that hold an active pin.
func (s *Store) PRsWithActivePin(repo string) ([]int, error) {
	var out []int
	err := s.db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bPRs).Bucket(repoKey(repo))
		if rb == nil {
			return nil
		}
		return rb.ForEachBucket(func(k []byte) error {
			if len(k) == 8 && rb.Bucket(k).Get(kActive) != nil {
				out = append(out, int(binary.BigEndian.Uint64(k)))
			}
			return nil
		})
	})
	return out, err
}

// ReconciledAt is when a repository was last reconciled (zero: never).
func (s *Store) ReconciledAt(repo string) (time.Time, error) {
	var t time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bRepos).Get([]byte("reconciled\x00" + string(repoKey(repo)))); v != nil {
			return t.UnmarshalText(v)
		}
		return nil
	})
	return t, err
}

// SetReconciledAt records when a repository was reconciled.
func (s *Store) SetReconciledAt(repo string, t time.Time) error {
	return s.update(func(tx *bolt.Tx) error {
		v, err := t.UTC().MarshalText()
		if err != nil {
			return err
		}
		return tx.Bucket(bRepos).Put([]byte("reconciled\x00"+string(repoKey(repo))), v)
	})
}

// ForgetReconciled makes a database copy (a backup) forget when each
// repository was reconciled, so the first reconcile of a database restored
// from it records the comments it finds as seen instead of replaying what
// the lost database may have run already. No server may hold the file.
func ForgetReconciled(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bRepos)
		if b == nil {
			return errors.New("no repos bucket: not an opsbot database")
		}
		prefix := []byte("reconciled\x00")
		var doomed [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			doomed = append(doomed, bytes.Clone(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// RepoInstallation is the GitHub App installation last seen for a repository (0: none).
func (s *Store) RepoInstallation(repo string) (int64, error) {
	var id int64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bRepos).Get([]byte("installation\x00" + string(repoKey(repo)))); v != nil {
			id = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return id, err
}

// SetRepoInstallation records a repository's installation.
func (s *Store) SetRepoInstallation(repo string, id int64) error {
	return s.update(func(tx *bolt.Tx) error { return putInstallation(tx, repo, id) })
}

// SetRepoInstallation records a repository's installation with the rest of
// the transaction; unchanged, nothing is written.
func (t *Tx) SetRepoInstallation(repo string, id int64) error {
	k := []byte("installation\x00" + string(repoKey(repo)))
	if v := t.tx.Bucket(bRepos).Get(k); v != nil && int64(binary.BigEndian.Uint64(v)) == id {
		return nil
	}
	return putInstallation(t.tx, repo, id)
}

func putInstallation(tx *bolt.Tx, repo string, id int64) error {
	return tx.Bucket(bRepos).Put([]byte("installation\x00"+string(repoKey(repo))), u64(uint64(id)))
}

func allowedUserKey(login string) []byte { return []byte("user\x00" + strings.ToLower(login)) }

// PutAllowedUser records the latest resolution of an allow_users login.
func (s *Store) PutAllowedUser(u AllowedUser) error {
	if u.ResolvedAt.IsZero() {
		u.ResolvedAt = s.now()
	}
	return s.update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bRepos), allowedUserKey(u.Login), u) })
}

// AllowedUser returns the latest resolution of an allow_users login, nil
// when it was never resolved.
func (s *Store) AllowedUser(login string) (*AllowedUser, error) {
	var u AllowedUser
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bRepos), allowedUserKey(login), &u)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return &u, nil
}

// AllowedUsers returns every recorded allow_users login, by login.
func (s *Store) AllowedUsers() ([]AllowedUser, error) {
	var out []AllowedUser
	prefix := []byte("user\x00")
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bRepos).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var u AllowedUser
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("state: allowed user %q: %w", k[len(prefix):], err)
			}
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

// DeleteAllowedUser forgets a login's recorded account.
func (s *Store) DeleteAllowedUser(login string) error {
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bRepos).Delete(allowedUserKey(login)) })
}
