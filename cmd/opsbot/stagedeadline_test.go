package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
)

// movingClock is a clock the test moves.
type movingClock = e2e.Clock

// clockedStageWorld is a staging world whose server's clock the test moves,
// and which looks for due sequences often.
func clockedStageWorld(t *testing.T, repoExtra string, clock *movingClock) *world {
	t.Helper()
	w := newWorldOpts(t, worldOpts{Repo: stageCfg + repoExtra, Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	w.GH.AddRepo(stagingRepo, "stage.yml", 500)
	return w
}

// A stage request the staging side never reports on is failed when
// stage.report_timeout passes: the acknowledgement says why and how to ask
// again, and the audit records it; a request made later, whose deadline has
// not passed, is left waiting.
func TestStageRequestWithoutReportFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := clockedStageWorld(t, "      slot: accumulate\n      report_timeout: 2h\n", clock)
	first := w.Comment(maintainer, "/stage-results 31147925932")
	w.Settle()
	clock.Add(time.Hour)
	second := w.Comment(maintainer, "/stage-results 31147925932")
	w.Settle()
	w.PassTime(clock, time.Hour+time.Second) // the first's deadline passes, not the second's
	var fails int
	for _, r := range w.Replies() {
		if strings.Contains(r, "did not report within") {
			fails++
			mustContain(t, "failed acknowledgement", r, "staging run [31147925932](", ") failed: the staging side", "Ask again with `/stage-results 31147925932`")
		}
	}
	if fails != 1 {
		t.Fatalf("%d requests failed after the first's deadline, want 1: %q", fails, w.Replies())
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
	w.PassTime(clock, time.Hour) // the second's deadline
	if recs := w.audit(); recs[len(recs)-1]["outcome"] != "failed" || recs[len(recs)-1]["comment_id"] != float64(second.ID) {
		t.Fatalf("the second request at its deadline: audit = %v", w.trail())
	}
}

// A request whose staging side reported in time is not failed when its
// deadline passes.
func TestStageRequestReportedInTimeIsKept(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	c := w.Comment(maintainer, "/stage-results 31147925932")
	w.callback("stage-results-completed", c.ID, runR1, true)
	w.PassTime(clock, 3*time.Hour)
	mustContain(t, "staged", w.ack(), "@maintainer staged run [31147925932]")
	if got := w.trail(); slices.Contains(got, "stage failed") {
		t.Fatalf("a staged request was failed at its deadline: %v", got)
	}
}

// A request the staging side said it started is not failed at the
// deadline: its report came; the completion it reports later is taken.
func TestStageRequestStartedIsNotFailedAtTheDeadline(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := clockedStageWorld(t, "      report_timeout: 2h\n", clock)
	c := w.Comment(maintainer, "/stage-results 31147925932")
	w.callback("stage-results-started", c.ID, runR1, false)
	w.PassTime(clock, 3*time.Hour)
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
	m2 := user{Login: "maintainer2", ID: 5003, Kind: "User"}
	w.GH.AddUser(m2.Login, m2.ID, "User")
	w.GH.SetRole(theRepo, m2.Login, "write")
	c := w.Comment(maintainer, "/reuse-sweep-run 31147925932\n/stage-results 31147925932")
	mustContain(t, "pin", strings.Join(w.Replies(), "\n"), "pinned run")
	w.GH.Inject(permissionRoute, githubtest.Fault{Status: 502})
	w.GH.DeleteComment(c.ID)
	w.CommentEvent("deleted", maintainer, m2, c.ID, c.Body, "")
	tr := w.trail()
	if !slices.Contains(tr, "pin revoked") || !slices.Contains(tr, "stage kept") {
		t.Fatalf("audit = %v, want the pin revoked and the stage request kept", tr)
	}
	w.GH.Heal(permissionRoute)
	w.Push("c2")
	if st := w.Statuses("c2"); len(st) != 1 || !strings.HasPrefix(st[0].Description, "sweep") {
		t.Fatalf("the push after the deletion = %+v, want a sweep", st)
	}
}
