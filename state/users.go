package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

func allowedUserKey(login string) []byte { return []byte("user\x00" + strings.ToLower(login)) }

// PutAllowedUser records the latest resolution of an allow_users login.
func (s *Store) PutAllowedUser(u AllowedUser) error {
	if u.ResolvedAt.IsZero() {
		u.ResolvedAt = s.now()
	}
	return s.update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bUsers), allowedUserKey(u.Login), u) })
}

// AllowedUser returns the latest resolution of an allow_users login, nil
// when it was never resolved.
func (s *Store) AllowedUser(login string) (*AllowedUser, error) {
	var u AllowedUser
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = getJSON(tx.Bucket(bUsers), allowedUserKey(login), &u)
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
		c := tx.Bucket(bUsers).Cursor()
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
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bUsers).Delete(allowedUserKey(login)) })
}
