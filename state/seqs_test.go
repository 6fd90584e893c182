package state

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A sequence changes only from the version its writer read; its wake-up
// time is an index that lists what is due, earliest first, and survives a
// restart; a done sequence is never due, and a new one may replace it.
func TestSequencesAreGuardedAndDurable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	path := filepath.Join(t.TempDir(), "opsbot.db")
	s, err := Open(path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	put := func(seq *Sequence, read uint64) error {
		return s.Update(func(tx *Tx) error { return tx.PutSequence(seq, read) })
	}
	merge := &Sequence{Kind: "merge", Repo: "o/r", PR: 7, Head: "c1", Step: "pinned", WakeAt: now.Add(time.Minute)}
	if err := put(merge, 0); err != nil || merge.Version != 1 {
		t.Fatalf("first write: %v (version %d)", err, merge.Version)
	}
	if err := put(&Sequence{Kind: "merge", Repo: "o/r", PR: 7, Step: "pinned"}, 0); !errors.Is(err, ErrSeqChanged) {
		t.Fatalf("a second merge sequence for the PR while one runs: %v, want ErrSeqChanged", err)
	}
	stage := &Sequence{Kind: "stage", Repo: "o/r2", PR: 7, Step: "requested", WakeAt: now.Add(-2 * time.Second)}
	if err := put(stage, 0); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueSequences(now, 10)
	if err != nil || len(due) != 1 || due[0] != (SeqRef{Repo: "o/r2", PR: 7, Kind: "stage", Version: 1}) {
		t.Fatalf("due now = %+v, %v; want the stage request of o/r2 only (o/r is not o/r2)", due, err)
	}
	moved := *merge
	moved.Step, moved.WakeAt = "updating", now.Add(-time.Second)
	if err := put(&moved, 1); err != nil || moved.Version != 2 {
		t.Fatalf("guarded write from version 1: %v (version %d)", err, moved.Version)
	}
	stale := *merge
	stale.Step = "merging"
	if err := put(&stale, 1); !errors.Is(err, ErrSeqChanged) {
		t.Fatalf("a write from a version read before: %v, want ErrSeqChanged", err)
	}
	s.Close()

	later := now.Add(time.Hour)
	s, err = Open(path, Options{Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	due, err = s.DueSequences(later, 10)
	if err != nil || len(due) != 2 || due[0].Kind != "stage" || due[1] != (SeqRef{Repo: "o/r", PR: 7, Kind: "merge", Version: 2}) {
		t.Fatalf("due after a restart = %+v, %v; want both, earliest first, the merge at version 2 (its old wake-up gone)", due, err)
	}
	var got *Sequence
	if err := s.Update(func(tx *Tx) error {
		done := moved
		done.Step, done.Done, done.Why = "stopped", true, "cancelled"
		if err := tx.PutSequence(&done, 2); err != nil {
			return err
		}
		got, err = tx.Sequence("o/r", 7, "merge")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got == nil || !got.Done || got.Version != 3 || !got.WakeAt.IsZero() {
		t.Fatalf("done sequence = %+v", got)
	}
	due, _ = s.DueSequences(later, 10)
	if len(due) != 1 || due[0].Kind != "stage" {
		t.Fatalf("a done sequence is due: %+v", due)
	}
	again := &Sequence{Kind: "merge", Repo: "o/r", PR: 7, Head: "c9", Step: "pinned"}
	if err := s.Update(func(tx *Tx) error { return tx.PutSequence(again, 0) }); err != nil || again.Version != 4 || !again.Started.Equal(later) {
		t.Fatalf("a new sequence after a done one: %v (%+v)", err, again)
	}
	if errs := s.Check(); len(errs) > 0 {
		t.Fatalf("bbolt check: %v", errs)
	}
}

// A sequence is due at its wake-up or its deadline, whichever comes first:
// one with a deadline and no wake-up fires at its deadline, and a wake-up
// set past the deadline does not put the deadline off. A database of
// schema 6, whose index held wake-up times only, is indexed again when it
// is opened.
func TestSequencesAreDueAtTheirDeadline(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	path := filepath.Join(t.TempDir(), "opsbot.db")
	s, err := Open(path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	put := func(seq *Sequence, read uint64) {
		t.Helper()
		if err := s.Update(func(tx *Tx) error { return tx.PutSequence(seq, read) }); err != nil {
			t.Fatal(err)
		}
	}
	onlyDeadline := &Sequence{Kind: "stage", Repo: "o/r", PR: 1, Step: "requested", Deadline: now.Add(time.Hour)}
	put(onlyDeadline, 0)
	wakeAfter := &Sequence{Kind: "merge", Repo: "o/r", PR: 2, Step: "waiting_checks", WakeAt: now.Add(3 * time.Hour), Deadline: now.Add(2 * time.Hour)}
	put(wakeAfter, 0)
	dueAt := func(at time.Time) []SeqRef {
		t.Helper()
		due, err := s.DueSequences(at, 10)
		if err != nil {
			t.Fatal(err)
		}
		return due
	}
	if due := dueAt(now.Add(time.Hour - time.Second)); len(due) != 0 {
		t.Fatalf("due before any deadline: %+v", due)
	}
	if due := dueAt(now.Add(2 * time.Hour)); len(due) != 2 || due[0].PR != 1 || due[1].PR != 2 {
		t.Fatalf("due at the second deadline = %+v; want both, by their deadlines", due)
	}
	moved := *wakeAfter
	moved.Deadline = time.Time{}
	put(&moved, wakeAfter.Version)
	if due := dueAt(now.Add(2 * time.Hour)); len(due) != 1 || due[0].PR != 1 {
		t.Fatalf("after the merge's deadline was lifted, due = %+v; want the stage only (its old key gone)", due)
	}

	// Schema 6 indexed wake-up times only: the stage sequence had no key.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bSeqWake); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bSeqWake); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, u64(6))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if due := dueAt(now.Add(3 * time.Hour)); len(due) != 2 || due[0].PR != 1 || due[1].PR != 2 {
		t.Fatalf("after opening a schema 6 file, due = %+v; want the stage at its deadline and the merge at its wake-up", due)
	}
}

// A done sequence that still holds something on GitHub (Left) is due at
// once, and stays due until a write drops it, whatever its deadline; it is
// not live; a sequence begun over it takes what it left.
func TestDoneSequencesHoldingSomethingStayDue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := Open(filepath.Join(t.TempDir(), "opsbot.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(seq *Sequence, read uint64) {
		t.Helper()
		if err := s.Update(func(tx *Tx) error { return tx.PutSequence(seq, read) }); err != nil {
			t.Fatal(err)
		}
	}
	live := &Sequence{Kind: "merge", Repo: "o/r", PR: 7, Step: "pinned", Deadline: now.Add(time.Hour),
		Left: []record.Leftover{{Branch: "opsbot-merge-7-abc1234", Commit: "abc1234"}}}
	put(live, 0)
	done := *live
	done.Step, done.Done = "stopped", true
	put(&done, live.Version)
	if due, err := s.DueSequences(now, 10); err != nil || len(due) != 1 || due[0].Version != done.Version {
		t.Fatalf("due = %+v, %v; want the done merge that holds a branch, at once", due, err)
	}
	if l, err := s.LiveSequences("o/r"); err != nil || len(l) != 0 {
		t.Fatalf("live = %+v, %v; want none: it is done", l, err)
	}
	again := &Sequence{Kind: "merge", Repo: "o/r", PR: 7, Step: "pinned", Deadline: now.Add(time.Hour)}
	put(again, 0)
	if len(again.Left) != 1 || again.Left[0].Branch != "opsbot-merge-7-abc1234" {
		t.Fatalf("the new merge holds %+v; want what the done one left", again.Left)
	}
	cleaned := *again
	cleaned.Step, cleaned.Done, cleaned.Left = "stopped", true, nil
	put(&cleaned, again.Version)
	if due, err := s.DueSequences(now.Add(2*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("due = %+v, %v; want none once nothing is held", due, err)
	}
}

// A commit a live sequence watches finds its PR (a PR's recorded head
// first); a sequence that moves to other commits, or ends, leaves the
// commits it watched; a commit that is not a full SHA is refused.
func TestCommitsWatchedFindTheirPR(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "opsbot.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(seq *Sequence, read uint64) error {
		return s.Update(func(tx *Tx) error { return tx.PutSequence(seq, read) })
	}
	m1, m2 := strings.Repeat("e1", 20), strings.Repeat("E2", 20)
	find := func(sha string) []int {
		t.Helper()
		prs, err := s.PRsOfCommit("O/R", sha)
		if err != nil {
			t.Fatal(err)
		}
		return prs
	}
	watch := &Sequence{Kind: "after_merge", Repo: "o/r", PR: 7, Step: "waiting", Commits: []string{m1}}
	if err := put(watch, 0); err != nil {
		t.Fatal(err)
	}
	other := &Sequence{Kind: "other", Repo: "o/r", PR: 7, Step: "waiting", Commits: []string{m1}}
	if err := put(other, 0); err != nil {
		t.Fatal(err)
	}
	if got := find(strings.ToUpper(m1)); !slices.Equal(got, []int{7}) {
		t.Fatalf("the PRs watching %s: %v; want [7], once", m1, got)
	}
	if got := find(strings.Repeat("e1", 19)); len(got) != 0 {
		t.Fatalf("a prefix of the commit finds %v", got)
	}
	if err := s.Update(func(tx *Tx) error { return tx.PutPRInfo(&PRInfo{Repo: "o/r", PR: 9, HeadSHA: m1, State: "open"}) }); err != nil {
		t.Fatal(err)
	}
	if got := find(m1); !slices.Equal(got, []int{9}) {
		t.Fatalf("a commit that is PR 9's head and PR 7's watched: %v; want the head's PR", got)
	}
	moved := *watch
	moved.Commits = []string{m2}
	if err := put(&moved, 1); err != nil {
		t.Fatal(err)
	}
	if got := find(m2); !slices.Equal(got, []int{7}) {
		t.Fatalf("the moved watch's commit: %v", got)
	}
	done := moved
	done.Done = true
	if err := put(&done, 2); err != nil {
		t.Fatal(err)
	}
	if got := find(m2); len(got) != 0 {
		t.Fatalf("an ended watch's commit finds %v", got)
	}
	// A build that knew no Commits rewrote a watch, leaving its index
	// entry: the entry finds nothing.
	stale := &Sequence{Kind: "stale", Repo: "o/r", PR: 8, Step: "waiting", Commits: []string{m2}}
	if err := put(stale, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := prBucket(tx, "o/r", 8, false)
		if err != nil {
			return err
		}
		older := *stale
		older.Commits = nil
		return putJSON(b, seqKey("stale"), &older)
	}); err != nil {
		t.Fatal(err)
	}
	if got := find(m2); len(got) != 0 {
		t.Fatalf("an index entry of a sequence that no longer watches the commit finds %v", got)
	}
	// An event about a commit one PR heads wakes another PR's watch of it.
	third := &Sequence{Kind: "after_merge", Repo: "o/r", PR: 10, Step: "running", Commits: []string{m1}, WakeAt: time.Now().Add(time.Hour)}
	if err := put(third, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Minute)
	if err := s.Update(func(tx *Tx) error { return tx.WakeWatching("o/r", m1, 9, at) }); err != nil {
		t.Fatal(err)
	}
	woken, err := s.Sequence("o/r", 10, "after_merge")
	if err != nil || woken == nil || woken.WakeAt.After(at) {
		t.Fatalf("the watch of PR 10 after an event about the head of PR 9 it watches: %+v %v", woken, err)
	}
	bad := &Sequence{Kind: "third", Repo: "o/r", PR: 7, Step: "waiting", Commits: []string{"e1e1e1e"}}
	if err := put(bad, 0); err == nil || !strings.Contains(err.Error(), "full SHA") {
		t.Fatalf("a short commit watched: %v", err)
	}
}
