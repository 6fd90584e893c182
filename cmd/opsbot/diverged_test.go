package main

import (
	"strings"
	"testing"
)

// With reuse.allowed_paths set, a head that does not contain the pinned
// run's commit (force-pushed without the measured change) sweeps, though
// the PR shows the run's commit again by the time its synchronize is
// decided and the head's own changes are in the allowed paths; nothing is
// published at merge.
func TestDivergedHeadSweepsAndPublishesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\", \"docs/**\"]\n")
	w.Comment(maintainer, "/reuse-sweep-run 31147925932") // the run measured c1 (benchmarks/kimi.sh)
	// d1 = base + a changelog line, without c1; then c1 + d2 at once, and
	// opsbot decides d1's synchronize while GitHub already shows c1 + d2.
	w.GH.ForcePush(theRepo, thePR, []string{sha("d1")}, []string{"perf-changelog.yaml"})
	w.GH.ForcePush(theRepo, thePR, []string{sha("c1"), sha("d2")}, []string{"benchmarks/kimi.sh"}, []string{"docs/x.md"})
	w.SendSync(sha("d1"), "")
	if st := w.Statuses("d1"); len(st) != 1 || st[0].State != "success" || strings.Contains(st[0].Description, "skip") {
		t.Fatalf("status on d1, which lacks the measured change: %+v", st)
	}
	out, _ := w.gate("--pr", "2512", "--sha", sha("d1"), "--event", "pull_request", "--action", "synchronize")
	mustContain(t, "gate for d1", out["reuse-reason"], "does not contain run 31147925932's commit `c1c1c1c`")
	w.SendSync(sha("d2"), "")
	w.GH.ForcePush(theRepo, thePR, []string{sha("d1")}, []string{"perf-changelog.yaml"})
	w.SendSync(sha("d1"), "")
	out, _ = w.gate("--pr", "2512", "--sha", sha("d1"), "--event", "pull_request", "--action", "synchronize")
	if out["skip-pr-sweep"] != "false" {
		t.Fatalf("gate for d1, which lacks the measured change: %v", out)
	}
	w.ClosePR(true, "a1")
	out, _ = w.gate("--event", "push", "--sha", sha("a1"))
	if out["reuse-enabled"] == "true" || strings.Contains(out["reuse-source-run-id"], "31147925932") {
		t.Fatalf("push gate at merge publishes the run: %v", out)
	}
}
