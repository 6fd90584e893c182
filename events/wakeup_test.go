package events_test

import (
	"context"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// A wake-up the ticker made is ordered by its PR and reaches its kind of
// sequence with the version that was due; one with an id that is not
// opsbot's own is ignored, and a kind this build does not know changes
// nothing.
func TestWakeupsReachTheirKind(t *testing.T) {
	s := &events.Schema{Repo: func(n string) (string, bool) { return n, n == repo }}
	ref := state.SeqRef{Repo: repo, PR: 12, Kind: "probe", Version: 3}
	id, body := seq.Delivery(ref, 0)
	d, ignored, err := s.Classify(seq.Event, id, body)
	if err != nil || d == nil || d.PR != 12 {
		t.Fatalf("Classify(wake-up) = %+v, %q, %v", d, ignored, err)
	}
	if d, ignored, _ := s.Classify(seq.Event, "a-github-delivery-id", body); d != nil || ignored != events.IgnoredWakeup {
		t.Fatalf("a wake-up with another id = %+v, %q; want ignored", d, ignored)
	}

	r := newERig(t)
	var woken []state.SeqRef
	r.h.Sequences = map[string]seq.Kind{"probe": {Name: "probe", Wake: func(_ context.Context, rc *config.Repo, got state.SeqRef) (string, seq.Write, error) {
		woken = append(woken, got)
		return "probed", nil, nil
	}}}
	out, _, err := r.h.Handle(context.Background(), d)
	if err != nil || out != "probed" || len(woken) != 1 || woken[0] != ref {
		t.Fatalf("Handle = %q, %v; woken %+v", out, err, woken)
	}
	id, body = seq.Delivery(state.SeqRef{Repo: repo, PR: 12, Kind: "retired", Version: 1}, 0)
	d, _, _ = s.Classify(seq.Event, id, body)
	if out, w, err := r.h.Handle(context.Background(), d); err != nil || out != "wakeup-unknown-kind" || w != nil {
		t.Fatalf("a kind not known = %q, %v, write %v", out, err, w != nil)
	}
}
