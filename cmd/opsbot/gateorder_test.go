package main

import (
	"strings"
	"testing"
	"time"
)

// sendPRAt sends a pull_request event for head with the PR's updated_at set
// to at, as GitHub stamps each delivery.
func (w *world) sendPRAt(action, head string, at time.Time) {
	w.T.Helper()
	p := w.SyncPayload(head)
	p["action"] = action
	setPath(p, "pull_request.updated_at", at.UTC().Format(time.RFC3339))
	w.Send("pull_request", p)
}

// GitHub does not promise the order of deliveries: a synchronize that
// arrives after a newer push (and after a pin granted at that newer head)
// is for a commit that is no longer the PR's head. It sweeps, says why, and
// leaves the pin for the real next push.
func TestLateSynchronizeUsesUpNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	t0 := time.Now().Add(-time.Hour)
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, []string{"perf-changelog.yaml"}) // c2's webhook is delayed
	w.GH.Push(theRepo, thePR, []string{sha("c3")}, []string{"perf-changelog.yaml"})
	w.sendPRAt("synchronize", sha("c3"), t0.Add(2*time.Minute)) // c3's arrives: sweep, no pin yet
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")       // granted at head c3, for the next push
	w.sendPRAt("synchronize", sha("c2"), t0.Add(time.Minute))   // the late delivery for c2
	st := w.Statuses("c2")
	if len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep") ||
		!strings.Contains(st[0].Description, "no longer the head of PR #2512 (GitHub says c3c3c3c is)") {
		t.Fatalf("status of the superseded commit c2 = %+v, want sweep naming the head", st)
	}
	if tr := strings.Join(w.trail(), ","); strings.Contains(tr, "pin consumed") || strings.Contains(tr, "pin invalid") {
		t.Fatalf("the late webhook closed the pin: %s", tr)
	}
	w.Push("c4", "perf-changelog.yaml") // the push the maintainer meant
	if st := w.Statuses("c4"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("status of the real next push c4 = %+v", st)
	}
}

// A late delivery never moves the head opsbot records backwards: after c3's
// synchronize, a late opened event that still carries c1 leaves c3 the head,
// so an ask for c1 reads GitHub's head, answers sweep and decides nothing.
func TestLateWebhookDoesNotMoveTheRecordedHeadBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	t0 := time.Now().Add(-time.Hour)
	w.GH.Push(theRepo, thePR, []string{sha("c2")}, nil)
	w.sendPRAt("synchronize", sha("c2"), t0.Add(2*time.Minute))
	w.Comment(maintainer, "/reuse-sweep-run 31147925932")
	w.sendPRAt("opened", sha("c1"), t0) // late: made when c1 was the head
	out, _ := w.gate("--pr", "2512", "--sha", sha("c1"))
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "commit c1c1c1c is not the head of PR #2512 (c2c2c2c is)") {
		t.Fatalf("ask for the old head after a late opened = %v", out)
	}
	if tr := strings.Join(w.trail(), ","); strings.Count(tr, "decision") != 1 {
		t.Fatalf("audit = %s, want only c2's decision", tr)
	}
}
