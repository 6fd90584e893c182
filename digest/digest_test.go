package digest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// The week's merges followed after the merge are counted from their audit:
// each watch begun, each main run that succeeded, each main run that failed
// (however many of its attempts did), and how many of those a re-run made
// succeed. A week without any says nothing of them.
func TestDigestCountsTheMergesFollowed(t *testing.T) {
	am := func(pr int, run int64, outcome string) record.AuditRecord {
		return record.AuditRecord{Kind: record.AuditAfterMerge, PR: pr, RunID: run, Outcome: outcome, HeadSHA: fmt.Sprintf("%040x", pr)}
	}
	recs := []record.AuditRecord{
		am(1, 0, "waiting_run"), am(1, 11, "running"), am(1, 0, "waiting_run"), am(1, 11, "succeeded"), // the run lost a while: one watch
		am(4, 0, "waiting_run"), am(4, 0, "expired"),
		am(5, 0, "waiting_run"), am(5, 51, "downstream"), am(5, 51, "ingest_failed"), // succeeded; the results repository's ingest failed
		am(2, 0, "waiting_run"), am(2, 21, "failed"), am(2, 21, "rerun"), am(2, 21, "failed"), am(2, 21, "succeeded"), // two attempts failed (one re-run asked through opsbot), the third succeeded
		am(3, 0, "waiting_run"), am(3, 31, "failed"), am(3, 31, "failed"), // failed, and the deadline after it
		am(3, 77, "recover_dispatching"), am(3, 77, "recover_running"), {Kind: record.AuditAfterMerge, PR: 3, RunID: 77, Outcome: "recover_succeeded", GPUSeconds: 16 * 3600}, // its ingest recovered
	}
	from := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	text, _ := Text("https://github.com", "o/r", "2026-W49", from, from.Add(7*24*time.Hour), recs)
	if !strings.Contains(text, "- after the merge: 5 followed, 3 main runs succeeded, 2 failed (1 of those succeeded at a re-run; 1 re-run asked through opsbot), 1 not finished by the deadline\n") ||
		!strings.Contains(text, "- ingests downstream: 1 of the succeeded main runs started an ingest run in the results repository that failed\n") {
		t.Fatalf("digest:\n%s", text)
	}
	if !strings.Contains(text, "- ingest recoveries: 1 succeeded (16.0 GPU hours a re-run of the sweep would have spent), 0 failed or unfinished\n") {
		t.Fatalf("digest:\n%s", text)
	}
	text, _ = Text("https://github.com", "o/r", "2026-W49", from, from.Add(7*24*time.Hour), nil)
	if strings.Contains(text, "after the merge") {
		t.Fatalf("a week without merges followed says:\n%s", text)
	}
}
