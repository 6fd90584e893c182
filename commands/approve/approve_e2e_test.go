package approve_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands/approve"
	"github.com/SemiAnalysisAI/opsbot/internal/e2e"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// runEvent sends workflow_run (requested or completed) for a dispatched run,
// as GitHub does: its head is the default branch's, it lists no PR.
func (w *world) runEvent(action string, d githubtest.WorkflowDispatch) {
	w.T.Helper()
	run := w.GH.RunOf(theRepo, d.RunID)
	p := e2e.Payload(w.T, "workflow_run", action)
	e2e.SetPath(p, "repository.full_name", theRepo)
	e2e.SetPath(p, "workflow_run.id", d.RunID)
	e2e.SetPath(p, "workflow_run.head_sha", run.HeadSHA)
	e2e.SetPath(p, "workflow_run.head_branch", run.HeadBranch)
	e2e.SetPath(p, "workflow_run.event", "workflow_dispatch")
	e2e.SetPath(p, "workflow_run.display_title", run.DisplayTitle)
	e2e.SetPath(p, "workflow_run.path", e2e.ExternalWorkflow)
	e2e.SetPath(p, "workflow_run.pull_requests", []any{})
	e2e.SetPath(p, "workflow_run.conclusion", run.Conclusion)
	w.Send("workflow_run", p)
}

// completeApproval finishes a dispatched run with its results, tells opsbot
// as GitHub does, and waits for the approval to complete.
func (w *world) completeApproval(clock *movingClock, d githubtest.WorkflowDispatch) string {
	w.T.Helper()
	w.GH.CompleteRun(theRepo, d.RunID, "success", resultArtifacts)
	w.runEvent("completed", d)
	w.PassTime(clock, record.WakeGap)
	return w.WaitApproval("the approval completed", "completed:")
}

func (w *world) approvalOutcomes() []string {
	var out []string
	for _, r := range w.AuditRecords() {
		if r["kind"] == "approval" {
			out = append(out, r["outcome"].(string))
		}
	}
	return out
}

// The whole path: a maintainer approves the fork PR's exact head, opsbot
// dispatches the trusted workflow for its merge commit and binds the run
// GitHub names; once the run finishes with results it counts as this PR's
// sweep of that head: it is pinned by id, and the next push, within the
// allowed paths, skips its sweep on it. Each step is in the status comment,
// in a comment of its own at the end, and in the audit.
func TestApprovedSweepOfAForkIsDispatchedBoundAndReused(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "      min_role: maintain\n    reuse:\n      allowed_paths: [\"perf-changelog.yaml\"]\n", clock)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	if d.WorkflowID != e2e.ExternalWorkflowID || d.Ref != "main" || !d.Details {
		t.Fatalf("dispatch %+v; want e2e-tests.yml on main with return_run_details", d)
	}
	if d.Inputs["pr-number"] != strconv.Itoa(thePR) || d.Inputs["head-sha"] != e2e.SHA("c1") || d.Inputs["merge-sha"] != w.GH.MergeCommit(theRepo, thePR) ||
		!strings.HasPrefix(d.Inputs["approval-id"], "opsbot-approval-") {
		t.Fatalf("dispatch inputs %v; want the PR, its head, its merge commit and the approval's id", d.Inputs)
	}
	runURL := "https://github.com/" + theRepo + "/actions/runs/" + strconv.FormatInt(d.RunID, 10)
	st := w.WaitApproval("the run bound", "waiting for the run")
	e2e.MustContain(t, "status", st, "approved by @maintainer for head `"+e2e.SHA("c1")[:7]+"`", "approved head `"+e2e.SHA("c1")+"` (from `"+e2e.ForkRepo+"`",
		"run ["+strconv.FormatInt(d.RunID, 10)+"]("+runURL+")")

	// The run finishes; GitHub tells it. The approval completes.
	w.GH.CompleteRun(theRepo, d.RunID, "success", resultArtifacts)
	w.runEvent("completed", d)
	w.PassTime(clock, record.WakeGap)
	st = w.WaitApproval("the approval completed", "completed:")
	e2e.MustContain(t, "status", st, "succeeded with its results")
	e2e.MustContain(t, "the closing comment", w.LastReply(), "@maintainer the external sweep of `"+e2e.SHA("c1")[:7]+"` you approved finished")
	if got := strings.Join(w.approvalOutcomes(), " "); got != "active dispatched completed" {
		t.Fatalf("approval audit %q; want active dispatched completed", got)
	}

	// The run counts as the head's sweep: pinned by id, the next push
	// (within the allowed paths) skips its sweep on it.
	w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(d.RunID, 10))
	e2e.MustContain(t, "the pin's reply", w.LastReply(), "pinned")
	w.Push("c2", "perf-changelog.yaml")
	st2 := w.Statuses("c2")
	if len(st2) == 0 || !strings.HasPrefix(st2[len(st2)-1].Description, "skip") {
		t.Fatalf("c2's statuses %+v; want a skip on the approved run", st2)
	}
	dec := w.decisionOf(e2e.SHA("c2"))
	if dec["run_id"] != float64(d.RunID) {
		t.Fatalf("c2's decision %v; want it to reuse run %d", dec, d.RunID)
	}
}

