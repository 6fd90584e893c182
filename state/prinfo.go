package state

import (
	"bytes"
	"encoding/binary"
	"strings"

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

// PutPRInfo records what is known of a PR, and keeps the index from its
// head to it (PRsOfHead) in step.
func (t *Tx) PutPRInfo(p *PRInfo) error {
	b, err := prBucket(t.tx, p.Repo, p.PR, true)
	if err != nil {
		return err
	}
	var old PRInfo
	if _, err := getJSON(b, kInfo, &old); err != nil {
		return err
	}
	if !strings.EqualFold(old.HeadSHA, p.HeadSHA) {
		heads := t.tx.Bucket(bHeads)
		if old.HeadSHA != "" {
			if err := heads.Delete(headKey(p.Repo, old.HeadSHA, p.PR)); err != nil {
				return err
			}
		}
		if p.HeadSHA != "" {
			if err := heads.Put(headKey(p.Repo, p.HeadSHA, p.PR), nil); err != nil {
				return err
			}
		}
	}
	p.Updated = t.now()
	return putJSON(b, kInfo, p)
}

// headKey is the index key of a PR whose recorded head is sha: repo \0
// sha \0 pr(8), the repository and the SHA in lower case.
func headKey(repo, sha string, pr int) []byte {
	return append(headPrefix(repo, sha), u64(uint64(pr))...)
}

func headPrefix(repo, sha string) []byte {
	k := append(repoKey(repo), 0)
	k = append(k, strings.ToLower(sha)...)
	return append(k, 0)
}

// PRsOfHead lists, in order, the PRs of repo whose head opsbot last
// recorded as sha (a branch may be the head of several PRs, into other
// bases): how an event that names only a commit (a status, a check suite,
// a check run) finds the PR that orders it.
func (s *Store) PRsOfHead(repo, sha string) ([]int, error) {
	var out []int
	err := s.db.View(func(tx *bolt.Tx) error {
		out = prsOfHead(tx, repo, sha)
		return nil
	})
	return out, err
}

func prsOfHead(tx *bolt.Tx, repo, sha string) []int {
	var out []int
	p := headPrefix(repo, sha)
	c := tx.Bucket(bHeads).Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && len(k) == len(p)+8; k, _ = c.Next() {
		out = append(out, int(binary.BigEndian.Uint64(k[len(p):])))
	}
	return out
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
