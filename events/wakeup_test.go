package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// putSeq stores s as a new sequence and writes it again until it is at
// version v.
func putSeq(t *testing.T, st *state.Store, s state.Sequence, v uint64) state.Sequence {
	t.Helper()
	read := uint64(0)
	for range v {
		if err := st.Update(func(tx *state.Tx) error { return tx.PutSequence(&s, read) }); err != nil {
			t.Fatal(err)
		}
		read = s.Version
	}
	return s
}

// wakeOf is the wake-up delivery of ref as the ticker makes it, classified.
func wakeOf(t *testing.T, ref state.SeqRef) *state.Delivery {
	t.Helper()
	s := &events.Schema{Repo: func(n string) (string, bool) { return n, n == repo }}
	id, body := seq.Delivery(ref, 0)
	d, ignored, err := s.Classify(seq.Event, id, body)
	if err != nil || d == nil {
		t.Fatalf("Classify(wake-up) = %+v, %q, %v", d, ignored, err)
	}
	return d
}

// A wake-up the ticker made is ordered by its PR and reaches its kind of
// sequence with the version that was due and the sequence as stored; one
// with an id that is not opsbot's own is ignored; a kind this build does
// not know changes nothing; a wake-up of a version the sequence moved from
// reaches no kind.
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
	r.h.Seqs = r.store
	putSeq(t, r.store, state.Sequence{Kind: "probe", Repo: repo, PR: 12, Step: "waiting", WakeAt: time.Now().Add(time.Hour)}, 3)
	var woken []seq.Wakeup
	r.h.Sequences = map[string]seq.Kind{"probe": {Name: "probe", Wake: func(_ context.Context, rc *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
		woken = append(woken, w)
		return "probed", nil, nil
	}}}
	out, _, err := r.h.Handle(context.Background(), d)
	if err != nil || out != "probed" || len(woken) != 1 || woken[0].Ref != ref || woken[0].Seq == nil || woken[0].Seq.Step != "waiting" {
		t.Fatalf("Handle = %q, %v; woken %+v", out, err, woken)
	}
	if out, _, err := r.h.Handle(context.Background(), wakeOf(t, state.SeqRef{Repo: repo, PR: 12, Kind: "probe", Version: 2})); err != nil ||
		out != "probe-moved-on" || len(woken) != 1 {
		t.Fatalf("a wake-up of a version moved from = %q, %v; woken %d times", out, err, len(woken))
	}
	id, body = seq.Delivery(state.SeqRef{Repo: repo, PR: 12, Kind: "retired", Version: 1}, 0)
	d, _, _ = s.Classify(seq.Event, id, body)
	if out, w, err := r.h.Handle(context.Background(), d); err != nil || out != "wakeup-unknown-kind" || w != nil {
		t.Fatalf("a kind not known = %q, %v, write %v", out, err, w != nil)
	}
}

