package main

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
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
	w := newWorldOpts(t, worldOpts{repo: stageCfg + repoExtra, deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.now, 10*time.Millisecond
	}})
	w.gh.AddRepo(stagingRepo, "stage.yml", 500)
	return w
}

// wakeups is how many wake-ups the server has processed.
func (w *world) wakeups() int {
	n := 0
	for k, v := range w.metrics() {
		if strings.HasPrefix(k, `opsbot_deliveries_processed_total{event="opsbot_wakeup"`) {
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

// passTime moves the clock by d and waits until a wake-up has been
// processed since, so what was due by then has been acted on.
func (w *world) passTime(clock *movingClock, d time.Duration) {
	w.t.Helper()
	before := w.wakeups()
	clock.add(d)
	testkit.Eventually(w.t, "a wake-up after the clock moved", func() bool { return w.wakeups() > before })
	w.settle()
}

// A stage request the staging side never reports on is failed when
// stage.report_timeout passes: the acknowledgement says why and how to ask
// again, and the audit records it; a request made later, whose deadline has
// not passed, is left waiting.
func TestStageRequestWithoutReportFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := &movingClock{t: time.Now()}
	w := clockedStageWorld(t, "      slot: accumulate\n      report_timeout: 2h\n", clock)
	first := w.comment(maintainer, "/stage-results 31147925932")
	w.settle()
	clock.add(time.Hour)
	second := w.comment(maintainer, "/stage-results 31147925932")
	w.settle()
	w.passTime(clock, time.Hour+time.Second) // the first's deadline passes, not the second's
	var fails int
	for _, r := range w.replies() {
		if strings.Contains(r, "did not report within") {
			fails++
			mustContain(t, "failed acknowledgement", r, "staging run [31147925932](", ") failed: the staging side", "Ask again with `/stage-results 31147925932`")
		}
	}
	if fails != 1 {
		t.Fatalf("%d requests failed after the first's deadline, want 1: %q", fails, w.replies())
	}
	want := []string{"command stage-results accepted", "stage requested", "command stage-results accepted", "stage requested", "stage failed"}
	if got := w.trail(); !slices.Equal(got, want) {
		t.Fatalf("audit = %v, want %v", got, want)
	}
	if recs := w.audit(); recs[len(recs)-1]["comment_id"] != float64(first.ID) {
		t.Fatalf("the request failed is comment %v's, want the first's (%d)", recs[len(recs)-1]["comment_id"], first.ID)
	}
	// A report that comes after is refused: the request no longer waits.
	w.callback("stage-results-completed", first.ID, runR1, true)
	if got := w.trail(); got[len(got)-1] != "callback refused" {
		t.Fatalf("a late report: audit = %v", got)
	}
	w.passTime(clock, time.Hour) // the second's deadline
	if recs := w.audit(); recs[len(recs)-1]["outcome"] != "failed" || recs[len(recs)-1]["comment_id"] != float64(second.ID) {
		t.Fatalf("the second request at its deadline: audit = %v", w.trail())
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
	w.passTime(clock, 3*time.Hour)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
	if got := w.trail(); slices.Contains(got, "stage failed") {
		t.Fatalf("a staged request was failed at its deadline: %v", got)
	}
}

// A request the staging side said it started is not failed at the
// deadline: its report came; the completion it reports later is taken.
func TestStageRequestStartedIsNotFailedAtTheDeadline(t *testing.T) {
	t.Parallel()
	clock := &movingClock{t: time.Now()}
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	c := w.comment(maintainer, "/stage-results 31147925932")
	w.callback("stage-results-started", c.ID, runR1, false)
	w.passTime(clock, 3*time.Hour)
	mustContain(t, "in progress", w.ack(), "staging in progress")
	w.callback("stage-results-completed", c.ID, runR1, true)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
}

// A comment holding a pin and a stage request, deleted by another
// maintainer while GitHub cannot tell that maintainer's role: the pin is
// revoked at once (fail closed), and the stage request, whose take-back
// cannot be decided, stays, audited, instead of holding the revocation up.
func TestDeletedCommentRevokesItsPinWhileTheStageTakeBackCannotBeChecked(t *testing.T) {
	t.Parallel()
	w := stageWorld(t, "")
	m2 := user{"maintainer2", 5003, "User"}
	w.gh.AddUser(m2.login, m2.id, "User")
	w.gh.SetRole(theRepo, m2.login, "write")
	c := w.comment(maintainer, "/reuse-sweep-run 31147925932\n/stage-results 31147925932")
	mustContain(t, "pin", strings.Join(w.replies(), "\n"), "pinned run")
	w.gh.Inject(permissionRoute, githubtest.Fault{Status: 502})
	w.gh.DeleteComment(c.ID)
	w.commentEvent("deleted", maintainer, m2, c.ID, c.Body, "")
	tr := w.trail()
	if !slices.Contains(tr, "pin revoked") || !slices.Contains(tr, "stage kept") {
		t.Fatalf("audit = %v, want the pin revoked and the stage request kept", tr)
	}
	w.gh.Heal(permissionRoute)
	w.push("c2")
	if st := w.statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep") {
		t.Fatalf("the push after the deletion = %+v, want a sweep", st)
	}
}
