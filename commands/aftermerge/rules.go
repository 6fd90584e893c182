package aftermerge

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
)

// The rules /recover-ingest checks before anything is dispatched, after
// the benchmark repository's own recovery helper
// (utils/recover_failed_ingest.py): the run URL and the failed job as it
// checks them, and the recovery workflow's shape (its trigger, its
// permissions, one CPU job; not its steps, which are the maintainers').

// runURL is a GitHub Actions run URL, optionally of one of its jobs.
var runURL = regexp.MustCompile(`^https://github\.com/(?P<repo>[^/\s]+/[^/\s]+)/actions/runs/(?P<run>[0-9]+)(?:/job/(?P<job>[0-9]+))?$`)

// ParseTargetURL reads a GitHub Actions run URL, optionally ending in
// /job/<id> (a trailing slash, a query and a fragment are let be): the
// repository, the run and the job (0: none named).
func ParseTargetURL(u string) (repo string, run, job int64, err error) {
	u = strings.TrimSpace(u)
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i] // a check's link carries ?pr=N
	}
	m := runURL.FindStringSubmatch(strings.TrimSuffix(u, "/"))
	if m == nil {
		return "", 0, 0, errors.New("the target must be a GitHub Actions run URL, optionally ending in /job/<id>")
	}
	run, err = strconv.ParseInt(m[2], 10, 64)
	if err != nil || run <= 0 {
		return "", 0, 0, fmt.Errorf("the target's run id %q is not a run id", m[2])
	}
	if m[3] != "" {
		if job, err = strconv.ParseInt(m[3], 10, 64); err != nil || job <= 0 {
			return "", 0, 0, fmt.Errorf("the target's job id %q is not a job id", m[3])
		}
	}
	return m[1], run, job, nil
}

// SelectFailedJob is the job a recovery is for: the one named (it must be
// a completed failed job of the run), or else the only failed job; more
// than one without a job named is ambiguous, and the candidates are named.
func SelectFailedJob(jobs []ghclient.Job, requested int64) (ghclient.Job, error) {
	failed := func(j ghclient.Job) bool { return j.Status == "completed" && j.Conclusion == "failure" }
	if requested != 0 {
		for _, j := range jobs {
			if j.ID != requested {
				continue
			}
			if !failed(j) {
				return ghclient.Job{}, fmt.Errorf("job %d is not a completed failed job", requested)
			}
			return j, nil
		}
		return ghclient.Job{}, fmt.Errorf("job %d was not found in the target run", requested)
	}
	var bad []ghclient.Job
	for _, j := range jobs {
		if failed(j) {
			bad = append(bad, j)
		}
	}
	if len(bad) == 1 {
		return bad[0], nil
	}
	ids := make([]string, 0, len(bad))
	for _, j := range bad {
		ids = append(ids, fmt.Sprintf("%d (%s)", j.ID, j.Name))
	}
	if len(ids) == 0 {
		ids = append(ids, "none")
	}
	return ghclient.Job{}, fmt.Errorf("a run URL without a job is ambiguous: give the failed job's URL (/job/<id>); failed jobs: %s",
		strings.Join(ids, ", "))
}

// ValidateRecoveryWorkflow refuses a recovery workflow that could do more
// than dispatch the ingest: it must only take workflow_dispatch, declaring
// the inputs opsbot dispatches (inputs), have explicitly read-only
// permissions, and one job on ubuntu-latest without a matrix or a
// reusable workflow, whose own permissions (if any) are read-only too.
// A key given twice is refused, as the helper's loader does.
func ValidateRecoveryWorkflow(raw []byte, inputs ...string) error {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("the recovery workflow is not YAML opsbot can read: %w", err)
	}
	if doc == nil {
		return errors.New("the recovery workflow's root must be a mapping")
	}
	on, ok := doc["on"]
	if !ok {
		on = doc["true"] // YAML 1.1 reads a bare on as true
	}
	trigger, ok := on.(map[string]any)
	if !ok || len(trigger) != 1 || !hasKey(trigger, "workflow_dispatch") {
		return errors.New("the recovery workflow must only use workflow_dispatch")
	}
	dispatch, _ := trigger["workflow_dispatch"].(map[string]any)
	declared, _ := dispatch["inputs"].(map[string]any)
	for _, in := range inputs {
		if _, ok := declared[in]; !ok {
			return fmt.Errorf("the recovery workflow's workflow_dispatch does not declare the input %s opsbot dispatches", in)
		}
	}
	if !readOnly(doc["permissions"]) {
		return errors.New("the recovery workflow's permissions must be explicitly read-only")
	}
	jobs, ok := doc["jobs"].(map[string]any)
	if !ok || len(jobs) != 1 {
		return errors.New("the recovery workflow must contain exactly one job")
	}
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok || job["runs-on"] != "ubuntu-latest" {
			return errors.New("the recovery job must run only on ubuntu-latest")
		}
		if hasKey(job, "strategy") || hasKey(job, "uses") {
			return errors.New("the recovery job may not use a matrix or a reusable workflow")
		}
		if p, ok := job["permissions"]; ok && !readOnly(p) {
			return errors.New("the recovery job permissions must be explicitly read-only")
		}
	}
	return nil
}

// readOnly reports whether permissions is a mapping whose every value is
// read or none.
func readOnly(permissions any) bool {
	m, ok := permissions.(map[string]any)
	if !ok {
		return false
	}
	for _, v := range m {
		if v != "read" && v != "none" {
			return false
		}
	}
	return true
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