// decisionOf is the audit's decision record for head.
func (w *world) decisionOf(head string) map[string]any {
	w.T.Helper()
	for _, r := range w.AuditRecords() {
		if r["kind"] == "decision" && r["head_sha"] == head {
			return r
		}
	}
	return nil
}

// Refusals: a SHA that is not the head (the maintainer names what they
// read), a reader's approval, a PR whose head is in the repository itself.
// None dispatches anything.
func TestApprovalsThatAreRefused(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c0")[:9])
	e2e.MustContain(t, "reply", w.LastReply(), "I did not approve the sweep", "`"+e2e.SHA("c0")[:9]+"` is not this PR's head, `"+e2e.SHA("c1")[:7]+"`")
	w.Comment(reader, "/approve-sweep "+e2e.SHA("c1"))
	e2e.MustContain(t, "reader's reply", w.LastReply(), "maintain")
	// The head's own short SHA: a fork's author can make a commit that
	// starts the same way, so only the whole SHA names what was read.
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1")[:12])
	e2e.MustContain(t, "short SHA's reply", w.LastReply(), "name the head by its full SHA")
	w.Comment(maintainer, "/approve-sweep c1c1")
	e2e.MustContain(t, "usage reply", w.LastReply(), "is not a commit SHA")
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = 0, "" })
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	e2e.MustContain(t, "reply", w.LastReply(), "not a fork's")
	w.Settle()
	if ds := w.GH.WorkflowDispatches(); len(ds) != 0 {
		t.Fatalf("dispatched %+v after refusals", ds)
	}
}

// A push before the dispatch (here GitHub is still making the merge
// commit) expires the approval: nothing is dispatched, and the approver is
// told to approve the new head once read.
func TestPushBeforeTheDispatchExpiresTheApproval(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	w.WaitApproval("the approval waiting for the merge commit", "still making the PR's merge commit")
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
	w.Push("c2")
	w.PassTime(clock, record.WakeGap)
	st := w.WaitApproval("the approval expired", "expired:")
	e2e.MustContain(t, "status", st, "a push (head `"+e2e.SHA("c2")[:7]+"`) came before the sweep was dispatched")
	clock.Add(time.Minute)
	time.Sleep(100 * time.Millisecond) // the ticker looks every 10 ms: nothing is due
	w.Settle()
	if ds := w.GH.WorkflowDispatches(); len(ds) != 0 {
		t.Fatalf("dispatched %+v after the push", ds)
	}
	if got := strings.Join(w.approvalOutcomes(), " "); got != "active expired" {
		t.Fatalf("approval audit %q; want active expired", got)
	}
}