// The engine's part of a step, for any kind: past its deadline the kind's
// Expire runs instead of its Wake (or, without one, the sequence ends as
// expired); a step that yields is made due again as its next version; a
// step that left a due sequence as it was waits for its deadline instead
// of being woken in every window.
func TestTheEngineOwnsDeadlinesYieldsAndIdleSteps(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name   string
		seq    state.Sequence
		expire bool // the kind has an Expire
		// expireIdle gives the kind an Expire that does nothing (it cannot end it yet)
		expireIdle bool
		wake       error
		wantOut    string
		wantDone   bool
		check      func(t *testing.T, before, after *state.Sequence)
	}{
		{name: "deadline passed, the kind's Expire", seq: state.Sequence{Step: "waiting", WakeAt: now.Add(time.Hour), Deadline: now.Add(-time.Second)},
			expire: true, wantOut: "expired-by-kind", wantDone: true},
		{name: "deadline passed, no Expire", seq: state.Sequence{Step: "waiting", Deadline: now.Add(-time.Second)},
			wantOut: "probe-expired", wantDone: true, check: func(t *testing.T, _, after *state.Sequence) {
				if after.Step != "expired" || after.Why != "expired: its deadline passed" {
					t.Fatalf("ended as %q (%q)", after.Step, after.Why)
				}
			}},
		{name: "yield", seq: state.Sequence{Step: "merging", WakeAt: now.Add(-time.Minute), Deadline: now.Add(time.Hour)}, wake: seq.ErrYield,
			wantOut: "probe-yielded", check: func(t *testing.T, before, after *state.Sequence) {
				if after.Version != before.Version+1 || after.WakeAt.IsZero() || after.WakeAt.After(time.Now()) {
					t.Fatalf("after a yield: version %d (was %d), wake %v; want the next version, due now", after.Version, before.Version, after.WakeAt)
				}
			}},
		{name: "a step that changed nothing, without a deadline", seq: state.Sequence{Step: "scheduled", WakeAt: now.Add(-time.Minute)},
			wantOut: "idle", check: func(t *testing.T, before, after *state.Sequence) {
				if after.Version != before.Version || !after.WakeAt.Equal(before.WakeAt) {
					t.Fatalf("after an idle step with no deadline: version %d (was %d), wake %v; want it left due, for the next window",
						after.Version, before.Version, after.WakeAt)
				}
			}},
		{name: "a step that changed nothing, past its deadline", seq: state.Sequence{Step: "waiting", Deadline: now.Add(-time.Minute)},
			expireIdle: true, wantOut: "idle", check: func(t *testing.T, before, after *state.Sequence) {
				if after.Version != before.Version || after.Done {
					t.Fatalf("a kind's end that did nothing: version %d (was %d), done %v; want it left due, for the next window",
						after.Version, before.Version, after.Done)
				}
			}},
		{name: "a step that changed nothing", seq: state.Sequence{Step: "waiting", WakeAt: now.Add(-time.Minute), Deadline: now.Add(time.Hour)},
			wantOut: "idle", check: func(t *testing.T, _, after *state.Sequence) {
				if !after.WakeAt.IsZero() || !record.DueAt(after).Equal(after.Deadline) {
					t.Fatalf("after an idle step: wake %v, due %v; want no wake-up, due at its deadline", after.WakeAt, record.DueAt(after))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newERig(t)
			r.h.Seqs = r.store
			s := tc.seq
			s.Kind, s.Repo, s.PR = "probe", repo, 12
			before := putSeq(t, r.store, s, 1)
			woke := 0
			k := seq.Kind{Name: "probe", Wake: func(context.Context, *config.Repo, seq.Wakeup) (string, seq.Write, error) {
				woke++
				return "idle", nil, tc.wake
			}}
			if tc.expireIdle {
				k.Expire = func(context.Context, *config.Repo, seq.Wakeup) (string, seq.Write, error) { return "idle", nil, nil }
			}
			if tc.expire {
				k.Expire = func(_ context.Context, _ *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
					return "expired-by-kind", func(tx record.Tx) error {
						next := *w.Seq
						next.Step, next.Done = "ended", true
						return tx.PutSequence(&next, w.Seq.Version)
					}, nil
				}
			}
			r.h.Sequences = map[string]seq.Kind{"probe": k}
			d := wakeOf(t, state.SeqRef{Repo: repo, PR: 12, Kind: "probe", Version: before.Version})
			out, w, err := r.h.Handle(context.Background(), d)
			if err != nil || out != tc.wantOut {
				t.Fatalf("Handle = %q, %v; want %q", out, err, tc.wantOut)
			}
			if err := r.store.Update(w); err != nil {
				t.Fatal(err)
			}
			after, err := r.store.Sequence(repo, 12, "probe")
			if err != nil {
				t.Fatal(err)
			}
			if after.Done != tc.wantDone {
				t.Fatalf("done = %v, want %v (%+v)", after.Done, tc.wantDone, after)
			}
			if tc.expire && woke != 0 {
				t.Fatalf("Wake ran %d times past the deadline", woke)
			}
			if tc.check != nil {
				tc.check(t, &before, after)
			}
		})
	}
}

