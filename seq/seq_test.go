package seq_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

type taken struct {
	event, id string
	body      []byte
}

// The ticker hands the intake one wake-up per due sequence, naming the
// sequence and the version that was due, and nothing that is not due; a
// pass after a restart hands over what was due before it.
func TestTickerHandsOverWhatIsDue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	path := filepath.Join(t.TempDir(), "opsbot.db")
	store, err := state.Open(path, state.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*state.Sequence{
		{Kind: "merge", Repo: "o/r", PR: 7, Step: "waiting_checks", WakeAt: now.Add(-time.Minute)},
		{Kind: "stage", Repo: "o/r", PR: 8, Step: "dispatched", WakeAt: now.Add(time.Hour)},
	} {
		if err := store.Update(func(tx *state.Tx) error { return tx.PutSequence(s, 0) }); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()
	store, err = state.Open(path, state.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var got []taken
	tk := &seq.Ticker{Due: store.DueSequences, Now: func() time.Time { return now },
		Take: func(_ context.Context, event, id string, body []byte) error {
			got = append(got, taken{event, id, body})
			return nil
		}}
	n, err := tk.Tick(context.Background())
	if err != nil || n != 1 || len(got) != 1 {
		t.Fatalf("Tick = %d, %v; handed over %d", n, err, len(got))
	}
	if wantID, _ := seq.Delivery(state.SeqRef{Repo: "o/r", PR: 7, Kind: "merge", Version: 1}, now.Unix()/int64(seq.Retry/time.Second)); got[0].event != seq.Event || got[0].id != wantID {
		t.Fatalf("wake-up = %s %s", got[0].event, got[0].id)
	}
	var p seq.Payload
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Repository.FullName != "o/r" || p.Number != 7 || p.Wakeup != (record.SeqRef{Repo: "o/r", PR: 7, Kind: "merge", Version: 1}) {
		t.Fatalf("payload = %+v", p)
	}
}

// A sequence that stays due (its wake-up failed for good, or changed
// nothing) is handed over once in each retry window, not at every pass;
// the sequences of a repository no longer served wait; no two sequences
// share a wake-up id, whatever their names hold.
func TestTickerRetriesOncePerWindow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	store, err := state.Open(filepath.Join(t.TempDir(), "opsbot.db"), state.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, s := range []*state.Sequence{
		{Kind: "stage", Repo: "o/r-x", PR: 1, Step: "waiting_report", WakeAt: now.Add(-time.Minute)},
		{Kind: "stage", Repo: "o-r/x", PR: 1, Step: "waiting_report", WakeAt: now.Add(-time.Minute)},
		{Kind: "stage", Repo: "gone/repo", PR: 1, Step: "waiting_report", WakeAt: now.Add(-time.Minute)},
	} {
		if err := store.Update(func(tx *state.Tx) error { return tx.PutSequence(s, 0) }); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	clock := now
	observed := -1
	tk := &seq.Ticker{Due: store.DueSequences, Now: func() time.Time { return clock }, Observe: func(n int) { observed = n },
		Served: func(repo string) bool { return repo != "gone/repo" },
		Take: func(_ context.Context, _, id string, _ []byte) error {
			ids = append(ids, id)
			return nil
		}}
	for range 3 {
		if _, err := tk.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("three passes in one window handed over %q; want the two served sequences once each, under two ids", ids)
	}
	if observed != 2 {
		t.Fatalf("observed %d due, want the 2 of served repositories (still due: handed over, not moved)", observed)
	}
	clock = clock.Add(seq.Retry)
	if n, err := tk.Tick(context.Background()); err != nil || n != 2 || len(ids) != 4 || ids[2] == ids[0] || ids[3] == ids[1] {
		t.Fatalf("the next window: %d handed, %v; ids %q; want both again under new ids", n, err, ids)
	}
}

// Each retry window's wake-up of a version is a delivery of its own in its
// body too, not only in its id: the intake drops a body it stored before,
// so a wake-up that failed for good or changed nothing would otherwise
// never come again.
func TestWakeupBodyNamesItsWindow(t *testing.T) {
	ref := state.SeqRef{Repo: "o/r", PR: 7, Kind: "merge", Version: 4}
	id1, body1 := seq.Delivery(ref, 100)
	id2, body2 := seq.Delivery(ref, 101)
	if id1 == id2 || string(body1) == string(body2) {
		t.Fatalf("two windows' wake-ups share an id (%v) or a body (%v)", id1 == id2, string(body1) == string(body2))
	}
	var p seq.Payload
	if err := json.Unmarshal(body2, &p); err != nil || p.Window != 101 || p.Wakeup != ref {
		t.Fatalf("payload = %+v, %v", p, err)
	}
}