// A run of the external workflow that no approval dispatched (a maintainer
// ran it by hand, say) is never a sweep of the PR.
func TestUnapprovedRunOfTheExternalWorkflowIsNeverEligible(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.AddRun(theRepo, githubtest.Run{ID: 555, WorkflowID: e2e.ExternalWorkflowID, Event: "workflow_dispatch", Status: "completed",
		Conclusion: "success", HeadSHA: e2e.SHA("b0"), HeadBranch: "main", Artifacts: resultArtifacts, PRs: []int{}})
	w.Comment(maintainer, "/reuse-sweep-run 555")
	e2e.MustContain(t, "reply", w.LastReply(), "run 555 is a run of the external PRs' workflow", "no maintainer's `/approve-sweep` of this PR dispatched")
	w.Push("c2")
	if !w.Swept("c2") {
		t.Fatalf("c2 skipped its sweep on an unapproved run: %+v", w.Statuses("c2"))
	}
}

// After a later push the approved run is pinned like any sweep: the path
// guard holds (a push outside the allowed paths sweeps), and on another
// fork PR the run is refused, since it counts for its own PR only. A bare
// command picks it as the newest sweep of the PR.
func TestApprovedRunCountsForItsPROnlyAndWithinThePathGuard(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "    reuse:\n      allowed_paths: [\"perf-changelog.yaml\"]\n", clock)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.completeApproval(clock, d)

	w.Push("c2", "perf-changelog.yaml")
	w.Comment(maintainer, "/reuse-sweep-run")
	e2e.MustContain(t, "bare pin's reply", w.LastReply(), "pinned", strconv.FormatInt(d.RunID, 10))
	w.Push("c3", "benchmarks/kimi.sh")
	if !w.Swept("c3") {
		t.Fatalf("c3 touched a file outside the allowed paths yet did not sweep: %+v", w.Statuses("c3"))
	}
	e2e.MustContain(t, "the invalid pin's notice", w.LastReply(), "benchmarks/kimi.sh")

	// Another fork PR cannot use it.
	w.GH.AddPR(theRepo, thePR+1, "author", "other", e2e.SHA("b0"), []string{e2e.SHA("d1")}, []string{"perf-changelog.yaml"})
	w.GH.SetPR(theRepo, thePR+1, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = e2e.ForkRepoID+1, "someone/InferenceX" })
	c := w.GH.AddComment(theRepo, thePR+1, maintLog, "/reuse-sweep-run "+strconv.FormatInt(d.RunID, 10))
	p := w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, "")
	e2e.SetPath(p, "issue.number", thePR+1)
	w.Send("issue_comment", p)
	var reply string
	for _, cm := range w.GH.Comments(theRepo, thePR+1) {
		reply = cm.Body
	}
	e2e.MustContain(t, "the other PR's reply", reply, "was dispatched for PR #"+strconv.Itoa(thePR)+"'s approved head, not for PR #"+strconv.Itoa(thePR+1))
}

// Where GitHub does not return a dispatched run's details (GitHub
// Enterprise Server before 3.21 refuses the field with 400), opsbot
// dispatches without it and binds the run its own account made whose name
// carries the approval's id, found when GitHub tells the run was requested.
// A run of the same workflow by someone else, named the same, is not it.
func TestApprovalWithoutRunDetailsBindsTheRunByItsName(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.RefuseRunDetails(theRepo)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	testkit.Eventually(t, "the dispatch without details", func() bool { return len(w.GH.WorkflowDispatches()) == 1 })
	d := w.GH.WorkflowDispatches()[0]
	if d.Details {
		t.Fatalf("the dispatch GitHub took asked for run details: %+v", d)
	}
	// A decoy: the same name, made by a maintainer by hand, newer.
	w.GH.AddRun(theRepo, githubtest.Run{ID: 9_000_000_001, WorkflowID: e2e.ExternalWorkflowID, Event: "workflow_dispatch", Status: "queued",
		HeadSHA: e2e.SHA("b0"), HeadBranch: "main", PRs: []int{}, DisplayTitle: githubtest.RunName(d.Inputs), ActorLogin: maintLog,
		ActorID: maintID, CreatedAt: time.Now().Add(time.Minute)})
	w.WaitApproval("dispatched, looking for its run", "GitHub named no run")
	w.runEvent("requested", d)
	w.PassTime(clock, record.WakeGap)
	st := w.WaitApproval("the run found", "found the dispatched run")
	e2e.MustContain(t, "status", st, "["+strconv.FormatInt(d.RunID, 10)+"]")
	if strings.Contains(st, "9000000001") {
		t.Fatalf("the decoy run was bound: %s", st)
	}
	// The bound run is the PR's sweep once it finishes.
	w.completeApproval(clock, d)
	w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(d.RunID, 10))
	e2e.MustContain(t, "the pin's reply", w.LastReply(), "pinned")
}

