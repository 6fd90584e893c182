package auth

import (
	"context"
	"strings"
	"sync"
)

// UserLookup resolves a login to the id of the account that holds it now.
type UserLookup interface {
	UserID(ctx context.Context, login string) (int64, error)
}

// Directory holds the account ids that allow_users logins are bound to. A
// login is bound to an account once, the first time it resolves, and the
// binding is kept (in the database, across restarts): a later owner of the
// login (after a rename) is not the account the configuration meant. Each
// login is looked up once per process (at start, or for a repository whose
// GitHub client is only known from its first webhook, then). A login that
// could not be resolved allows nobody (fail closed) until the next start.
type Directory struct {
	// Record, when set, is told every new resolution (err is set when the
	// login did not resolve): the caller keeps it in the database and logs it.
	Record func(login string, id int64, err error)
	// Stored, when set, gives the account a login was bound to before; ok
	// is false when it never resolved. A stored binding is kept whatever
	// GitHub answers now.
	Stored func(login string) (id int64, ok bool)
	// Disagree, when set, is told that GitHub's answer now for a bound
	// login (now, or err when it did not resolve) is not the stored account.
	Disagree func(login string, stored, now int64, err error)

	mu  sync.Mutex
	ids map[string]resolved // by lower-case login
}

type resolved struct {
	id int64 // 0: did not resolve
}

// Resolve looks up, once each, the logins never looked up before. A
// failure is remembered like a success: that login allows nobody.
func (d *Directory) Resolve(ctx context.Context, l UserLookup, logins []string) {
	for _, login := range logins {
		k := strings.ToLower(login)
		d.mu.Lock()
		_, done := d.ids[k]
		d.mu.Unlock()
		if done {
			continue
		}
		id, err := l.UserID(ctx, login)
		if err == nil && id <= 0 {
			err = errNoID
		}
		if err != nil {
			id = 0
		}
		if d.Stored != nil {
			if stored, ok := d.Stored(login); ok && stored > 0 {
				if (err != nil || id != stored) && d.Disagree != nil {
					d.Disagree(login, stored, id, err)
				}
				d.mu.Lock()
				if d.ids == nil {
					d.ids = map[string]resolved{}
				}
				if _, raced := d.ids[k]; !raced {
					d.ids[k] = resolved{id: stored}
				}
				d.mu.Unlock()
				continue
			}
		}
		d.mu.Lock()
		if d.ids == nil {
			d.ids = map[string]resolved{}
		}
		_, raced := d.ids[k]
		if !raced {
			d.ids[k] = resolved{id: id}
		}
		d.mu.Unlock()
		if !raced && d.Record != nil {
			d.Record(login, id, err)
		}
	}
}

type noIDError struct{}

func (noIDError) Error() string { return "auth: GitHub's answer names no account id" }

var errNoID error = noIDError{}

// IDs returns the account ids the logins resolved to, leaving out those
// that did not resolve or were never looked up.
func (d *Directory) IDs(logins []string) []int64 {
	if d == nil || len(logins) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int64
	for _, login := range logins {
		if r := d.ids[strings.ToLower(login)]; r.id != 0 {
			out = append(out, r.id)
		}
	}
	return out
}
