package main

import (
	"strings"
	"testing"
)

// A commit is one commit however its SHA is spelled: an ask for the head at
// grant time in upper or mixed case is that head (it sweeps and leaves the
// pin for the next push), every spelling reads the one stored decision, and
// a short SHA is refused with what to send instead.
func TestGateAskInAnotherCaseIsTheSameCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932") // head c1 when pinned: the pin is for the next push
	up := strings.ToUpper(sha("c1"))
	out, _ := w.gate("--pr", "2512", "--sha", up)
	if out["skip-pr-sweep"] != "false" || !strings.Contains(out["reuse-reason"], "already the head; the pin covers the next push") {
		t.Fatalf("ask for the granted head in upper case = %v", out)
	}
	mixed := "C1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	for i := 0; i < 5; i++ {
		v := []byte(sha("c1"))
		v[i*8] = 'C' // a c of c1c1…
		for _, s := range []string{mixed, string(v)} {
			if again, _ := w.gate("--pr", "2512", "--sha", s); again["reuse-reason"] != out["reuse-reason"] {
				t.Fatalf("ask for %s = %v, want the stored decision %v", s, again, out)
			}
		}
	}
	w.Settle()
	if st := w.Statuses("c1"); len(st) != 1 {
		t.Fatalf("statuses on c1 = %+v, want one", st)
	}
	if n := len(w.GH.Statuses(theRepo, up)); n != 0 {
		t.Fatalf("%d statuses posted on the upper-case spelling", n)
	}
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "skip: reusing run 31147925932") {
		t.Fatalf("the real next push after upper-case asks: %+v", st)
	}
	if tr := strings.Join(w.trail(), ","); strings.Count(tr, "decision") != 2 || !strings.Contains(tr, "pin consumed") {
		t.Fatalf("audit = %s, want one decision for c1 and one for c2", tr)
	}
	rep := w.call("POST", "/api/v1/gate", apiToken, "", askForm(thePR, "c2c2c2c"))
	if rep.code != 400 || !strings.Contains(rep.body, "not a full commit SHA") {
		t.Fatalf("short SHA ask = %d %s, want 400 naming the full SHA", rep.code, rep.body)
	}
}

// A webhook's head SHA is canonical too: a synchronize that spells the
// decided head in upper case reads the stored decision.
func TestWebhookHeadInAnotherCaseIsTheSameCommit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	w.Push("c2")
	w.SendSync(strings.ToUpper(sha("c2")), "")
	if tr := strings.Join(w.trail(), ","); strings.Count(tr, "decision") != 1 {
		t.Fatalf("audit = %s, want one decision for c2", tr)
	}
	if n := len(w.GH.Statuses(theRepo, strings.ToUpper(sha("c2")))); n != 0 {
		t.Fatalf("%d statuses posted on the upper-case spelling", n)
	}
}