// /approve-sweep cancel revokes an approval whose run is under way: GitHub
// is asked to cancel the run, and the run counts for nothing.
func TestCancelRevokesTheApprovalAndItsRun(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.Comment(maintainer, "/approve-sweep cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "revoked the approval of `"+e2e.SHA("c1")[:7]+"`", "GitHub was asked to cancel it")
	if r := w.GH.RunOf(theRepo, d.RunID); r.Conclusion != "cancelled" {
		t.Fatalf("run %+v not cancelled", r)
	}
	w.GH.CompleteRun(theRepo, d.RunID, "success", resultArtifacts) // as if it had finished anyway
	w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(d.RunID, 10))
	e2e.MustContain(t, "reply", w.LastReply(), "revoked, so it counts for nothing")
}

// A workflow GitHub does not find fails the approval, saying so to the
// approver, in the status comment and in the audit.
func TestApprovalOfAWorkflowGitHubDoesNotFindFails(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := newWorldOpts(t, worldOpts{Repo: "    external:\n      workflow: .github/workflows/missing.yml\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	w.GH.SetRole(theRepo, maintLog, "maintain")
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = e2e.ForkRepoID, e2e.ForkRepo })
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	st := w.WaitApproval("the approval failed", "failed:")
	e2e.MustContain(t, "status", st, "GitHub did not find the workflow `.github/workflows/missing.yml` on `main` (404")
	e2e.MustContain(t, "the closing comment", w.LastReply(), "the external sweep of `"+e2e.SHA("c1")[:7]+"` you approved failed")
	if got := strings.Join(w.approvalOutcomes(), " "); got != "active failed" {
		t.Fatalf("approval audit %q; want active failed", got)
	}
}

// An approval that expires while its run goes on (GitHub would not cancel
// it) leaves a run that counts for nothing, even when it then succeeds.
func TestExpiredApprovalsRunNeverCounts(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.GH.Inject("POST /repos/{owner}/{repo}/actions/runs/{id}/cancel", githubtest.Fault{Status: 500})
	w.PassTime(clock, 13*time.Hour)
	st := w.WaitApproval("the approval expired", "expired:")
	e2e.MustContain(t, "status", st, "did not finish within 12h of the approval", "GitHub did not cancel it")
	w.GH.CompleteRun(theRepo, d.RunID, "success", resultArtifacts)
	w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(d.RunID, 10))
	e2e.MustContain(t, "reply", w.LastReply(), "was dispatched for an approval that expired, so it counts for nothing")
}

// For staging too, the approved head must still be a commit of the PR: a
// force-push that drops it leaves its run unstaged.
func TestApprovedRunIsNotStagedOnceItsHeadIsGone(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, e2e.StageConfig, clock)
	w.GH.AddRepo(e2e.StagingRepo, "stage.yml", 500)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.completeApproval(clock, d)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.Commits = []string{e2e.SHA("f9")} })
	w.Comment(maintainer, "/stage-results "+strconv.FormatInt(d.RunID, 10))
	e2e.MustContain(t, "reply", w.LastReply(), "is not a commit of PR #"+strconv.Itoa(thePR))
	if len(w.GH.Dispatches()) != 0 {
		t.Fatalf("staged: %+v", w.GH.Dispatches())
	}
}

// A dispatch whose answer is lost (GitHub made the run, the connection
// closed) is not sent again: the engine reads GitHub back before the
// approval says anything, and the run is found by its name and bound.
func TestLostDispatchAnswerIsFoundNotRepeated(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.DropDispatchAnswers(theRepo, 1)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	st := w.WaitApproval("the run found", "found by its name after a dispatch whose answer was lost")
	if strings.Contains(st, "did not answer") {
		t.Fatalf("said GitHub did not answer before the read back found the run:\n%s", st)
	}
	ds := w.GH.WorkflowDispatches()
	if len(ds) != 1 {
		t.Fatalf("%d dispatches; want the one whose answer was lost", len(ds))
	}
	e2e.MustContain(t, "status", st, "["+strconv.FormatInt(ds[0].RunID, 10)+"]")
}

