package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// The merge's world, shared by merge's own behaviour tests
// (commands/merge) and the server's tests that merge on the way.

// MergeWorld is a world whose maintainer may merge (merge.min_role write,
// unless repoExtra sets a merge section of its own) and whose server's
// clock the test moves, looking for due sequences often.
func MergeWorld(t *testing.T, repoExtra string, clock *Clock) *World {
	t.Helper()
	if !strings.Contains(repoExtra, "merge:") {
		repoExtra = "    merge:\n      min_role: write\n" + repoExtra
	}
	return New(t, Options{Repo: repoExtra, Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
}

// MergeStatus is the merge's status comment on the PR ("" for none).
func (w *World) MergeStatus() string {
	for _, r := range w.Replies() {
		if strings.Contains(r, "**Merge with reuse**") {
			return r
		}
	}
	return ""
}

// WaitStatus waits until the merge's status comment says each of subs,
// then until the server settles.
func (w *World) WaitStatus(what string, subs ...string) string {
	w.T.Helper()
	testkit.Eventually(w.T, what, func() bool {
		s := w.MergeStatus()
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	})
	w.Settle()
	return w.MergeStatus()
}

// Swept says the gate's last status on commit name says it sweeps.
func (w *World) Swept(name string) bool {
	st := w.Statuses(name)
	return len(st) > 0 && strings.HasPrefix(st[len(st)-1].Description, "sweep")
}

// GreenChecks gives a head the checks a swept (or skipped) PR head has.
func (w *World) GreenChecks(head string) {
	w.GH.SetCheckRun(Repo, head, "sweep / gate", "completed", "success")
	w.GH.SetCheckRun(Repo, head, "sweep / benchmarks", "completed", "skipped")
	w.GH.SetCheckRun(Repo, head, "lint", "completed", "success")
}

// PendingChecks gives c1 green checks but its benchmarks, still running.
func (w *World) PendingChecks() {
	w.GreenChecks(SHA("c1"))
	w.GH.SetCheckRun(Repo, SHA("c1"), "sweep / benchmarks", "in_progress", "")
}

// ClosedMerged sends pull_request closed for a merge GitHub made as commit.
func (w *World) ClosedMerged(commit string) {
	w.T.Helper()
	w.Send("pull_request", w.ClosedPayload(true, commit))
}

// PinRevoked says whether the audit holds a pin revoked.
func (w *World) PinRevoked() bool {
	for _, r := range w.AuditRecords() {
		if r["kind"] == "pin" && r["outcome"] == string(record.PinRevoked) {
			return true
		}
	}
	return false
}

// SendMergeGroup sends a merge_group event of the action (with its reason,
// when set) for the group commit on the group branch ref.
func (w *World) SendMergeGroup(action, reason, group, ref string) {
	w.T.Helper()
	p := Payload(w.T, "merge_group", "checks_requested")
	SetPath(p, "repository.full_name", Repo)
	p["action"] = action
	if reason != "" {
		p["reason"] = reason
	}
	SetPath(p, "merge_group.head_sha", group)
	SetPath(p, "merge_group.head_ref", ref)
	w.Send("merge_group", p)
}
