package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

func (f *Fake) workflow(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	file := r.PathValue("file")
	id, ok := repo.Workflows[file]
	if !ok {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, &github.Workflow{ID: github.Int64(id), Name: github.String(file), Path: github.String(".github/workflows/" + file), State: github.String("active")}
}

// startedAt is when the run's latest attempt started.
func (run *Run) startedAt() time.Time {
	if run.StartedAt.IsZero() {
		return run.CreatedAt
	}
	return run.StartedAt
}

func (f *Fake) runJSON(repo *Repo, run *Run) *github.WorkflowRun {
	full := repo.Owner + "/" + repo.Name
	wr := &github.WorkflowRun{
		ID: github.Int64(run.ID), WorkflowID: github.Int64(run.WorkflowID), Event: github.String(run.Event),
		Status: github.String(run.Status), HeadSHA: github.String(run.HeadSHA), HeadBranch: github.String(run.HeadBranch),
		RunAttempt: github.Int(run.Attempt), CreatedAt: &github.Timestamp{Time: run.CreatedAt},
		RunStartedAt: &github.Timestamp{Time: run.startedAt()},
		HTMLURL:      github.String(fmt.Sprintf("https://github.com/%s/actions/runs/%d", full, run.ID)),
		Repository:   &github.Repository{FullName: github.String(full), ID: github.Int64(repo.ID)},
	}
	if run.Conclusion != "" {
		wr.Conclusion = github.String(run.Conclusion)
	}
	if run.DisplayTitle != "" {
		wr.DisplayTitle = github.String(run.DisplayTitle)
	}
	if run.ActorID != 0 {
		u := &github.User{Login: github.String(run.ActorLogin), ID: github.Int64(run.ActorID)}
		wr.Actor, wr.TriggeringActor = u, u
	}
	headID, headName := run.HeadRepoID, run.HeadRepo
	if headID == 0 {
		headID, headName = repo.ID, full
	}
	wr.HeadRepository = &github.Repository{ID: github.Int64(headID), FullName: github.String(headName)}
	prs := run.PRs
	if prs == nil && headID == repo.ID {
		for n, p := range repo.PRs {
			if p.State == "open" && p.Branch == run.HeadBranch && (p.HeadRepoID == 0 || p.HeadRepoID == repo.ID) {
				prs = append(prs, n)
			}
		}
		sort.Ints(prs)
	}
	for _, n := range prs {
		base := run.PRBase
		if base == "" {
			base = repo.DefaultBranch
			if p := repo.PRs[n]; p != nil && p.BaseRef != "" {
				base = p.BaseRef
			}
		}
		wr.PullRequests = append(wr.PullRequests, &github.PullRequest{Number: github.Int(n),
			Base: &github.PullRequestBranch{Ref: github.String(base)}})
	}
	return wr
}

func (f *Fake) run(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	return http.StatusOK, f.runJSON(repo, run)
}

func (f *Fake) workflowRuns(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	q := r.URL.Query()
	var runs []*Run
	for _, run := range repo.Runs {
		if run.WorkflowID != id ||
			(q.Get("branch") != "" && run.HeadBranch != q.Get("branch")) ||
			(q.Get("event") != "" && run.Event != q.Get("event")) ||
			(q.Get("status") != "" && run.Status != q.Get("status") && run.Conclusion != q.Get("status")) ||
			(q.Get("head_sha") != "" && run.HeadSHA != q.Get("head_sha")) ||
			(q.Get("actor") != "" && !strings.EqualFold(run.ActorLogin, q.Get("actor"))) || !createdIn(run.CreatedAt, q.Get("created")) {
			continue
		}
		runs = append(runs, run)
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].CreatedAt.After(runs[j].CreatedAt) || (runs[i].CreatedAt.Equal(runs[j].CreatedAt) && runs[i].ID > runs[j].ID)
	})
	page := paginate(w, r, len(runs))
	out := &github.WorkflowRuns{TotalCount: github.Int(len(runs)), WorkflowRuns: []*github.WorkflowRun{}}
	for _, run := range runs[page.from:page.to] {
		out.WorkflowRuns = append(out.WorkflowRuns, f.runJSON(repo, run))
	}
	return http.StatusOK, out
}

// repoRuns lists the repository's runs of every workflow, newest first,
// filtered by head_sha when asked.
func (f *Fake) repoRuns(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	sha := r.URL.Query().Get("head_sha")
	var runs []*Run
	for _, run := range repo.Runs {
		if sha == "" || run.HeadSHA == sha {
			runs = append(runs, run)
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].CreatedAt.After(runs[j].CreatedAt) || (runs[i].CreatedAt.Equal(runs[j].CreatedAt) && runs[i].ID > runs[j].ID)
	})
	page := paginate(w, r, len(runs))
	out := &github.WorkflowRuns{TotalCount: github.Int(len(runs)), WorkflowRuns: []*github.WorkflowRun{}}
	for _, run := range runs[page.from:page.to] {
		out.WorkflowRuns = append(out.WorkflowRuns, f.runJSON(repo, run))
	}
	return http.StatusOK, out
}

