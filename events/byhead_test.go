package events

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// An event that names only a commit (GitHub's own status, check suite and
// check run payloads) finds the PR that orders it through the store's
// index of recorded heads: the lowest-numbered of the PRs the commit
// heads; a commit that heads no PR opsbot knows is ignored, and so is every
// such event when no index is wired.
func TestClassifyByHead(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "h.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, info := range []state.PRInfo{
		{Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: "6113728f27ae82c7b1a177c8d03f9e96e0adf246"},
		{Repo: "Codertocat/Hello-World", PR: 4, HeadSHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821"},
		{Repo: "electron/electron", PR: 9, HeadSHA: "5bd5f196a46b8222fb7484f05faba41a73cf34bd"},
		{Repo: "electron/electron", PR: 5, HeadSHA: "5BD5F196A46B8222FB7484F05FABA41A73CF34BD"}, // the same branch into another base
	} {
		if err := st.Update(func(tx *state.Tx) error { return tx.PutPRInfo(&info) }); err != nil {
			t.Fatal(err)
		}
	}
	s := &Schema{Heads: st.PRsOfHead}
	for _, tc := range []struct {
		event, action string
		wantPR        int
	}{
		{"status", "", 2},
		{"check_suite", "completed", 4},
		{"check_run", "requested_action", 5},
		{"check_run", "created", 4},
		{"check_suite", "requested", 0}, // a commit that heads no PR opsbot knows
	} {
		t.Run(tc.event+" "+tc.action, func(t *testing.T) {
			var env envelope
			if err := json.Unmarshal(fixtures.Webhook(t, tc.event, tc.action), &env); err != nil {
				t.Fatal(err)
			}
			d := &state.Delivery{Repo: env.Repository.FullName}
			ignored, err := s.classifyByHead(&env, d)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantPR == 0 {
				if ignored != IgnoredNoHead || d.PR != 0 {
					t.Fatalf("ignored %q, PR %d; want %q", ignored, d.PR, IgnoredNoHead)
				}
				return
			}
			if ignored != "" || d.PR != tc.wantPR {
				t.Fatalf("ignored %q, PR %d; want PR %d", ignored, d.PR, tc.wantPR)
			}
			if ignored, _ := (&Schema{}).classifyByHead(&env, &state.Delivery{Repo: d.Repo}); ignored != IgnoredNoHead {
				t.Fatalf("without an index: %q, want %q", ignored, IgnoredNoHead)
			}
		})
	}
}
