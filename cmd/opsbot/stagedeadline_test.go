package main

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// movingClock is a clock the test moves.
type movingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movingClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *movingClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// clockedStageWorld is a staging world whose server's clock the test moves,
// and which looks for due sequences often.
func clockedStageWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	w := newWorldOpts(t, worldOpts{repo: stageCfg + repoExtra, deps: func(d *appDeps) {
		d.Now, d.SeqEvery = clock.now, 10*time.Millisecond
	}})
	w.gh.AddRepo(stagingRepo, "stage.yml", 500)
	return w
}

// A stage request the staging side never reports on is failed when
// stage.report_timeout passes: the acknowledgement says why and how to ask
// again, and the audit records it; a request that was reported on is left
// as it was.
func TestStageRequestWithoutReportFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := &movingClock{t: time.Now()}
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	c := w.comment(maintainer, "/stage-results 31147925932")
	mustContain(t, "acknowledgement", w.ack(), "@maintainer staging run [31147925932]")
	clock.add(time.Hour)
	w.settle()
	if strings.Contains(w.ack(), "failed") {
		t.Fatalf("failed before its deadline: %s", w.ack())
	}
	clock.add(time.Hour + time.Second)
	testkit.Eventually(t, "the request failed at its deadline", func() bool { return strings.Contains(w.ack(), "failed") })
	mustContain(t, "failed acknowledgement", w.ack(), "staging run [31147925932]", "did not report within 2h0m0s",
		"Ask again with `/stage-results 31147925932`")
	want := []string{"command stage-results accepted", "stage requested", "stage failed"}
	if got := w.trail(); !slices.Equal(got, want) {
		t.Fatalf("audit = %v, want %v", got, want)
	}
	// A report that comes after is refused: the request no longer waits.
	w.callback("stage-results-completed", c.ID, runR1, true)
	if got := w.trail(); got[len(got)-1] != "callback refused" {
		t.Fatalf("a late report: audit = %v", got)
	}
}

// A request whose staging side reported in time is not failed when its
// deadline passes.
func TestStageRequestReportedInTimeIsKept(t *testing.T) {
	t.Parallel()
	clock := &movingClock{t: time.Now()}
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	c := w.comment(maintainer, "/stage-results 31147925932")
	w.callback("stage-results-completed", c.ID, runR1, true)
	clock.add(3 * time.Hour)
	w.settle()
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
	if got := w.trail(); slices.Contains(got, "stage failed") {
		t.Fatalf("a staged request was failed at its deadline: %v", got)
	}
}