func (f *Fake) artifacts(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	page := paginate(w, r, len(run.Artifacts))
	out := &github.ArtifactList{TotalCount: github.Int64(int64(len(run.Artifacts))), Artifacts: []*github.Artifact{}}
	for i, a := range run.Artifacts[page.from:page.to] {
		exp := run.CreatedAt.Add(90 * 24 * time.Hour)
		if a.Expired {
			exp = f.now().Add(-time.Hour)
		}
		out.Artifacts = append(out.Artifacts, &github.Artifact{ID: github.Int64(run.ID*100 + int64(i)), Name: github.String(a.Name),
			Expired: github.Bool(a.Expired), SizeInBytes: github.Int64(1024), ExpiresAt: &github.Timestamp{Time: exp},
			WorkflowRun: &github.ArtifactWorkflowRun{ID: github.Int64(run.ID), HeadSHA: github.String(run.HeadSHA)}})
	}
	return http.StatusOK, out
}

func (f *Fake) dispatch(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	var in struct {
		EventType     string         `json:"event_type"`
		ClientPayload map[string]any `json:"client_payload"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.EventType == "" {
		return http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"}
	}
	f.dispatches = append(f.dispatches, Dispatch{Repo: repo.Owner + "/" + repo.Name, EventType: in.EventType, ClientPayload: in.ClientPayload})
	return http.StatusNoContent, nil
}

// DefaultJobs are the jobs of a completed run that names none: three
// benchmark jobs on GPU runners (two hours each) and an aggregation on a
// hosted runner (five minutes), each concluding as the run did, except
// that a run that failed or was cancelled has one benchmark job so.
func DefaultJobs(conclusion string) []Job {
	jobs := []Job{
		{Name: "benchmark (h100)", Conclusion: "success", Labels: []string{"self-hosted", "gpu-h100"}, Took: 2 * time.Hour},
		{Name: "benchmark (b200)", Conclusion: "success", Labels: []string{"self-hosted", "gpu-b200"}, Took: 2 * time.Hour},
		{Name: "benchmark (mi300x)", Conclusion: "success", Labels: []string{"self-hosted", "gpu-mi300x"}, Took: 2 * time.Hour},
		{Name: "aggregate", Conclusion: "success", Labels: []string{"ubuntu-latest"}, Took: 5 * time.Minute},
	}
	if conclusion == "failure" || conclusion == "cancelled" {
		jobs[2].Conclusion = conclusion
	}
	return jobs
}

func (f *Fake) jobs(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	if run == nil {
		return http.StatusNotFound, notFound()
	}
	jobs := run.Jobs
	if jobs == nil && run.Status == "completed" {
		jobs = DefaultJobs(run.Conclusion)
	}
	page := paginate(w, r, len(jobs))
	out := &github.Jobs{TotalCount: github.Int(len(jobs)), Jobs: []*github.WorkflowJob{}}
	for i, j := range jobs[page.from:page.to] {
		start := run.CreatedAt.Add(time.Minute)
		jid := run.ID*1000 + int64(page.from+i)
		out.Jobs = append(out.Jobs, &github.WorkflowJob{ID: github.Int64(jid), Name: github.String(j.Name),
			HTMLURL: github.String(fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d/job/%d", repo.Owner, repo.Name, run.ID, jid)),
			Status:  github.String("completed"), Conclusion: github.String(j.Conclusion), Labels: j.Labels,
			StartedAt: &github.Timestamp{Time: start}, CompletedAt: &github.Timestamp{Time: start.Add(j.Took)}})
	}
	return http.StatusOK, out
}

// allJobs answers GET /actions/runs/{id}/jobs: the latest attempt's jobs,
// and with filter=all the earlier attempts' too (Run.Earlier), as GitHub
// lists them. One page: enough for a test's runs.
func (f *Fake) allJobs(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	code, latest := f.jobs(w, r, repo)
	out, ok := latest.(*github.Jobs)
	if code != http.StatusOK || !ok || r.URL.Query().Get("filter") != "all" {
		return code, latest
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id]
	for a, jobs := range run.Earlier {
		for i, j := range jobs {
			jid := run.ID*1000 + int64(100*(a+1)+i)
			out.Jobs = append(out.Jobs, &github.WorkflowJob{ID: github.Int64(jid), Name: github.String(j.Name), RunAttempt: github.Int64(int64(a + 1)),
				HTMLURL: github.String(fmt.Sprintf("https://github.com/%s/%s/actions/runs/%d/job/%d", repo.Owner, repo.Name, run.ID, jid)),
				Status:  github.String("completed"), Conclusion: github.String(j.Conclusion), Labels: j.Labels})
		}
	}
	out.TotalCount = github.Int(len(out.Jobs))
	return http.StatusOK, out
}

// annotations are a job's check run annotations (a job's id is its check
// run's): a notice, then its Error as a failure.
func (f *Fake) annotations(w http.ResponseWriter, r *http.Request, repo *Repo) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	run := repo.Runs[id/1000]
	if run == nil || int(id%1000) >= len(run.Jobs) {
		return http.StatusNotFound, notFound()
	}
	out := []*github.CheckRunAnnotation{}
	if j := run.Jobs[id%1000]; j.Error != "" {
		out = append(out, &github.CheckRunAnnotation{AnnotationLevel: github.String("notice"), Message: github.String("Node.js 16 actions are deprecated")},
			&github.CheckRunAnnotation{AnnotationLevel: github.String("failure"), Message: github.String(j.Error)})
	}
	return http.StatusOK, out
}

// createdIn reports whether t matches a created filter (">=TIME", or ""
// for any).
func createdIn(t time.Time, filter string) bool {
	since, ok := strings.CutPrefix(filter, ">=")
	if !ok {
		return filter == ""
	}
	at, err := time.Parse(time.RFC3339, since)
	return err == nil && !t.Before(at)
}
