package state

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// buttonKey is repo \0 check run(8) \0 action.
func buttonKey(repo string, checkRun int64, action string) []byte {
	k := append(repoKey(repo), 0)
	k = binary.BigEndian.AppendUint64(k, uint64(checkRun))
	k = append(k, 0)
	return append(k, action...)
}

// UseButton records a check run's button as used, once (record.Tx): a
// button used before is an error wrapping record.ErrButtonUsed, and
// nothing is written.
func (t *Tx) UseButton(b record.ButtonUse) error {
	bk := t.tx.Bucket(bButtons)
	k := buttonKey(b.Repo, b.CheckRun, b.Action)
	if bk.Get(k) != nil {
		return fmt.Errorf("%w: check run %d's %s of %s", record.ErrButtonUsed, b.CheckRun, b.Action, b.Repo)
	}
	if b.At.IsZero() {
		b.At = t.now()
	}
	return putJSON(bk, k, b)
}

// ButtonUse reads how a check run's button was used (nil: never).
func (s *Store) ButtonUse(repo string, checkRun int64, action string) (*record.ButtonUse, error) {
	var out *record.ButtonUse
	err := s.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bButtons)
		if bk == nil {
			return nil // a database opened read-only before buttons were kept
		}
		var b record.ButtonUse
		ok, err := getJSON(bk, buttonKey(repo, checkRun, action), &b)
		if err != nil || !ok {
			return err
		}
		out = &b
		return nil
	})
	return out, err
}