// A step asks, right before an act it cannot take back, whether a
// delivery that may stop it waits for the PR: a comment, a click, a check
// run's button or a change of the PR that stops a merge (a push) does; a
// status, a check suite, a label or an assignment, or another PR's
// comment does not (each one waiting would only delay the act).
func TestClearSeesWhatMayStopTheSequence(t *testing.T) {
	r := newERig(t)
	r.h.Seqs = r.store
	s := putSeq(t, r.store, state.Sequence{Kind: "probe", Repo: repo, PR: 12, Step: "merging", WakeAt: time.Now()}, 1)
	var got []error
	r.h.Sequences = map[string]seq.Kind{"probe": {Name: "probe", Wake: func(_ context.Context, _ *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
		got = append(got, w.Clear())
		return "cleared", nil, nil
	}}}
	ctx := context.Background()
	wake := wakeOf(t, state.SeqRef{Repo: repo, PR: 12, Kind: "probe", Version: s.Version})
	if _, err := r.store.Append(ctx, wake); err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		event, action string
		pr            int
		stops         bool
	}{
		{"status", "", 12, false},
		{"check_suite", "completed", 12, false},
		{"check_run", "completed", 12, false},
		{"pull_request", "labeled", 12, false},
		{"pull_request", "assigned", 12, false},
		{"issue_comment", "created", 13, false},
		{"pull_request", "synchronize", 12, true},
	} {
		d := &state.Delivery{ID: fmt.Sprintf("waiting-%d", i), Event: w.event, Action: w.action, Repo: repo, PR: w.pr,
			ReceivedAt: time.Now(), Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		if _, err := r.store.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.h.Handle(ctx, wake); err != nil {
			t.Fatal(err)
		}
		if last := got[len(got)-1]; errors.Is(last, seq.ErrYield) != w.stops || (last != nil && !errors.Is(last, seq.ErrYield)) {
			t.Fatalf("with a %s %s of PR %d waiting: Clear = %v, want a yield %v", w.event, w.action, w.pr, last, w.stops)
		}
	}
}

// A done sequence that still holds something on GitHub is stepped by its
// kind's Cleanup, never its Wake, until a write drops what it holds; a kind
// without a Cleanup has it dropped (logged for a maintainer), not woken in
// every window.
func TestTheEngineCleansUpWhatADoneSequenceLeft(t *testing.T) {
	for _, withCleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanup %v", withCleanup), func(t *testing.T) {
			r := newERig(t)
			r.h.Seqs = r.store
			s := putSeq(t, r.store, state.Sequence{Kind: "probe", Repo: repo, PR: 12, Step: "stopped", Done: true,
				Left: []record.Leftover{{Branch: "opsbot-merge-12-abc1234"}}}, 1)
			if due, err := r.store.DueSequences(time.Now().Add(time.Second), 10); err != nil || len(due) != 1 {
				t.Fatalf("due = %+v, %v; want the done sequence that holds a branch", due, err)
			}
			k := seq.Kind{Name: "probe", Wake: func(context.Context, *config.Repo, seq.Wakeup) (string, seq.Write, error) {
				t.Fatal("a done sequence was woken")
				return "", nil, nil
			}}
			if withCleanup {
				k.Cleanup = func(_ context.Context, _ *config.Repo, w seq.Wakeup) (string, seq.Write, error) {
					return "cleaned", func(tx record.Tx) error {
						next := *w.Seq
						next.Left = nil
						return tx.PutSequence(&next, w.Seq.Version)
					}, nil
				}
			}
			r.h.Sequences = map[string]seq.Kind{"probe": k}
			out, w, err := r.h.Handle(context.Background(), wakeOf(t, state.SeqRef{Repo: repo, PR: 12, Kind: "probe", Version: s.Version}))
			want := map[bool]string{true: "cleaned", false: "probe-left-behind"}[withCleanup]
			if err != nil || out != want {
				t.Fatalf("Handle = %q, %v; want %q", out, err, want)
			}
			if err := r.store.Update(w); err != nil {
				t.Fatal(err)
			}
			if due, err := r.store.DueSequences(time.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
				t.Fatalf("due after = %+v, %v; want none", due, err)
			}
		})
	}
}
