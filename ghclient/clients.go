package ghclient

import (
	"strings"
	"sync"
)

// InstallationStore is where the installations learnt from webhooks are
// kept, so an ask right after a restart finds its repository's.
type InstallationStore interface {
	RepoInstallation(repo string) (int64, error)
}

// Clients is the one way to a GitHub client: for an installation (a
// webhook names it) or for a repository (its installation as last seen in
// a webhook). It remembers each repository's installation.
type Clients struct {
	factory *Factory
	store   InstallationStore

	mu sync.Mutex
	m  map[string]int64 // lower-cased repo -> installation
}

// NewClients hands out the factory's clients; store may be nil (nothing
// is remembered across restarts).
func NewClients(f *Factory, store InstallationStore) *Clients {
	return &Clients{factory: f, store: store, m: map[string]int64{}}
}

// Factory is the factory the clients come from.
func (c *Clients) Factory() *Factory { return c.factory }

// For is the client of an installation (0: the token's, or the configured
// installation's).
func (c *Clients) For(installation int64) (*Client, error) { return c.factory.For(installation) }

// ForRepo is the client of a repository's installation as last seen.
func (c *Clients) ForRepo(repo string) (*Client, error) { return c.factory.For(c.Installation(repo)) }

// Installation is a repository's installation, 0 when unknown (asks then
// use the token's or configured installation's client, or fail closed).
func (c *Clients) Installation(repo string) int64 {
	k := strings.ToLower(repo)
	c.mu.Lock()
	id := c.m[k]
	c.mu.Unlock()
	if id == 0 && c.store != nil {
		id, _ = c.store.RepoInstallation(repo) // unknown stays 0: the ask then fails closed
	}
	return id
}

// Remember notes a repository's installation from a webhook, and reports
// whether there was one to note (id 0: the delivery names none). The
// caller records it in the store with the rest of the delivery's
// transaction: ghclient knows nothing of the store's writes.
func (c *Clients) Remember(repo string, id int64) bool {
	if c == nil || id == 0 {
		return false
	}
	c.mu.Lock()
	c.m[strings.ToLower(repo)] = id
	c.mu.Unlock()
	return true
}
