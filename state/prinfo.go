package state

import (
	bolt "go.etcd.io/bbolt"
)

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
