package runs

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Coverage is how much of a sweep a run covers and what it cost
// (record.Coverage, kept with pins, decisions and the audit).
type Coverage = record.Coverage

// MaxNamed bounds the jobs a coverage names; MaxLabels the runner label
// sets it splits the time by (the rest are "other").
const (
	MaxNamed  = 5
	MaxLabels = 16
)

// CoverageOf sums jobs: gpus maps runner label globs to the GPUs a runner
// with such a label has (a job counts the largest that matches one of its
// labels).
func CoverageOf(jobs []ghclient.Job, gpus map[string]int) Coverage {
	c := Coverage{ByLabel: map[string]int64{}}
	for _, j := range jobs {
		if j.Conclusion == "skipped" {
			c.Skipped++
			continue
		}
		c.Jobs++
		if j.Conclusion == "success" {
			c.Succeeded++
		} else {
			if c.Other == nil {
				c.Other = map[string]int{}
			}
			what := j.Conclusion
			if what == "" {
				what = j.Status
			}
			c.Other[what]++
			if len(c.Named) < MaxNamed {
				c.Named = append(c.Named, j.Name)
			}
		}
		if j.Started.IsZero() || j.Completed.Before(j.Started) {
			continue
		}
		secs := int64(j.Completed.Sub(j.Started) / time.Second)
		c.RunnerSeconds += secs
		key := strings.Join(j.Labels, ",")
		if _, ok := c.ByLabel[key]; !ok && (len(c.ByLabel) >= MaxLabels || len(key) > 200) {
			key = "other" // a workflow's author names the labels: the record stays small
		}
		c.ByLabel[key] += secs
		c.GPUSeconds += secs * int64(gpusOf(j.Labels, gpus))
	}
	if len(c.ByLabel) == 0 {
		c.ByLabel = nil
	}
	return c
}

func gpusOf(labels []string, gpus map[string]int) int {
	n := 0
	for glob, g := range gpus {
		for _, l := range labels {
			if ok, _ := path.Match(glob, l); ok && g > n {
				n = g
			}
		}
	}
	return n
}

// Sentence says coverage c for a PR comment: "3 of 4 jobs succeeded, 1
// cancelled (`benchmark (mi300x)`); 6.1 runner hours".
func Sentence(c Coverage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d jobs succeeded", c.Succeeded, c.Jobs)
	if len(c.Other) > 0 {
		kinds := make([]string, 0, len(c.Other))
		for k := range c.Other {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", c.Other[k], mdtext.Text(k)))
		}
		named := make([]string, len(c.Named))
		for i, n := range c.Named {
			named[i] = mdtext.Code(n)
		}
		more := ""
		if left := c.Jobs - c.Succeeded - len(c.Named); left > 0 {
			more = fmt.Sprintf(" and %d more", left)
		}
		fmt.Fprintf(&b, ", %s (%s%s)", strings.Join(parts, ", "), strings.Join(named, ", "), more)
	}
	if c.Skipped > 0 {
		fmt.Fprintf(&b, "; %d skipped", c.Skipped)
	}
	fmt.Fprintf(&b, "; %s runner hours", Hours(c.RunnerSeconds))
	if c.GPUSeconds > 0 {
		fmt.Fprintf(&b, ", %s GPU hours", Hours(c.GPUSeconds))
	}
	return b.String()
}

// Hours is seconds as hours with one decimal.
func Hours(secs int64) string { return fmt.Sprintf("%.1f", float64(secs)/3600) }

// jobCache keeps each run attempt's jobs once read: a completed attempt's
// jobs do not change. It holds at most maxCachedRuns attempts and
// maxCachedJobs jobs, dropping the oldest.
type jobCache struct {
	mu    sync.Mutex
	jobs  map[jobKey][]ghclient.Job
	order []jobKey
	count int // jobs held
}

type jobKey struct {
	repo    string
	run     int64
	attempt int
}

const (
	maxCachedRuns = 512
	maxCachedJobs = 50000
)

func (c *jobCache) get(ctx context.Context, gh Reader, repo string, run int64, attempt int) ([]ghclient.Job, error) {
	k := jobKey{strings.ToLower(repo), run, attempt}
	if c != nil {
		c.mu.Lock()
		jobs, ok := c.jobs[k]
		c.mu.Unlock()
		if ok {
			return jobs, nil
		}
	}
	jobs, err := gh.RunJobs(ctx, repo, run, attempt)
	if err != nil || c == nil {
		return jobs, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[jobKey][]ghclient.Job{}
	}
	if _, ok := c.jobs[k]; !ok {
		c.order = append(c.order, k)
		c.count += len(jobs)
	}
	c.jobs[k] = jobs
	for len(c.order) > 1 && (len(c.order) > maxCachedRuns || c.count > maxCachedJobs) {
		c.count -= len(c.jobs[c.order[0]])
		delete(c.jobs, c.order[0])
		c.order = c.order[1:]
	}
	return jobs, nil
}
