package loadgen

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state"
)

// buildScaleState writes a database with prs PRs and records audit records,
// spread over the PRs, before the server starts on it.
func buildScaleState(path string, prs, records int, log io.Writer) error {
	if prs <= 0 {
		prs = 100000
	}
	if records <= 0 {
		records = 1000000
	}
	start := time.Now()
	st, err := state.Open(path, state.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer st.Close()
	const batch = 5000
	for i := 0; i < prs; i += batch {
		err := st.Update(func(tx *state.Tx) error {
			for pr := i + 1; pr <= min(i+batch, prs); pr++ {
				if err := tx.PutPRInfo(&state.PRInfo{Repo: repo, PR: pr, Title: fmt.Sprintf("PR %d", pr), Author: "author",
					HeadSHA: sha(pr, 1), State: "open"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for i := 0; i < records; i += batch {
		err := st.Update(func(tx *state.Tx) error {
			for n := i; n < min(i+batch, records); n++ {
				pr := 1 + n%prs
				if err := tx.Audit(state.AuditRecord{Kind: "decision", Outcome: "sweep", Repo: repo, PR: pr, HeadSHA: sha(pr, n),
					DeliveryID: fmt.Sprintf("scale-%d", n), Reason: "no reuse authorization"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "built %d PRs and %d audit records in %s\n", prs, records, time.Since(start).Round(time.Second))
	return nil
}

// scale measures the server on a large state: idle memory, and reading one
// PR's audit through the API.
func (s *server) scale(ctx context.Context, opt Options) (Result, error) {
	prs := opt.ScalePRs
	if prs <= 0 {
		prs = 100000
	}
	time.Sleep(2 * time.Second) // let start-up allocations settle before reading idle memory
	idle := s.rssMB()
	var lat []time.Duration
	errs := 0
	start := time.Now()
	for i := 0; i < 500; i++ {
		pr := 1 + rand.IntN(prs)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/audit?repo=%s&pr=%d&limit=1000", s.url, repo, pr), nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		t := time.Now()
		resp, err := s.cl.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			errs++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t))
	}
	r := summarize("scale-pr-audit", lat, errs, time.Since(start))
	r.Extra["rss_idle_mb"] = idle
	r.Extra["rss_after_reads_mb"] = s.rssMB()
	return r, nil
}
