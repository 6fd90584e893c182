package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// SavedWeek is what a repository's skips saved in one ISO week (UTC): how
// many pushes skipped their sweep, and the runner and GPU time of the runs
// they reused.
type SavedWeek struct {
	Repo          string `json:"repo"`
	Week          string `json:"week"` // 2026-W49
	Skips         int    `json:"skips"`
	RunnerSeconds int64  `json:"runner_seconds"`
	GPUSeconds    int64  `json:"gpu_seconds"`
}

// Week is t's ISO week (UTC), as SavedWeek names it.
func Week(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}

func savedKey(repo, week string) []byte {
	return append(append(repoKey(repo), 0), week...)
}

// addSaved counts a skip in its repository's week, in the transaction
// that stores it.
func addSaved(tx *bolt.Tx, d *record.Decision) error {
	b := tx.Bucket(bSaved)
	k := savedKey(d.Repo, Week(d.DecidedAt))
	var w SavedWeek
	if _, err := getJSON(b, k, &w); err != nil {
		return err
	}
	w.Repo, w.Week = d.Repo, Week(d.DecidedAt)
	w.Skips++
	w.RunnerSeconds += d.RunnerSeconds
	w.GPUSeconds += d.GPUSeconds
	return putJSON(b, k, &w)
}

// Saved lists what the skips saved, by repository and week, oldest week
// first: of repo ("" every repository), from the week holding since on
// (zero: every week).
func (s *Store) Saved(repo string, since time.Time) ([]SavedWeek, error) {
	var out []SavedWeek
	from := ""
	if !since.IsZero() {
		from = Week(since)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bSaved)
		if b == nil {
			return nil // a database opened read-only before the totals existed
		}
		c := b.Cursor()
		prefix := []byte(nil)
		if repo != "" {
			prefix = append(repoKey(repo), 0)
		}
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var w SavedWeek
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("state: reading the saved time of %q: %w", k, err)
			}
			if w.Week >= from {
				out = append(out, w)
			}
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Repo != out[j].Repo {
			return out[i].Repo < out[j].Repo
		}
		return out[i].Week < out[j].Week
	})
	return out, err
}

// unSaved takes a skip that was overridden back out of its week's totals.
func unSaved(tx *bolt.Tx, d *record.Decision) error {
	b := tx.Bucket(bSaved)
	k := savedKey(d.Repo, Week(d.DecidedAt))
	var w SavedWeek
	ok, err := getJSON(b, k, &w)
	if err != nil || !ok {
		return err
	}
	w.Skips = max(0, w.Skips-1)
	w.RunnerSeconds = max(0, w.RunnerSeconds-d.RunnerSeconds)
	w.GPUSeconds = max(0, w.GPUSeconds-d.GPUSeconds)
	return putJSON(b, k, &w)
}
