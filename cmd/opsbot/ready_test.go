package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// ready is the newest opsbot/reuse-ready status on commit name.
func (w *world) ready(name string) (state, words string) {
	for _, s := range w.GH.Statuses(theRepo, sha(name)) {
		if s.Context == "opsbot/reuse-ready" {
			state, words = s.State, s.Description
		}
	}
	return state, words
}

// With main_sweeps: false, opsbot/reuse-ready on the PR's head says
// whether a merge now would ingest anything: pending while the head's
// sweep runs, failure when it failed and nothing is pinned, success on a
// pin (and failure again after its cancel), success when the head's own
// sweep finished.
func TestReuseReadyStatusFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    main_sweeps: false\n")
	expect := func(name, state, words string) {
		t.Helper()
		testkit.Eventually(t, fmt.Sprintf("opsbot/reuse-ready %s on %s", state, name), func() bool {
			s, d := w.ready(name)
			return s == state && d == words
		})
	}
	w.Push("c2")
	expect("c2", "pending", "the head's sweep is running; a merge waits for it")
	w.SweepCompleted("c2", 31200000010, "failure")
	expect("c2", "failure", "no reuse source: the head's sweep (run 31200000010) concluded failure; pin a run with /reuse-sweep-run")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	expect("c2", "success", "merge will reuse run 31147925932 (authorized by @maintainer)")
	w.Comment(maintainer, "/reuse-sweep-run cancel")
	expect("c2", "failure", "no reuse source: the head's sweep (run 31200000010) concluded failure; pin a run with /reuse-sweep-run")
	w.Push("c3")
	expect("c3", "pending", "the head's sweep is running; a merge waits for it")
	w.SweepCompleted("c3", 31200000011, "success")
	expect("c3", "success", "the head's own sweep, run 31200000011 (checked again at the merge)")
	n := len(w.GH.Statuses(theRepo, sha("c3")))
	w.SweepCompleted("c3", 31200000011, "success") // the same answer: not set again
	if got := len(w.GH.Statuses(theRepo, sha("c3"))); got != n {
		t.Fatalf("an unchanged answer set the status again: %d statuses, had %d", got, n)
	}

	// A run that does not list this PR (another PR's on the same commit, a
	// fork's) is not its own sweep.
	w.Push("c4")
	w.ReadyClock++
	w.Send("workflow_run", map[string]any{"action": "completed", "repository": map[string]any{"full_name": theRepo},
		"workflow_run": map[string]any{"id": 31200000012, "head_sha": sha("c4"), "conclusion": "success", "event": "pull_request",
			"path": ".github/workflows/run-sweep.yml", "run_attempt": 1, "pull_requests": []any{},
			"updated_at": time.Date(2026, 12, 1, 0, 0, w.ReadyClock, 0, time.UTC).Format(time.RFC3339)}})
	expect("c4", "pending", "the head's sweep is running; a merge waits for it")
	// Labels that make the sweep partial: a merge reuses nothing, pin or not.
	w.GH.SetLabels(theRepo, thePR, "full-sweep-enabled", "evals-only")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932") // refused: partial
	w.Push("c5")
	expect("c5", "failure", "no reuse source: its labels make its sweep partial, so a merge reuses nothing")

	plain := newWorld(t, "")
	plain.Push("c2")
	if s, _ := plain.ready("c2"); s != "" {
		t.Fatalf("opsbot/reuse-ready set where the default branch sweeps: %s", s)
	}
}

// A PR opsbot has no record of (opened before opsbot served the
// repository, or its opened delivery lost) gets opsbot/reuse-ready when a
// pin is taken: the pin records the head GitHub gave it. A pin whose head
// opsbot does not know (granted by an opsbot that did not record it) gets
// it from reconcile, which records the PR as GitHub has it.
func TestReuseReadyOnAPROpsbotNeverSaw(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    main_sweeps: false\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	testkit.Eventually(t, "opsbot/reuse-ready on the unseen PR's head", func() bool {
		s, d := w.ready("c1")
		return s == "success" && d == "merge will reuse run 31147925932 (authorized by @maintainer)"
	})

	// The same pin, taken by an opsbot that did not record the head.
	w2 := newWorld(t, "    main_sweeps: false\n")
	w2.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w2.Restart(func(cfg string) string {
		st, err := state.Open(filepath.Join(w2.Dir, "opsbot.db"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.Update(func(tx *state.Tx) error {
			info, err := tx.PRInfo(theRepo, thePR)
			if err != nil || info == nil {
				return fmt.Errorf("no record of the PR: %v", err)
			}
			info.HeadSHA, info.ReadySaid = "", ""
			return tx.PutPRInfo(info)
		}); err != nil {
			t.Fatal(err)
		}
		return cfg
	}, nil)
	before := len(w2.GH.Statuses(theRepo, sha("c1")))
	rep := w2.reconcile()
	if fmt.Sprint(rep["heads_recorded"]) != fmt.Sprintf("[%d]", thePR) {
		t.Fatalf("reconcile report %v: want the PR's head recorded", rep)
	}
	testkit.Eventually(t, "opsbot/reuse-ready set again after reconcile", func() bool {
		s, _ := w2.ready("c1")
		return len(w2.GH.Statuses(theRepo, sha("c1"))) > before && s == "success"
	})
	for _, r := range w2.audit() {
		if r["kind"] == "decision" || r["outcome"] == "consumed" {
			t.Fatalf("recording the head decided it: %v", w2.trail())
		}
	}
}
