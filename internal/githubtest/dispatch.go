package githubtest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// WorkflowDispatch is a workflow_dispatch the fake was sent.
type WorkflowDispatch struct {
	Repo       string
	WorkflowID int64
	Ref        string
	Inputs     map[string]string
	Details    bool  // return_run_details was asked
	RunID      int64 // the run it made
}

// AddWorkflow registers another workflow of a repository.
func (f *Fake) AddWorkflow(repo, file string, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].Workflows[file] = id
}

// RefuseRunDetails makes the repository's dispatches refuse
// return_run_details with 400, as GitHub Enterprise Server before 3.21
// does; the dispatch's run is then named by RunName.
func (f *Fake) RefuseRunDetails(repo string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].noRunDetails = true
}

// DropDispatchAnswers makes the repository's next n workflow dispatches
// make their run and then close the connection without answering: a
// dispatch whose answer is lost.
func (f *Fake) DropDispatchAnswers(repo string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[strings.ToLower(repo)].dropDispatches = n
}

// statusDrop is a handler's answer that closes the connection unanswered.
const statusDrop = -1

// WorkflowDispatches are the workflow dispatches sent, in order.
func (f *Fake) WorkflowDispatches() []WorkflowDispatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]WorkflowDispatch(nil), f.workflowDispatches...)
}

// RunName is the name (display_title) the fake gives a dispatched run: the
// run-name of the example workflow for external PRs, which shows the
// approval-id input.
func RunName(inputs map[string]string) string {
	return fmt.Sprintf("External sweep of PR #%s (%s)", inputs["pr-number"], inputs["approval-id"])
}

// CompleteRun finishes a run with conclusion and artifacts.
func (f *Fake) CompleteRun(repo string, id int64, conclusion string, artifacts []Artifact) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[id]
	run.Status, run.Conclusion = "completed", conclusion
	run.Artifacts = append([]Artifact(nil), artifacts...)
}

// RunOf is a copy of a run as the fake holds it (nil: none).
func (f *Fake) RunOf(repo string, id int64) *Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[id]
	if run == nil {
		return nil
	}
	c := *run
	return &c
}

// workflowDispatch answers POST /actions/workflows/{id}/dispatches: a run
// of the workflow on ref, made by the token's account, queued; with
// return_run_details (where the repository knows it) 200 and its id, else
// 204.
func (f *Fake) workflowDispatch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		Ref     string            `json:"ref"`
		Inputs  map[string]string `json:"inputs"`
		Details *bool             `json:"return_run_details"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"}
	}
	key := r.PathValue("id")
	wf, ok := repo.Workflows[key]
	if !ok {
		if id, err := strconv.ParseInt(key, 10, 64); err == nil {
			for _, have := range repo.Workflows {
				if have == id {
					wf, ok = id, true
				}
			}
		}
	}
	if !ok {
		return http.StatusNotFound, notFound()
	}
	if in.Details != nil && repo.noRunDetails {
		return http.StatusBadRequest, map[string]any{"message": "Invalid request.\n\n\"return_run_details\" is not a permitted key.",
			"documentation_url": "https://docs.github.com/enterprise-server@3.20/rest/actions/workflows#create-a-workflow-dispatch-event"}
	}
	tip := repo.BranchTips[in.Ref]
	if tip == "" && in.Ref == repo.DefaultBranch {
		for _, p := range repo.PRs {
			if p.BaseRef == "" || p.BaseRef == in.Ref {
				tip = p.BaseSHA
				break
			}
		}
	}
	if tip == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "No ref found for: " + in.Ref}
	}
	f.nextID++
	id := 7_000_000_000 + f.nextID
	self := f.users[strings.ToLower(f.self)]
	run := &Run{ID: id, WorkflowID: wf, Event: "workflow_dispatch", Status: "queued", HeadSHA: tip, HeadBranch: in.Ref, Attempt: 1,
		CreatedAt: f.now(), PRs: []int{}, DisplayTitle: RunName(in.Inputs), Inputs: in.Inputs}
	if self != nil {
		run.ActorLogin, run.ActorID = self.GetLogin(), self.GetID()
	}
	repo.Runs[id] = run
	full := repo.Owner + "/" + repo.Name
	f.workflowDispatches = append(f.workflowDispatches, WorkflowDispatch{Repo: full, WorkflowID: wf, Ref: in.Ref, Inputs: in.Inputs,
		Details: in.Details != nil && *in.Details, RunID: id})
	if repo.dropDispatches > 0 {
		repo.dropDispatches--
		return statusDrop, nil
	}
	if in.Details == nil || !*in.Details {
		return http.StatusNoContent, nil
	}
	return http.StatusOK, map[string]any{"workflow_run_id": id,
		"run_url":  fmt.Sprintf("%srepos/%s/actions/runs/%d", f.URL, full, id),
		"html_url": fmt.Sprintf("https://github.com/%s/actions/runs/%d", full, id)}
}

// cancelRun answers POST /actions/runs/{id}/cancel: a run not finished is
// cancelled (202), a finished one is a conflict (409).
func (f *Fake) cancelRun(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	if run.Status == "completed" {
		return http.StatusConflict, map[string]string{"message": "Cannot cancel a workflow run that is completed."}
	}
	run.Status, run.Conclusion = "completed", "cancelled"
	return http.StatusAccepted, map[string]any{}
}

// rerunFailed re-runs a completed run's failed jobs as its next attempt,
// as GitHub does: a run not completed, or with nothing failed, is refused
// (403), and the ask is recorded (Reruns).
func (f *Fake) rerunFailed(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	if run.Status != "completed" {
		return http.StatusForbidden, map[string]string{"message": "This workflow run is not completed"}
	}
	switch run.Conclusion {
	case "failure", "cancelled", "timed_out", "startup_failure":
	default:
		return http.StatusForbidden, map[string]string{"message": "This workflow run has no failed jobs to re-run"}
	}
	f.reruns = append(f.reruns, id)
	run.Attempt = max(run.Attempt, 1) + 1
	run.Status, run.Conclusion, run.StartedAt = "queued", "", f.now()
	return http.StatusCreated, map[string]any{}
}

// Reruns are the runs whose failed jobs opsbot asked to re-run, in order.
func (f *Fake) Reruns() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.reruns...)
}

// testMerge is GitHub's merge commit of an open PR (merge_commit_sha): the
// head merged into its base's tip.
func (repo *Repo) testMerge(p *PR) string {
	sum := sha1.Sum([]byte("test-merge\x00" + repo.branchTip(p) + "\x00" + p.Head()))
	return hex.EncodeToString(sum[:])
}

// MergeCommit is GitHub's merge commit of an open PR (its
// merge_commit_sha).
func (f *Fake) MergeCommit(repo string, n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[strings.ToLower(repo)]
	return r.testMerge(r.PRs[n])
}

// RerunRun starts a new attempt of a run, as "Re-run all jobs" does: the
// run is queued again at its next attempt.
func (f *Fake) RerunRun(repo string, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	run := f.repos[strings.ToLower(repo)].Runs[id]
	run.Attempt++
	run.Status, run.Conclusion, run.StartedAt = "queued", "", f.now()
}
