package state

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// An approval moves only as record.ApprovalMoves allows, a run is bound to
// one approval only and an approval to one run, and what is stored is
// found by id, by run (never another repository's) and by PR, newest
// first; an approval id is found in a run's name only in its exact form.
func TestApprovalsMoveAsTheLifecycleAllows(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := Open(filepath.Join(t.TempDir(), "opsbot.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(a record.Approval) error {
		return s.Update(func(tx *Tx) error { return tx.PutApproval(&a) })
	}
	a := record.Approval{ID: ApprovalIDPrefix + "0123456789abcdef", Repo: "o/r", PR: 7, Head: "h1", Workflow: "w", State: record.ApprovalDispatched}
	if err := put(a); !errors.Is(err, record.ErrApprovalMoved) {
		t.Fatalf("a new approval that is not active: %v", err)
	}
	a.State = record.ApprovalActive
	if err := put(a); err != nil {
		t.Fatal(err)
	}
	a.State = record.ApprovalCompleted
	if err := put(a); !errors.Is(err, record.ErrApprovalMoved) {
		t.Fatalf("active to completed: %v", err)
	}
	a.State, a.RunID = record.ApprovalDispatched, 42
	if err := put(a); err != nil {
		t.Fatal(err)
	}
	other := record.Approval{ID: ApprovalIDPrefix + "fedcba9876543210", Repo: "o/r", PR: 8, Head: "h2", State: record.ApprovalActive}
	if err := put(other); err != nil {
		t.Fatal(err)
	}
	other.State, other.RunID = record.ApprovalDispatched, 42
	if err := put(other); !errors.Is(err, record.ErrRunBound) {
		t.Fatalf("a run bound twice: %v", err)
	}
	a.RunID = 43
	if err := put(a); !errors.Is(err, record.ErrRunBound) {
		t.Fatalf("an approval bound to a second run: %v", err)
	}
	a.RunID, a.State = 42, record.ApprovalCompleted
	if err := put(a); err != nil {
		t.Fatal(err)
	}
	for _, to := range []record.ApprovalState{record.ApprovalExpired, record.ApprovalFailed, record.ApprovalDispatched, record.ApprovalCompleted} {
		a.State = to
		if err := put(a); !errors.Is(err, record.ErrApprovalMoved) {
			t.Fatalf("completed to %s: %v", to, err)
		}
	}
	got, err := s.ApprovalOfRun("O/R", 42)
	if err != nil || got == nil || got.ID != a.ID || got.State != record.ApprovalCompleted || !got.Counts() {
		t.Fatalf("approval of run 42: %+v, %v", got, err)
	}
	if got, _ := s.ApprovalOfRun("o/other", 42); got != nil {
		t.Fatalf("another repository's run 42 found %+v", got)
	}
	a.State = record.ApprovalRevoked
	if err := put(a); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ApprovalOfRun("o/r", 42); got.Counts() {
		t.Fatalf("a revoked approval counts: %+v", got)
	}
	list, err := s.Approvals("o/r", 7)
	if err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("PR 7's approvals %+v, %v", list, err)
	}
	for title, want := range map[string]int{
		"External sweep of PR #8 (" + other.ID + ")":                8,
		"External sweep (" + ApprovalIDPrefix + "FEDCBA9876543210)": 0, // not the exact form
		"External sweep (" + ApprovalIDPrefix + "fedcba98)":         0,
		"nothing": 0,
	} {
		if pr, err := s.ApprovalPR("o/r", title); err != nil || pr != want {
			t.Errorf("ApprovalPR(%q) = %d, %v; want %d", title, pr, err, want)
		}
	}
}
