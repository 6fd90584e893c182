package ghclient_test

import (
	"path/filepath"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// TestClientsRememberInstallations: an installation noted from a webhook is
// known at once, and not stored by the clients (the delivery's transaction
// records it); after a restart (a new Clients on the same store) the
// database answers.
func TestClientsRememberInstallations(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "c.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fac, err := ghclient.NewFactory(ghclient.Options{APIURL: "http://127.0.0.1:1/", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	c := ghclient.NewClients(fac, st)
	if got := c.Installation("o/r"); got != 0 {
		t.Fatalf("Installation before any webhook = %d, want 0", got)
	}
	if c.Remember("o/r", 0) {
		t.Fatal("Remember(0) noted an installation; a delivery without one has none to record")
	}
	if !c.Remember("O/R", 7) {
		t.Fatal("Remember(7) noted nothing")
	}
	if got := c.Installation("o/r"); got != 7 {
		t.Fatalf("Installation after Remember = %d, want 7", got)
	}
	if id, _ := st.RepoInstallation("o/r"); id != 0 {
		t.Fatalf("stored before the delivery's write committed: %d", id)
	}
	if err := st.SetRepoInstallation("o/r", 7); err != nil { // as the delivery's write (events) records it
		t.Fatal(err)
	}
	again := ghclient.NewClients(fac, st)
	if got := again.Installation("o/r"); got != 7 {
		t.Fatalf("Installation after a restart = %d, want 7", got)
	}
	if _, err := again.ForRepo("o/r"); err != nil {
		t.Fatalf("ForRepo: %v", err)
	}
}