// Revoking an approval whose run GitHub has not named yet cancels the run
// opsbot's account made for it, found by its name.
func TestCancelBeforeTheRunIsFoundCancelsItByName(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.RefuseRunDetails(theRepo)
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	w.WaitApproval("dispatched, looking for its run", "GitHub named no run")
	d := w.GH.WorkflowDispatches()[0]
	w.Comment(maintainer, "/approve-sweep cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "revoked the approval", "GitHub was asked to cancel it")
	if r := w.GH.RunOf(theRepo, d.RunID); r.Conclusion != "cancelled" {
		t.Fatalf("run %+v not cancelled", r)
	}
}

// /approve-sweep cancel revokes the approval under way and every earlier
// one whose run counts, not only the newest: none of their runs counts
// after. A run re-run after its approval completed counts for nothing
// either: it is another measurement than the one the approval saw.
func TestCancelRevokesEveryCompletedApproval(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	var runs []int64
	for i := range 3 {
		w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
		testkit.Eventually(t, "the dispatch", func() bool { return len(w.GH.WorkflowDispatches()) == i+1 })
		d := w.GH.WorkflowDispatches()[i]
		w.WaitApproval("the run bound", "run ["+strconv.FormatInt(d.RunID, 10)+"]", "waiting for the run")
		runs = append(runs, d.RunID)
		if i == 2 {
			break // the third stays under way
		}
		w.GH.CompleteRun(theRepo, d.RunID, "success", resultArtifacts)
		w.runEvent("completed", d)
		w.PassTime(clock, record.WakeGap)
		testkit.Eventually(t, "the approval completed", func() bool {
			return strings.Count(strings.Join(w.approvalOutcomes(), " "), "completed") == i+1
		})
	}
	w.GH.RerunRun(theRepo, runs[1])
	w.GH.CompleteRun(theRepo, runs[1], "success", resultArtifacts)
	w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(runs[1], 10))
	e2e.MustContain(t, "reply", w.LastReply(), "was re-run after its approval completed: its attempt 2 is not attempt 1")

	w.Comment(maintainer, "/approve-sweep cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "revoked the approval of `"+e2e.SHA("c1")[:7]+"` by @maintainer under way",
		"GitHub was asked to cancel it", "revoked the approvals of this PR whose runs counted", strconv.FormatInt(runs[0], 10),
		strconv.FormatInt(runs[1], 10))
	if r := w.GH.RunOf(theRepo, runs[2]); r.Conclusion != "cancelled" {
		t.Fatalf("the run under way %+v was not cancelled", r)
	}
	for _, id := range runs[:1] {
		w.Comment(maintainer, "/reuse-sweep-run "+strconv.FormatInt(id, 10))
		e2e.MustContain(t, "reply", w.LastReply(), "was revoked, so it counts for nothing")
	}
	w.Comment(maintainer, "/approve-sweep cancel")
	e2e.MustContain(t, "reply", w.LastReply(), "there is no approval of this PR to revoke")
}

// While a dispatch whose answer was lost may have made a run that opsbot
// is still looking for, a new approval (of a head pushed since) is refused:
// it would leave that run running unseen.
func TestNewApprovalWaitsForALostDispatch(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.DropDispatchAnswers(theRepo, 1)
	// The run's read back, right after the dispatch (the step's look for
	// an earlier attempt's run comes first), fails: the run is looked for
	// later.
	w.GH.Inject(routeWorkflowRuns, githubtest.Fault{Status: 403, Body: `{"message":"Resource not accessible by integration"}`, Times: 1, Skip: 1})
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	w.WaitApproval("the unanswered dispatch", "GitHub did not answer the dispatch")
	w.GH.Push(theRepo, thePR, []string{e2e.SHA("c2")}) // its webhook not yet here
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c2"))
	e2e.MustContain(t, "reply", w.LastReply(), "may have started a run that opsbot is still looking for")
	if n := len(w.GH.WorkflowDispatches()); n != 1 {
		t.Fatalf("%d dispatches; want the one whose answer was lost", n)
	}
}

