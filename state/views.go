package state

import (
	"encoding/binary"
	"encoding/json"
	"sort"

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
			if v != nil || len(k) != 8 || binary.BigEndian.Uint64(k) == 0 {
				continue // not a PR bucket (PR 0 holds the repository's own sequences)
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
