package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// The approvals bucket holds each approval by id, the run bound to it, and
// each PR's approvals:
//
//	"id\0" repo \0 id            -> Approval
//	"run\0" repo \0 run(8)       -> id
//	"pr\0" repo \0 pr(8) id      -> nil
func approvalKey(repo, id string) []byte {
	return append(append(append([]byte("id\x00"), repoKey(repo)...), 0), id...)
}

func approvalRunKey(repo string, run int64) []byte {
	return append(append(append([]byte("run\x00"), repoKey(repo)...), 0), u64(uint64(run))...)
}

func approvalPRPrefix(repo string, pr int) []byte {
	return append(append(append([]byte("pr\x00"), repoKey(repo)...), 0), u64(uint64(pr))...)
}

// PutApproval stores a, keeping its run's binding and its PR's list.
func (t *Tx) PutApproval(a *record.Approval) error {
	if a.ID == "" || a.Repo == "" || a.PR <= 0 {
		return fmt.Errorf("state: an approval needs an id, a repository and a PR (%q %q %d)", a.ID, a.Repo, a.PR)
	}
	b := t.tx.Bucket(bApprovals)
	var had record.Approval
	if ok, err := getJSON(b, approvalKey(a.Repo, a.ID), &had); err != nil {
		return err
	} else if ok {
		if err := record.CheckApprovalMove(had.State, a.State); err != nil {
			return fmt.Errorf("approval %s of %s#%d: %w", a.ID, a.Repo, a.PR, err)
		}
		if had.RunID != 0 && a.RunID != had.RunID {
			return fmt.Errorf("%w: approval %s is bound to run %d, not %d", record.ErrRunBound, a.ID, had.RunID, a.RunID)
		}
	} else if a.State != record.ApprovalActive {
		return fmt.Errorf("%w: a new approval is active, not %s", record.ErrApprovalMoved, a.State)
	}
	if a.RunID != 0 {
		rk := approvalRunKey(a.Repo, a.RunID)
		if have := b.Get(rk); have != nil && string(have) != a.ID {
			return fmt.Errorf("%w: run %d is bound to approval %s, not %s", record.ErrRunBound, a.RunID, have, a.ID)
		}
		if err := b.Put(rk, []byte(a.ID)); err != nil {
			return err
		}
	}
	if a.At.IsZero() {
		a.At = t.now()
	}
	a.Updated = t.now()
	if err := b.Put(append(approvalPRPrefix(a.Repo, a.PR), a.ID...), nil); err != nil {
		return err
	}
	return putJSON(b, approvalKey(a.Repo, a.ID), a)
}

// Approval reads an approval by id.
func (t *Tx) Approval(repo, id string) (*record.Approval, error) { return approval(t.tx, repo, id) }

func approval(tx *bolt.Tx, repo, id string) (*record.Approval, error) {
	b := tx.Bucket(bApprovals)
	if b == nil || id == "" {
		return nil, nil // a file from before approvals, opened read-only
	}
	var a record.Approval
	ok, err := getJSON(b, approvalKey(repo, id), &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

// Approval reads an approval by id.
func (s *Store) Approval(repo, id string) (*record.Approval, error) {
	var out *record.Approval
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = approval(tx, repo, id)
		return err
	})
	return out, err
}

// ApprovalOfRun is the approval run is bound to, if any.
func (s *Store) ApprovalOfRun(repo string, run int64) (*record.Approval, error) {
	var out *record.Approval
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bApprovals)
		if b == nil {
			return nil
		}
		id := b.Get(approvalRunKey(repo, run))
		if id == nil {
			return nil
		}
		var err error
		out, err = approval(tx, repo, string(id))
		return err
	})
	return out, err
}

// Approvals lists a PR's approvals, newest first.
func (s *Store) Approvals(repo string, pr int) ([]record.Approval, error) {
	var out []record.Approval
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bApprovals)
		if b == nil {
			return nil
		}
		prefix := approvalPRPrefix(repo, pr)
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			var a record.Approval
			ok, err := getJSON(b, approvalKey(repo, string(k[len(prefix):])), &a)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Newest first: ids are not in time order.
	slices.SortStableFunc(out, func(a, b record.Approval) int { return b.At.Compare(a.At) })
	return out, nil
}

// ApprovalPR is the PR of the approval whose id title carries (a
// dispatched run's name, through the workflow's run-name), if any: 0 when
// none does.
func (s *Store) ApprovalPR(repo, title string) (int, error) {
	id := ApprovalIDIn(title)
	if id == "" {
		return 0, nil
	}
	a, err := s.Approval(repo, id)
	if err != nil || a == nil {
		return 0, err
	}
	return a.PR, nil
}

// ApprovalIDPrefix starts every approval id.
const ApprovalIDPrefix = "opsbot-approval-"

// ApprovalIDIn is the first approval id in s ("" for none): the prefix and
// 16 lower-case hex digits.
func ApprovalIDIn(s string) string {
	for {
		i := strings.Index(s, ApprovalIDPrefix)
		if i < 0 {
			return ""
		}
		rest := s[i+len(ApprovalIDPrefix):]
		if len(rest) >= 16 && isLowerHex(rest[:16]) {
			return ApprovalIDPrefix + rest[:16]
		}
		s = rest
	}
}

func isLowerHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ApprovalPRFor is the PR of the approval a workflow run was dispatched
// for: the one run is bound to, else the one whose id title carries; 0
// for none (events.Schema.Approvals).
func (s *Store) ApprovalPRFor(repo string, run int64, title string) (int, error) {
	a, err := s.ApprovalOfRun(repo, run)
	if err != nil {
		return 0, err
	}
	if a != nil {
		return a.PR, nil
	}
	return s.ApprovalPR(repo, title)
}
