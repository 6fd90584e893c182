package state

import (
	"path/filepath"
	"testing"
	"time"
)

// Failed notices (an outsider deleting each command comment before
// opsbot's 👎 lands makes one each) are pruned once older than the
// retention: PruneFailed drops those given up before the cutoff and keeps
// the newer ones.
func TestFailedNoticesArePrunedAfterRetention(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fail := func(n int) {
		for i := range n {
			var id uint64
			if err := st.Update(func(tx *Tx) error {
				no := &Notice{Channel: ChannelGitHub, Kind: NoticeReaction, Repo: "o/r", PR: 1, TargetComment: int64(i), Reaction: "-1"}
				err := tx.Enqueue(no)
				id = no.ID
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := st.NoticeFailed(id, "reacting to comment: ghclient: not found"); err != nil {
				t.Fatal(err)
			}
		}
	}
	fail(30)
	now = now.Add(8 * 24 * time.Hour)
	fail(5)
	cutoff := now.Add(-7 * 24 * time.Hour)
	if n, err := st.PruneFailed(cutoff, 20); err != nil || n != 20 {
		t.Fatalf("PruneFailed = %d, %v; want 20 (its limit)", n, err)
	}
	if n, err := st.PruneFailed(cutoff, 20); err != nil || n != 10 {
		t.Fatalf("PruneFailed again = %d, %v; want the other 10 old ones", n, err)
	}
	ns, err := st.FailedNotices()
	if err != nil || len(ns) != 5 {
		t.Fatalf("failed notices after pruning = %d, %v; want the 5 newer ones", len(ns), err)
	}
	for _, n := range ns {
		if !n.FailedAt.Equal(now) {
			t.Fatalf("a kept record failed at %v, want %v", n.FailedAt, now)
		}
	}
}
