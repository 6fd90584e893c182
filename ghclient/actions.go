package ghclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/mdtext"
)

// WorkflowID returns the id of the workflow at path (.github/workflows/FILE),
// remembered for the process's life.
func (c *Client) WorkflowID(ctx context.Context, repo, workflowPath string) (int64, error) {
	key := strings.ToLower(repo) + "\x00" + workflowPath
	c.mu.Lock()
	id, ok := c.workflowIDs[key]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	o, r := split(repo)
	wf, resp, err := c.gh.Actions.GetWorkflowByFileName(ctx, o, r, path.Base(workflowPath))
	if err := wrap("reading workflow "+workflowPath, resp, err); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.workflowIDs[key] = wf.GetID()
	c.mu.Unlock()
	return wf.GetID(), nil
}

// Run reads a workflow run.
func (c *Client) Run(ctx context.Context, repo string, id int64) (*github.WorkflowRun, error) {
	o, r := split(repo)
	run, resp, err := c.gh.Actions.GetWorkflowRunByID(AfterWebhook(ctx), o, r, id)
	return run, wrap(fmt.Sprintf("reading run %d", id), resp, err)
}

// Artifacts lists every artifact of a run.
func (c *Client) Artifacts(ctx context.Context, repo string, runID int64) ([]*github.Artifact, error) {
	o, r := split(repo)
	var all []*github.Artifact
	opt := &github.ListOptions{PerPage: 100}
	err := paginate(fmt.Sprintf("listing the artifacts of run %d", runID), opt, 20,
		func() ([]*github.Artifact, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListWorkflowRunArtifacts(ctx, o, r, runID, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.Artifacts, resp, nil
		},
		func(page []*github.Artifact) bool { all = append(all, page...); return true })
	if err != nil {
		return nil, err
	}
	return all, nil
}

// WorkflowRuns lists runs of a workflow for a branch and event, newest
// first, at most max of them.
func (c *Client) WorkflowRuns(ctx context.Context, repo string, workflowID int64, branch, event string, max int) ([]*github.WorkflowRun, error) {
	return c.listRuns(ctx, repo, workflowID, &github.ListWorkflowRunsOptions{Branch: branch, Event: event}, "listing the sweep runs of "+branch, max)
}

// listRuns lists a workflow's runs as opt filters them, newest first, at
// most max.
func (c *Client) listRuns(ctx context.Context, repo string, workflowID int64, opt *github.ListWorkflowRunsOptions, what string, max int) ([]*github.WorkflowRun, error) {
	if max <= 0 {
		return nil, nil
	}
	o, r := split(repo)
	opt.ListOptions = github.ListOptions{PerPage: 100}
	var out []*github.WorkflowRun
	err := paginate(what, &opt.ListOptions, max,
		func() ([]*github.WorkflowRun, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListWorkflowRunsByID(ctx, o, r, workflowID, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.WorkflowRuns, resp, nil
		},
		func(page []*github.WorkflowRun) bool { out = append(out, page...); return len(out) < max })
	if err != nil {
		return nil, err
	}
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// CommitRuns lists the workflow runs (every workflow) of a commit, at most
// 5 pages of 100.
func (c *Client) CommitRuns(ctx context.Context, repo, sha string) ([]*github.WorkflowRun, error) {
	o, r := split(repo)
	var out []*github.WorkflowRun
	opt := &github.ListWorkflowRunsOptions{HeadSHA: sha, ListOptions: github.ListOptions{PerPage: 100}}
	err := paginate("listing the runs of "+mdtext.ShortSHA(sha), &opt.ListOptions, 5,
		func() ([]*github.WorkflowRun, *github.Response, error) {
			list, resp, err := c.gh.Actions.ListRepositoryWorkflowRuns(ctx, o, r, opt)
			if err != nil {
				return nil, resp, err
			}
			return list.WorkflowRuns, resp, nil
		},
		func(page []*github.WorkflowRun) bool { out = append(out, page...); return true })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Dispatch sends a repository_dispatch event.
func (c *Client) Dispatch(ctx context.Context, repo, eventType string, payload map[string]any) error {
	if c.dryRun {
		c.log.Info("dry-run: would dispatch", "repo", repo, "event_type", eventType, "payload", payload)
		return nil
	}
	o, r := split(repo)
	raw, err := jsonRaw(payload)
	if err != nil {
		return err
	}
	_, resp, err := c.gh.Repositories.Dispatch(ctx, o, r, github.DispatchRequestOptions{EventType: eventType, ClientPayload: raw})
	return wrap("dispatching "+eventType+" to "+repo, resp, err)
}

func jsonRaw(v any) (*json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the dispatch payload: %w", err)
	}
	raw := json.RawMessage(b)
	return &raw, nil
}

// Job is one job of a run's attempt, as coverage and time saved read it.
type Job struct {
	ID         int64
	URL        string // its page on GitHub
	Name       string
	Status     string
	Conclusion string
	Started    time.Time
	Completed  time.Time
	// Labels are the runner labels the job asked for (its runs-on).
	Labels []string
}

// maxJobPages bounds a run's job listing: 30 pages of 100 jobs.
const maxJobPages = 30

// ErrTooManyJobs is a run attempt with more jobs than opsbot reads (3,000).
var ErrTooManyJobs = errors.New("the run has more jobs than opsbot reads (3,000)")

// RunJobs lists the jobs of attempt of run runID, all pages; a run with
// more than 3,000 jobs is ErrTooManyJobs, never a part of its list.
func (c *Client) RunJobs(ctx context.Context, repo string, runID int64, attempt int) ([]Job, error) {
	o, r := split(repo)
	opt := &github.ListOptions{PerPage: 100}
	return listJobs(fmt.Sprintf("listing the jobs of run %d attempt %d", runID, attempt), opt, func() (*github.Jobs, *github.Response, error) {
		return c.gh.Actions.ListWorkflowJobsAttempt(ctx, o, r, runID, int64(max(attempt, 1)), opt)
	})
}

// RunJobsOfAllAttempts lists the jobs of every attempt of a run
// (filter=all), as the repository's recovery helper reads them: a job's
// URL may name an attempt before the latest.
func (c *Client) RunJobsOfAllAttempts(ctx context.Context, repo string, runID int64) ([]Job, error) {
	o, r := split(repo)
	opt := &github.ListWorkflowJobsOptions{Filter: "all", ListOptions: github.ListOptions{PerPage: 100}}
	return listJobs(fmt.Sprintf("listing the jobs of every attempt of run %d", runID), &opt.ListOptions, func() (*github.Jobs, *github.Response, error) {
		return c.gh.Actions.ListWorkflowJobs(ctx, o, r, runID, opt)
	})
}

// listJobs reads every page of a run's jobs, maxJobPages at most.
func listJobs(what string, opt *github.ListOptions, fetch func() (*github.Jobs, *github.Response, error)) ([]Job, error) {
	var out []Job
	for page := 0; ; page++ {
		if page == maxJobPages {
			return nil, fmt.Errorf("%s: %w", what, ErrTooManyJobs)
		}
		jobs, resp, err := fetch()
		if err := wrap(what, resp, err); err != nil {
			return nil, err
		}
		for _, j := range jobs.Jobs {
			out = append(out, Job{ID: j.GetID(), URL: j.GetHTMLURL(), Name: j.GetName(), Status: j.GetStatus(), Conclusion: j.GetConclusion(),
				Started: j.GetStartedAt().Time, Completed: j.GetCompletedAt().Time, Labels: j.Labels})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}

// FirstError is the first failure annotation of a job (its check run's: a
// failed step's error), its first line ("": none).
func (c *Client) FirstError(ctx context.Context, repo string, jobID int64) (string, error) {
	o, r := split(repo)
	list, resp, err := c.gh.Checks.ListCheckRunAnnotations(ctx, o, r, jobID, &github.ListOptions{PerPage: 50})
	if err := wrap(fmt.Sprintf("reading the annotations of job %d", jobID), resp, err); err != nil {
		return "", err
	}
	for _, a := range list {
		if a.GetAnnotationLevel() == "failure" {
			line, _, _ := strings.Cut(strings.TrimSpace(a.GetMessage()), "\n")
			return line, nil
		}
	}
	return "", nil
}

// DispatchedRun is the run a workflow dispatch made, as GitHub answers
// when asked for its details (ID 0: it did not say).
type DispatchedRun struct {
	ID  int64  `json:"workflow_run_id"`
	URL string `json:"html_url"`
}

// ErrNoRunDetails is GitHub refusing return_run_details (GitHub Enterprise
// Server before 3.21): dispatch again without it.
var ErrNoRunDetails = errors.New("GitHub does not return a dispatched run's details here")

// DispatchWorkflow runs the workflow at workflowPath on ref with inputs
// (POST /actions/workflows/{file}/dispatches). With details it asks for
// the new run's id (return_run_details): GitHub answers 200 with it, or,
// where it does not know the field, 400 (ErrNoRunDetails). A workflow
// GitHub does not find, or that takes no such dispatch, is a Refusal.
func (c *Client) DispatchWorkflow(ctx context.Context, repo, workflowPath, ref string, inputs map[string]string, details bool) (DispatchedRun, error) {
	what := fmt.Sprintf("dispatching %s on %s", workflowPath, ref)
	if c.dryRun {
		c.log.Info("dry-run: would dispatch a workflow", "repo", repo, "workflow", workflowPath, "ref", ref, "inputs", inputs)
		return DispatchedRun{}, &Refusal{Message: "opsbot runs with --dry-run and writes nothing to GitHub"}
	}
	body := map[string]any{"ref": ref, "inputs": inputs}
	if details {
		body["return_run_details"] = true
	}
	req, err := c.gh.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/actions/workflows/%s/dispatches", repo, path.Base(workflowPath)), body)
	if err != nil {
		return DispatchedRun{}, err
	}
	var out DispatchedRun
	resp, err := c.gh.Do(ctx, req, &out)
	var er *github.ErrorResponse
	if err != nil && errors.As(err, &er) && er.Response != nil {
		switch st := er.Response.StatusCode; {
		case details && (st == http.StatusBadRequest || st == http.StatusUnprocessableEntity) &&
			strings.Contains(strings.ToLower(er.Message+fmt.Sprint(er.Errors)), "return_run_details"):
			return DispatchedRun{}, fmt.Errorf("%s: %w", what, ErrNoRunDetails)
		case st == http.StatusNotFound, st == http.StatusBadRequest, st == http.StatusUnprocessableEntity:
			msg := er.Message
			if msg == "" {
				msg = http.StatusText(st)
			}
			return DispatchedRun{}, fmt.Errorf("%s: %w", what, &Refusal{Status: st, Message: msg})
		}
	}
	if err := refusal(what, resp, err); err != nil {
		return DispatchedRun{}, err
	}
	return out, nil
}

// CancelRun asks GitHub to cancel a workflow run (202); a run that has
// finished already (409) is not an error.
func (c *Client) CancelRun(ctx context.Context, repo string, id int64) error {
	if c.dryRun {
		c.log.Info("dry-run: would cancel a run", "repo", repo, "run", id)
		return nil
	}
	o, r := split(repo)
	resp, err := c.gh.Actions.CancelWorkflowRunByID(ctx, o, r, id)
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) || (resp != nil && resp.StatusCode == http.StatusConflict) {
		return nil
	}
	return wrap(fmt.Sprintf("cancelling run %d", id), resp, err)
}

// RerunFailedJobs asks GitHub to re-run the failed jobs of a completed
// run, and the jobs that need them, as the run's next attempt
// (POST actions/runs/{id}/rerun-failed-jobs, 201). GitHub's refusals (a
// run not completed, none failed, one too old to re-run, a missing
// permission) are Refusals.
func (c *Client) RerunFailedJobs(ctx context.Context, repo string, id int64) error {
	if c.dryRun {
		c.log.Info("dry-run: would re-run the failed jobs of a run", "repo", repo, "run", id)
		return dryRunRefusal
	}
	o, r := split(repo)
	resp, err := c.gh.Actions.RerunFailedJobsByID(ctx, o, r, id)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		// No such run, or no permission to see it: GitHub's clear no.
		return fmt.Errorf("re-running the failed jobs of run %d: %w", id, &Refusal{Status: http.StatusNotFound, Message: "Not Found"})
	}
	return refusal(fmt.Sprintf("re-running the failed jobs of run %d", id), resp, err)
}

// RunsSince lists a workflow's runs created at since or later, of any
// event and branch, newest first, at most max.
func (c *Client) RunsSince(ctx context.Context, repo string, workflowID int64, since time.Time, max int) ([]*github.WorkflowRun, error) {
	return c.listRuns(ctx, repo, workflowID, &github.ListWorkflowRunsOptions{Created: ">=" + since.UTC().Format(time.RFC3339)},
		"listing the runs of "+repo, max)
}

// DispatchedRuns lists the workflow_dispatch runs of a workflow on branch
// that actor triggered, created at since or later, newest first, at most
// max (whoever else dispatches the workflow cannot push them out of view).
func (c *Client) DispatchedRuns(ctx context.Context, repo string, workflowID int64, branch, actor string, since time.Time, max int) ([]*github.WorkflowRun, error) {
	return c.listRuns(ctx, repo, workflowID, &github.ListWorkflowRunsOptions{Branch: branch, Event: "workflow_dispatch", Actor: actor,
		Created: ">=" + since.UTC().Format(time.RFC3339)}, "listing the dispatched runs of "+branch, max)
}
