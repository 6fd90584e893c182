package state

import (
	"encoding/binary"
	"encoding/json"

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

// ExpireRepoPins expires every active pin of a repository, each audited
// with why, in one transaction, and returns the pins expired. opsbot calls
// it for a repository no longer in its configuration: a pin kept while
// nothing watched the repository's pushes would cover whatever push came
// first once the repository was served again, not the one it was given for.
func (s *Store) ExpireRepoPins(repo, why string) ([]Pin, error) {
	var out []Pin
	err := s.Update(func(t *Tx) error {
		out = out[:0] // the write may run again with its group
		rb := t.tx.Bucket(bPRs).Bucket(repoKey(repo))
		if rb == nil {
			return nil
		}
		var prs []int
		if err := rb.ForEachBucket(func(k []byte) error {
			if len(k) == 8 && rb.Bucket(k).Get(kActive) != nil {
				prs = append(prs, int(binary.BigEndian.Uint64(k)))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, pr := range prs {
			p, err := activePin(t.tx, repo, pr)
			if err != nil {
				return err
			}
			if p == nil {
				continue
			}
			if err := t.Transition(p, PinExpired, PinChange{Reason: why}); err != nil {
				return err
			}
			out = append(out, *p)
		}
		return nil
	})
	return out, err
}

// ReposWithActivePins lists the repositories (as the store keys them:
// lower-case) that hold an active pin on some PR.
func (s *Store) ReposWithActivePins() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bPRs).ForEachBucket(func(rk []byte) error {
			rb := tx.Bucket(bPRs).Bucket(rk)
			return rb.ForEachBucket(func(k []byte) error {
				if len(k) == 8 && rb.Bucket(k).Get(kActive) != nil {
					if len(out) == 0 || out[len(out)-1] != string(rk) {
						out = append(out, string(rk))
					}
				}
				return nil
			})
		})
	})
	return out, err
}