// With main_sweeps: false, the completed approved run is the head's own
// sweep: opsbot/reuse-ready says a merge would take it.
func TestApprovedRunMakesTheHeadReady(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "    main_sweeps: false\n", clock)
	w.SendSync(e2e.SHA("c1"), "") // opsbot learns the head
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.completeApproval(clock, d)
	var last githubtest.Status
	for _, st := range w.Statuses("c1") {
		if st.Context == "opsbot/reuse-ready" {
			last = st
		}
	}
	if last.State != "success" || !strings.Contains(last.Description, "the head's own sweep, run "+strconv.FormatInt(d.RunID, 10)) {
		t.Fatalf("opsbot/reuse-ready on c1: %+v", last)
	}
}

// As a GitHub App, a completed approval offers its run on the head's check
// run as any finished sweep is offered; a maintainer's click on Reuse for
// next push pins it as them.
func TestApprovedRunOffersCheckRunButtons(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := newWorldOpts(t, worldOpts{App: true, Repo: "    external:\n      workflow: " + e2e.ExternalWorkflow + "\n", Deps: func(d *app.Deps) {
		d.Now, d.SeqEvery = clock.Now, 10*time.Millisecond
	}})
	w.GH.AddWorkflow(theRepo, "e2e-tests.yml", e2e.ExternalWorkflowID)
	w.GH.SetRole(theRepo, maintLog, "maintain")
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.HeadRepoID, p.HeadRepo = e2e.ForkRepoID, e2e.ForkRepo })
	w.SendSync(e2e.SHA("c1"), "") // opsbot learns the head
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	w.WaitApproval("the run bound", "waiting for the run")
	w.completeApproval(clock, d)
	var offer *githubtest.CreatedCheckRun
	for _, c := range w.CheckRunsOn("c1") {
		if strings.Contains(c.Title, "Approved sweep run "+strconv.FormatInt(d.RunID, 10)+" finished") {
			offer = &c
		}
	}
	if ids, _ := e2e.Offered(t); offer == nil || strings.Join(offer.Actions, ",") != ids || !strings.HasPrefix(offer.ExternalID, fmt.Sprintf("%d:%d:", thePR, d.RunID)) {
		t.Fatalf("check runs on c1: %+v", w.CheckRunsOn("c1"))
	}
	w.ClickCheckRun(maintainer, "c1", "reuse", d.RunID)
	e2e.MustContain(t, "the click's reply", w.LastReply(), "pinned")
}

// An approval of an older head that was never dispatched (GitHub was still
// making its merge commit) is replaced by the approval of the new head,
// and only the new head is dispatched.
func TestApprovalOfANewHeadReplacesOneNeverDispatched(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "", clock)
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
	w.WaitApproval("the approval waiting for the merge commit", "still making the PR's merge commit")
	w.GH.Push(theRepo, thePR, []string{e2e.SHA("c2")}) // its webhook not yet here
	w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
	w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c2"))
	d := w.DispatchedRun()
	if d.Inputs["head-sha"] != e2e.SHA("c2") {
		t.Fatalf("dispatched %+v; want the new head", d)
	}
	if got := strings.Join(w.approvalOutcomes(), " "); !strings.HasPrefix(got, "active expired active") {
		t.Fatalf("approval audit %q; want the first expired (replaced) before the second began", got)
	}
}

// reloadWithout writes the configuration without the repository's
// external section and reloads it, as an operator does.
func (w *world) reloadWithoutExternal() {
	w.T.Helper()
	path := filepath.Join(w.Dir, "opsbot.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		w.T.Fatal(err)
	}
	next := strings.Replace(string(raw), "    external:\n      workflow: "+e2e.ExternalWorkflow+"\n", "", 1)
	if next == string(raw) {
		w.T.Fatal("the configuration has no external section to remove")
	}
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		w.T.Fatal(err)
	}
	if r := w.Call(http.MethodPost, "/api/v1/reload", ""); r.Code != http.StatusOK {
		w.T.Fatalf("reload: %d %s", r.Code, r.Body)
	}
}

