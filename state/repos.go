package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ReconciledAt is when a repository was last reconciled (zero: never).
func (s *Store) ReconciledAt(repo string) (time.Time, error) {
	var t time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bReconciled).Get([]byte("reconciled\x00" + string(repoKey(repo)))); v != nil {
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
		return tx.Bucket(bReconciled).Put([]byte("reconciled\x00"+string(repoKey(repo))), v)
	})
}

// ForgetOnCopy makes a database copy (a backup) forget what a database
// restored from it must not trust: when each repository was reconciled, so
// its first reconcile records the comments it finds as seen instead of
// replaying what the lost database may have run already; and the buttons
// offered, so a click used since the copy, captured and sent again, is a
// button opsbot does not know instead of one unused. No server may hold the
// file.
func ForgetOnCopy(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// The file may be of schema 4 (its own bucket) or older (the
		// shared repos bucket): a backup is opened as it was written.
		var found bool
		for _, name := range [][]byte{bReconciled, bRepos} {
			b := tx.Bucket(name)
			if b == nil {
				continue
			}
			found = true
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
		}
		if !found {
			return errors.New("no reconciled bucket: not an opsbot database")
		}
		if tx.Bucket(bOffers) != nil {
			if err := tx.DeleteBucket(bOffers); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(bOffers); err != nil {
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
		if v := tx.Bucket(bInstallations).Get([]byte("installation\x00" + string(repoKey(repo)))); v != nil {
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
	if v := t.tx.Bucket(bInstallations).Get(k); v != nil && int64(binary.BigEndian.Uint64(v)) == id {
		return nil
	}
	return putInstallation(t.tx, repo, id)
}

func putInstallation(tx *bolt.Tx, repo string, id int64) error {
	return tx.Bucket(bInstallations).Put([]byte("installation\x00"+string(repoKey(repo))), u64(uint64(id)))
}
