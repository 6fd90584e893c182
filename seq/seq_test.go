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
	if got[0].event != seq.Event || got[0].id != "opsbot-wake-merge-o-r-7-v1" {
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
