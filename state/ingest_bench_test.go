package state

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkIngestCommits is the store's part of durable ingest, as the
// server drives it: 64 writers, each recording a 15 KB comment delivery with
// no command (fsync'd, group commits) and its comment's seen mark. "stored"
// appends it to the inbox and completes it, as the worker does for every
// delivery with something to run; "done" records both at once
// (AppendDone), as the webhook handler does for a comment with no command
// line. Besides ns/op it reports what a commit costs bbolt (Tx.Stats: pages
// allocated, nodes spilled, page writes) per delivery, and the writes a
// commit carries.
//
//	go test -run '^$' -bench IngestCommits -benchtime 20000x ./state
func BenchmarkIngestCommits(b *testing.B) {
	b.Run("stored", func(b *testing.B) { benchIngest(b, false) })
	b.Run("done", func(b *testing.B) { benchIngest(b, true) })
}

func benchIngest(b *testing.B, done bool) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	body := []byte(`{"action":"created","comment":{"id":1,"body":"` + strings.Repeat("Benchmark notes, see https://github.com/o/r/actions/runs/1. ", 250) + `"}}`)
	var next atomic.Int64
	before := s.db.Stats().TxStats
	commits := s.commits.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				n := next.Add(1)
				cbody := append(append([]byte(nil), body...), strconv.FormatInt(n, 10)...) // each delivery says something new
				d := &Delivery{ID: strconv.FormatInt(n, 16), Event: "issue_comment", Action: "created", Repo: "o/r", PR: int(n % 1000),
					ReceivedAt: time.Now(), NoCommands: true, CommentID: 1_000_000 + n, Body: cbody}
				seen := func(tx *Tx) error {
					_, err := tx.CommentSeen("o/r", d.CommentID)
					return err
				}
				if done {
					if _, err := s.AppendDone(context.Background(), d, "no-commands", seen); err != nil {
						b.Error(err)
					}
					continue
				}
				if _, err := s.Append(context.Background(), d); err != nil {
					b.Error(err)
					return
				}
				if err := s.Complete(d, "no-commands", seen); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	after := s.db.Stats().TxStats
	n := float64(b.N)
	b.ReportMetric(float64(after.GetPageAlloc()-before.GetPageAlloc())/4096/n, "pages/delivery")
	b.ReportMetric(float64(after.GetSpill()-before.GetSpill())/n, "spills/delivery")
	b.ReportMetric(float64(after.GetWrite()-before.GetWrite())/n, "pagewrites/delivery")
	b.ReportMetric(float64(after.GetWriteTime()-before.GetWriteTime())/n/1e3, "writeµs/delivery")
	writes := 2 * n
	if done {
		writes = n
	}
	if c := s.commits.Load() - commits; c > 0 {
		b.ReportMetric(writes/float64(c), "writes/commit")
	}
}
