package record

// Coverage is how much of a sweep a run's attempt covers, from its jobs,
// and what it cost in runner and GPU time: what a push that reuses it does
// not spend again.
type Coverage struct {
	// Jobs are the jobs that ran (skipped ones are left out: a matrix
	// entry turned off is not a gap); Succeeded of them succeeded.
	Jobs      int `json:"jobs"`
	Succeeded int `json:"succeeded"`
	Skipped   int `json:"skipped,omitempty"`
	// Other counts the jobs that ran and did not succeed, by conclusion;
	// Named are the first of them by name (at most runs.MaxNamed).
	Other map[string]int `json:"other,omitempty"`
	Named []string       `json:"named,omitempty"`
	// RunnerSeconds is the sum over the jobs of completed − started;
	// ByLabel splits it by the runner labels a job asked for (joined with
	// commas), GPUSeconds weighs it by repos[].gpus_per_runner.
	RunnerSeconds int64            `json:"runner_seconds"`
	GPUSeconds    int64            `json:"gpu_seconds,omitempty"`
	ByLabel       map[string]int64 `json:"by_label,omitempty"`
}

// Fraction is the share of the jobs that ran which succeeded (0 with none:
// a run none of whose jobs ran covers nothing).
func (c Coverage) Fraction() float64 {
	if c.Jobs == 0 {
		return 0
	}
	return float64(c.Succeeded) / float64(c.Jobs)
}
