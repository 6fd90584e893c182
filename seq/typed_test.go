package seq_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

type counter struct {
	N int `json:"n"`
}

// A typed kind's state only decides: the engine's part decodes its data,
// guards the plan by the version that was due (a sequence that moved while
// the step read writes nothing: plan.ErrStale), and applies it; data that
// is not the kind's is an error before the state runs.
func TestTypedKindDecodesGuardsAndApplies(t *testing.T) {
	store, err := state.Open(filepath.Join(t.TempDir(), "opsbot.db"), state.Options{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	put := func(s *record.Sequence, read uint64) {
		t.Helper()
		if err := store.Update(func(tx *state.Tx) error { return tx.PutSequence(s, read) }); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *record.Sequence {
		t.Helper()
		s, err := store.Sequence("o/r", 7, "count")
		if err != nil || s == nil {
			t.Fatalf("read: %v %v", s, err)
		}
		return s
	}
	put(&record.Sequence{Kind: "count", Repo: "o/r", PR: 7, Step: "counting", Data: []byte(`{"n":1}`)}, 0)
	ran := 0
	k := seq.Typed[counter]{Name: "count", Step: func(_ context.Context, _ *config.Repo, s seq.Step[counter]) (string, plan.Plan, error) {
		ran++
		next := *s.Seq
		next.Data = fmt.Appendf(nil, `{"n":%d}`, s.Data.N+1)
		return "counted", plan.Plan{Steps: []plan.Step{plan.PutSequence{Seq: next, Read: s.Seq.Version}}}, nil
	}}.Kind()
	cur := read()
	out, w, err := k.Wake(t.Context(), &config.Repo{}, seq.Wakeup{Seq: cur, Now: time.Now()})
	if err != nil || out != "counted" {
		t.Fatalf("Wake = %q, %v", out, err)
	}
	if err := store.Update(func(tx *state.Tx) error { return w(tx) }); err != nil {
		t.Fatal(err)
	}
	if got := read(); string(got.Data) != `{"n":2}` || got.Version != cur.Version+1 {
		t.Fatalf("after the step: %s at version %d", got.Data, got.Version)
	}

	// Moved between the read and the write: nothing is written.
	cur = read()
	_, w, err = k.Wake(t.Context(), &config.Repo{}, seq.Wakeup{Seq: cur, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	moved := *cur
	moved.Step = "moved"
	put(&moved, cur.Version)
	if err := store.Update(func(tx *state.Tx) error { return w(tx) }); !errors.Is(err, plan.ErrStale) {
		t.Fatalf("a step over a sequence that moved = %v, want plan.ErrStale", err)
	}
	if got := read(); got.Step != "moved" || string(got.Data) != `{"n":2}` {
		t.Fatalf("a stale step wrote: %+v", got)
	}

	// Data that is not the kind's: an error, and the state never runs.
	bad := read()
	bad.Data = []byte(`{"n":"two"}`)
	before := ran
	if _, _, err := k.Wake(t.Context(), &config.Repo{}, seq.Wakeup{Seq: bad, Now: time.Now()}); err == nil || !strings.Contains(err.Error(), "count sequence of o/r#7") || ran != before {
		t.Fatalf("Wake on data not the kind's = %v (ran %d times)", err, ran-before)
	}
	if k.Expire != nil || k.Cleanup != nil {
		t.Fatal("a typed kind without Expire or Cleanup has them")
	}
}