// A reload that removes repos[].external while an approval waits: the
// approver can still revoke it (cancel is taken first, whatever the
// configuration says now), and its next wake-up ends it without
// dispatching the fork's head (before, cancel was refused as "no workflow
// for external PRs" while the wake-ups went on to dispatch it).
func TestApprovalAfterAReloadRemovedItsWorkflow(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T) (*world, *movingClock) {
		clock := e2e.NewClock()
		w := approveWorld(t, "", clock)
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = true })
		w.Comment(maintainer, "/approve-sweep "+e2e.SHA("c1"))
		w.WaitApproval("waiting for the merge commit", "GitHub is still making")
		w.reloadWithoutExternal()
		w.GH.SetPR(theRepo, thePR, func(p *githubtest.PR) { p.MergeableUnknown = false })
		return w, clock
	}
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		w, _ := start(t)
		w.Comment(maintainer, "/approve-sweep cancel")
		e2e.MustContain(t, "reply", w.LastReply(), "@maintainer revoked the approval of `c1c1c1c`")
		if n := len(w.GH.WorkflowDispatches()); n != 0 {
			t.Fatalf("%d dispatches after the approval was revoked", n)
		}
	})
	t.Run("its next wake-up", func(t *testing.T) {
		t.Parallel()
		w, clock := start(t)
		w.PassTime(clock, approve.Poll)
		st := w.WaitApproval("the approval ended", "expired: the repository's configuration changed: no workflow for external PRs is configured any more")
		if n := len(w.GH.WorkflowDispatches()); n != 0 {
			t.Fatalf("%d dispatches for a workflow the configuration no longer names:\n%s", n, st)
		}
	})
}

// repos[].external.allow_users admits a listed login whatever its role, as
// every section's allow_users does (before, the section was left out of
// the logins bound to accounts, so a listed login allowed nobody).
func TestExternalAllowUsersAdmitsAListedLogin(t *testing.T) {
	t.Parallel()
	clock := e2e.NewClock()
	w := approveWorld(t, "      allow_users: [reader]\n", clock)
	w.Comment(reader, "/approve-sweep "+e2e.SHA("c1"))
	d := w.DispatchedRun()
	if d.Inputs["head-sha"] != e2e.SHA("c1") {
		t.Fatalf("dispatch %+v", d)
	}
	st := w.WaitApproval("the run bound", "waiting for the run")
	e2e.MustContain(t, "status", st, "approved by @reader")
}

// A cancel stored while the step that dispatches the approved sweep reads
// the PR goes first: the dispatch is sent through the engine's act path,
// whose stop check is the last thing before it; the cancel revokes the
// approval and nothing is dispatched.
func TestCancelStoredBeforeTheDispatchGoesFirst(t *testing.T) {
	t.Parallel()
	w := approveWorld(t, "", e2e.NewClock())
	const prRoute = "GET /repos/{owner}/{repo}/pulls/{n}"
	// The command reads the PR, the approval's first step reads it and
	// marks the dispatch; the next, which sends it, reads it again: held
	// while the cancel comes.
	arrived, release := w.GH.HoldAfter(prRoute, 2)
	defer release()
	c := w.GH.AddComment(theRepo, thePR, maintLog, "/approve-sweep "+e2e.SHA("c1"))
	w.PostNoSettle("issue_comment", w.CommentPayload("created", maintainer, maintainer, c.ID, c.Body, ""))
	testkit.Arrives(t, arrived, "the dispatching step reads the PR")
	cancel := w.GH.AddComment(theRepo, thePR, maintLog, "/approve-sweep cancel")
	w.PostNoSettle("issue_comment", w.CommentPayload("created", maintainer, maintainer, cancel.ID, cancel.Body, ""))
	release()
	w.WaitApproval("the approval revoked", "revoked:")
	if ds := w.GH.WorkflowDispatches(); len(ds) != 0 {
		t.Fatalf("dispatched %+v after an acknowledged cancel", ds)
	}
}
