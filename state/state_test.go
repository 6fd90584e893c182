package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	_ "github.com/SemiAnalysisAI/opsbot/internal/golden" // defines -update for go test ./... -update
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// openTest opens a fresh store; cleanup checks its consistency and closes it.
func openTest(t *testing.T, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "opsbot.db"), Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if errs := s.Check(); len(errs) > 0 {
			t.Errorf("bbolt check: %v", errs)
		}
		s.Close()
	})
	return s
}

func delivery(id string, pr int) *Delivery {
	return &Delivery{ID: id, Event: "pull_request", Action: "synchronize", Repo: "o/r", PR: pr,
		ReceivedAt: time.Unix(1700000000, 0), Body: []byte(`{"n":"` + id + `"}`)}
}

func TestAppendDeduplicatesAndKeepsBody(t *testing.T) {
	s := openTest(t, nil)
	ctx := context.Background()
	d := delivery("a", 1)
	if res, err := s.Append(ctx, d); err != nil || res != Stored || d.Seq == 0 {
		t.Fatalf("Append = %v, %v (seq %d)", res, err, d.Seq)
	}
	if res, err := s.Append(ctx, delivery("a", 1)); err != nil || res != Duplicate {
		t.Fatalf("second Append = %v, %v; want Duplicate", res, err)
	}
	got, err := s.Delivery(d.Seq)
	if err != nil || !bytes.Equal(got.Body, d.Body) || got.Key() != "o/r#1" {
		t.Fatalf("Delivery = %+v, %v", got, err)
	}
	p, _ := s.Pending()
	if len(p) != 1 {
		t.Fatalf("pending = %d, want 1", len(p))
	}
}

// A delivery resent under a new id (the signature does not cover the id) is
// a duplicate while delivery ids are kept, and new again once they are pruned.
func TestAppendDeduplicatesTheSameBodyUnderANewID(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := openTest(t, func() time.Time { return now })
	ctx := context.Background()
	d := delivery("a", 1)
	if res, err := s.Append(ctx, d); err != nil || res != Stored {
		t.Fatalf("Append = %v, %v", res, err)
	}
	replay := delivery("b", 1)
	replay.Body = d.Body
	if res, err := s.Append(ctx, replay); err != nil || res != Duplicate {
		t.Fatalf("the same body under id b = %v, %v; want Duplicate", res, err)
	}
	other := delivery("c", 1)
	other.Event, other.Body = "issue_comment", d.Body
	if res, err := s.Append(ctx, other); err != nil || res != Stored {
		t.Fatalf("the same body of another event = %v, %v; want Stored", res, err)
	}
	for _, x := range []*Delivery{d, other} {
		if err := s.Complete(x, "ok", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PruneDeliveries(now.Add(time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("PruneDeliveries = %d, %v", n, err)
	}
	again := delivery("d", 1)
	again.Body = d.Body
	if res, err := s.Append(ctx, again); err != nil || res != Stored {
		t.Fatalf("after pruning = %v, %v; want Stored", res, err)
	}
}

// Appends that arrive while a commit is in flight share the next commit.
func TestAppendGroupCommit(t *testing.T) {
	s := openTest(t, nil)
	release := make(chan struct{})
	held := make(chan struct{})
	go s.db.Update(func(*bolt.Tx) error { close(held); <-release; return nil })
	<-held
	const n = 100
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Append(context.Background(), delivery(fmt.Sprint(i), i)); err != nil {
				t.Error(err)
			}
		}()
	}
	for deadline := testkit.Deadline(t); int(s.inFlight.Load())+len(s.appends) < n; {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of %d appends queued", int(s.inFlight.Load())+len(s.appends), n)
		}
		time.Sleep(time.Millisecond) // waiting for the goroutines to queue, not for the result
	}
	before := s.commits.Load()
	close(release)
	wg.Wait()
	if c := s.commits.Load() - before; c > 2 {
		t.Fatalf("%d appends took %d commits, want at most 2", n, c)
	}
	if p, _ := s.Pending(); len(p) != n {
		t.Fatalf("pending = %d, want %d", len(p), n)
	}
}

func TestCompleteIsAtomicAndOnce(t *testing.T) {
	s := openTest(t, nil)
	d := delivery("c", 7)
	s.Append(context.Background(), d)
	boom := errors.New("boom")
	err := s.Complete(d, "x", func(tx *Tx) error {
		if err := tx.Audit(AuditRecord{Kind: "command", Repo: "o/r", PR: 7}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Complete = %v, want boom", err)
	}
	if recs, _, _ := s.Audit(AuditQuery{}); len(recs) != 0 {
		t.Fatalf("a failed write left %d audit records", len(recs))
	}
	if p, _ := s.Pending(); len(p) != 1 {
		t.Fatal("a failed write removed the delivery from the inbox")
	}
	runs := 0
	w := func(tx *Tx) error { runs++; return tx.Audit(AuditRecord{Kind: "command", Repo: "o/r", PR: 7}) }
	if err := s.Complete(d, "done", w); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(d, "done", w); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Complete = %v, want ErrNotFound", err)
	}
	if runs != 1 {
		t.Fatalf("write ran %d times, want 1", runs)
	}
	recs, _, _ := s.Audit(AuditQuery{})
	if len(recs) != 1 || recs[0].DeliveryID != "c" {
		t.Fatalf("audit = %+v", recs)
	}
	st, err := s.DeliveryStatus("c")
	if err != nil || st.Processed != 1 || st.Outcome != "done" {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

func TestBury(t *testing.T) {
	s := openTest(t, nil)
	d := delivery("dl", 3)
	s.Append(context.Background(), d)
	if err := s.Bury(d.Seq, "decoding failed", 6, nil); err != nil {
		t.Fatal(err)
	}
	dead, err := s.DeadLetters()
	if err != nil || len(dead) != 1 || dead[0].Reason != "decoding failed" || !bytes.Equal(dead[0].Body, d.Body) {
		t.Fatalf("dead letters = %+v, %v", dead, err)
	}
	st, _ := s.InboxStats()
	if st.Depth != 0 || st.DeadLetter != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// Keys never collide across repositories that share a prefix, or PRs whose
// numbers share digits.
func TestAuditIndexesDoNotCollide(t *testing.T) {
	s := openTest(t, nil)
	recs := []AuditRecord{
		{Kind: "decision", Repo: "org/repo", PR: 1, HeadSHA: "aaa", RunID: 5},
		{Kind: "decision", Repo: "org/repo-infra", PR: 1, HeadSHA: "bbb", RunID: 50},
		{Kind: "decision", Repo: "org/repo", PR: 10, HeadSHA: "aaab"},
		{Kind: "decision", Repo: "Org/Repo", PR: 1, HeadSHA: "AAA"},
	}
	for _, r := range recs {
		if err := s.Update(func(tx *Tx) error { return tx.Audit(r) }); err != nil {
			t.Fatal(err)
		}
	}
	count := func(q AuditQuery) int {
		got, _, err := s.Audit(q)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if got := count(AuditQuery{Repo: "org/repo", PR: 1}); got != 2 {
		t.Errorf("org/repo#1: %d records, want 2", got)
	}
	if got := count(AuditQuery{Repo: "org/repo-infra", PR: 1}); got != 1 {
		t.Errorf("org/repo-infra#1: %d, want 1", got)
	}
	if got := count(AuditQuery{SHA: "aaa"}); got != 2 {
		t.Errorf("sha aaa: %d, want 2", got)
	}
	if got := count(AuditQuery{RunID: 5}); got != 1 {
		t.Errorf("run 5: %d, want 1", got)
	}
	if got := count(AuditQuery{Repo: "org/repo"}); got != 3 {
		t.Errorf("org/repo: %d, want 3", got)
	}
}

// A SHA prefix finds the one commit it begins; one that begins several is
// an error listing them.
func TestAuditBySHAPrefix(t *testing.T) {
	s := openTest(t, nil)
	c2, c2d, ab := strings.Repeat("c2", 20), "c2c2c2d"+strings.Repeat("0", 33), "ab"+strings.Repeat("12", 19)
	for _, r := range []AuditRecord{
		{Kind: "decision", Repo: "o/r", PR: 1, HeadSHA: c2},
		{Kind: "pin", Repo: "o/r", PR: 1, HeadSHA: c2},
		{Kind: "decision", Repo: "o/r", PR: 2, HeadSHA: c2d},
		{Kind: "decision", Repo: "o/r", PR: 3, HeadSHA: ab},
	} {
		if err := s.Update(func(tx *Tx) error { return tx.Audit(r) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		q    AuditQuery
		want int
	}{
		{AuditQuery{SHA: c2}, 2},
		{AuditQuery{SHA: "c2c2c2c"}, 2},
		{AuditQuery{SHA: "C2C2C2C2"}, 2},
		{AuditQuery{SHA: "c2c2c2d"}, 1},
		{AuditQuery{SHA: "ab12121"}, 1},
		{AuditQuery{SHA: "ffffff0"}, 0},
		{AuditQuery{SHA: "c2c2c2c", Repo: "o/r", PR: 1, Kind: "pin"}, 1},
		{AuditQuery{SHA: "c2c2c2c", Repo: "o/r", PR: 2}, 0},
	} {
		got, _, err := s.Audit(tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("Audit(%+v) = %d records, %v; want %d", tc.q, len(got), err, tc.want)
		}
	}
	_, _, err := s.Audit(AuditQuery{SHA: "c2c2c2"})
	var amb *AmbiguousSHAError
	if !errors.As(err, &amb) || !slices.Equal(amb.Matches, []string{c2, c2d}) || amb.More {
		t.Fatalf("Audit of a prefix of two commits = %v, want AmbiguousSHAError listing both", err)
	}
	if !strings.Contains(err.Error(), c2) || !strings.Contains(err.Error(), c2d) {
		t.Fatalf("the error does not list the matches: %v", err)
	}
}

func TestAuditPagination(t *testing.T) {
	s := openTest(t, nil)
	for i := 0; i < 25; i++ {
		s.Update(func(tx *Tx) error { return tx.Audit(AuditRecord{Kind: "command", Repo: "o/r", PR: 1 + i%2}) })
	}
	var all []AuditRecord
	var after uint64
	for pages := 0; ; pages++ {
		got, next, err := s.Audit(AuditQuery{Repo: "o/r", PR: 1, Limit: 5, After: after})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		if next == 0 {
			break
		}
		after = next
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(all) != 13 {
		t.Fatalf("paged through %d records, want 13", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatal("records out of order")
		}
	}
}

func TestPruneKeepsPendingAndAudit(t *testing.T) {
	now := time.Unix(1800000000, 0)
	s := openTest(t, func() time.Time { return now })
	ctx := context.Background()
	old1, old2, fresh := delivery("old1", 1), delivery("old2", 2), delivery("fresh", 3)
	fresh.ReceivedAt = now
	for _, d := range []*Delivery{old1, old2, fresh} {
		s.Append(ctx, d)
	}
	s.Complete(old1, "ok", func(tx *Tx) error { return tx.Audit(AuditRecord{Kind: "x", Repo: "o/r"}) })
	s.Complete(fresh, "ok", nil)
	n, err := s.PruneDeliveries(now.Add(-time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1 (old1 only)", n, err)
	}
	if _, err := s.DeliveryStatus("old1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("old1 still known: %v", err)
	}
	for _, id := range []string{"old2", "fresh"} {
		if _, err := s.DeliveryStatus(id); err != nil {
			t.Errorf("%s was pruned: %v", id, err)
		}
	}
	if recs, _, _ := s.Audit(AuditQuery{}); len(recs) != 1 {
		t.Errorf("audit pruned: %d records", len(recs))
	}
}

func TestOpenLockedAndNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opsbot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{Timeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	s.db.Update(func(tx *bolt.Tx) error {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, SchemaVersion+1)
		return tx.Bucket(bMeta).Put(keySchema, b)
	})
	s.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNewer) {
		t.Fatalf("Open of a newer schema = %v, want ErrNewer", err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := OpenReadOnly(missing, 0); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("OpenReadOnly of a missing file = %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly created %s: %v", missing, err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := OpenReadOnly(other, 0); err == nil || !strings.Contains(err.Error(), "not an opsbot database") {
		t.Fatalf("OpenReadOnly of a bbolt file of another program = %v", err)
	}
	path := filepath.Join(dir, "opsbot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(path, 50*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenReadOnly of a held file = %v, want ErrLocked", err)
	}
	s.Close()
	r, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Append(context.Background(), delivery("ro", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append to a read-only store = %v, want ErrClosed", err)
	}
	if recs, _, err := r.Audit(AuditQuery{}); err != nil || len(recs) != 0 {
		t.Fatalf("Audit = %v, %v", recs, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.db.Update(func(tx *bolt.Tx) error {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, SchemaVersion+1)
		return tx.Bucket(bMeta).Put(keySchema, b)
	})
	s.Close()
	if _, err := OpenReadOnly(path, 0); !errors.Is(err, ErrNewer) {
		t.Fatalf("OpenReadOnly of a newer schema = %v, want ErrNewer", err)
	}
}

func TestBackupIsConsistent(t *testing.T) {
	s := openTest(t, nil)
	s.Append(context.Background(), delivery("b", 1))
	var buf bytes.Buffer
	if _, err := s.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "copy.db")
	if err := writeFile(out, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(out); err != nil {
		t.Fatalf("backup does not check: %v", err)
	}
}

// BackupFile's copy sits beside the database and checks; a copy a crash
// left behind is removed when the store is opened again.
func TestBackupFileBesideTheDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opsbot.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Append(context.Background(), delivery("b", 1))
	f, n, err := s.BackupFile()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := filepath.Dir(f.Name()), filepath.Dir(path); got != want {
		t.Fatalf("copy in %s, want beside the database in %s", got, want)
	}
	if st, err := f.Stat(); err != nil || st.Size() != n {
		t.Fatalf("copy size = %v (%v), want %d", st, err, n)
	}
	if err := CheckFile(f.Name()); err != nil {
		t.Fatalf("copy does not check: %v", err)
	}
	f.Close() // left behind, as a crash would leave it
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(f.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stale backup copy survived reopening: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database itself: %v", err)
	}
}

func TestAppendAfterCloseFails(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Append(context.Background(), delivery("late", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
}

// Under a steady stream of deliveries, with retention pruning, the file
// stops growing: freed pages are reused.
func TestSizeBoundedUnderRetention(t *testing.T) {
	now := time.Unix(1800000000, 0)
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(path, Options{Now: func() time.Time { return now }, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("x"), 4096)
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	var sizes []int64
	for day := 0; day < 10; day++ {
		for i := 0; i < 400; i++ {
			id := fmt.Sprintf("d%d-%d", day, i)
			// Each delivery says something new: the same body is a duplicate.
			d := &Delivery{ID: id, Event: "pull_request", Repo: "o/r", PR: i % 50, ReceivedAt: now,
				Body: append([]byte(id), body...)}
			if _, err := s.Append(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if err := s.Complete(d, "ok", nil); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(24 * time.Hour)
		for {
			n, err := s.PruneDeliveries(now.Add(-36*time.Hour), 5000)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		sizes = append(sizes, size())
	}
	if last, early := sizes[len(sizes)-1], sizes[3]; last > early*3/2 {
		t.Fatalf("file grew from %d to %d bytes under steady load with retention: %v", early, last, sizes)
	}
	if _, err := s.DeliveryStatus("d0-0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the first day's delivery ids were not pruned: %v", err)
	}
	if _, err := s.DeliveryStatus("d9-399"); err != nil {
		t.Fatalf("the last day's delivery ids were pruned: %v", err)
	}
}

// Depths kept as writes commit match the buckets, across a reopen.
func TestDepthCounters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ds []*Delivery
	for i := 0; i < 5; i++ {
		d := delivery(fmt.Sprint(i), i)
		s.Append(ctx, d)
		ds = append(ds, d)
	}
	s.Append(ctx, delivery("0", 0)) // duplicate: not counted
	s.Complete(ds[0], "ok", func(tx *Tx) error {
		return tx.Enqueue(&Notice{Channel: ChannelGitHub, Kind: NoticeComment, Repo: "o/r", PR: 1, Body: "x"})
	})
	s.Bury(ds[1].Seq, "bad", 1, nil)
	st, _ := s.InboxStats()
	depth, _, _ := s.OutboxStats()
	if st.Depth != 3 || st.DeadLetter != 1 || depth != 1 {
		t.Fatalf("inbox %d dead %d outbox %d, want 3 1 1", st.Depth, st.DeadLetter, depth)
	}
	notices, _ := s.Outbox(ChannelGitHub)
	s.NoticeSent(&notices[0], SentRef{CommentID: 1})
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ = s.InboxStats()
	depth, _, _ = s.OutboxStats()
	if st.Depth != 3 || st.DeadLetter != 1 || depth != 0 {
		t.Fatalf("after reopen: inbox %d dead %d outbox %d, want 3 1 0", st.Depth, st.DeadLetter, depth)
	}
}

// A schema-1 database, whose notices share one outbox bucket, opens with
// each notice moved to its channel's bucket.
func TestMigrateOutboxByChannel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		out := tx.Bucket(bOutbox)
		for i, ch := range []string{ChannelGitHub, ChannelSlack, ChannelGitHub} {
			if err := putJSON(out, u64(uint64(i+1)), Notice{ID: uint64(i + 1), Channel: ch, Kind: "comment", Repo: "o/r"}); err != nil {
				return err
			}
		}
		out.SetSequence(3)
		return tx.Bucket(bMeta).Put(keySchema, u64(1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gh, _ := s.Outbox(ChannelGitHub)
	sl, _ := s.Outbox(ChannelSlack)
	if len(gh) != 2 || len(sl) != 1 || gh[1].ID != 3 {
		t.Fatalf("after migration: github %+v, slack %+v", gh, sl)
	}
	if d, _, _ := s.OutboxStats(); d != 3 {
		t.Fatalf("depth %d, want 3", d)
	}
	if n, err := s.BeginAttempt(2); err != nil || n != 1 {
		t.Fatalf("BeginAttempt of a migrated notice: %d %v", n, err)
	}
	var added uint64
	s.Update(func(tx *Tx) error {
		n := &Notice{Channel: ChannelSlack, Kind: NoticeSlack, Repo: "o/r"}
		err := tx.Enqueue(n)
		added = n.ID
		return err
	})
	if added != 4 {
		t.Fatalf("a new notice got id %d, want 4 (ids continue)", added)
	}
}

func TestAllowedUserKeptByLogin(t *testing.T) {
	s := openTest(t, nil)
	if u, err := s.AllowedUser("Carol"); err != nil || u != nil {
		t.Fatalf("never resolved: %+v %v", u, err)
	}
	if err := s.PutAllowedUser(AllowedUser{Login: "Carol", ID: 7001}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAllowedUser(AllowedUser{Login: "ghost", Error: "not found"}); err != nil {
		t.Fatal(err)
	}
	if u, err := s.AllowedUser("carol"); err != nil || u == nil || u.ID != 7001 || u.ResolvedAt.IsZero() {
		t.Fatalf("carol = %+v %v", u, err)
	}
	if u, _ := s.AllowedUser("ghost"); u == nil || u.ID != 0 || u.Error != "not found" {
		t.Fatalf("ghost = %+v", u)
	}
	all, err := s.AllowedUsers()
	if err != nil || len(all) != 2 || all[0].Login != "Carol" || all[1].Login != "ghost" {
		t.Fatalf("all = %+v %v", all, err)
	}
	if err := s.DeleteAllowedUser("CAROL"); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.AllowedUsers(); len(all) != 1 || all[0].Login != "ghost" {
		t.Fatalf("after forgetting carol: %+v", all)
	}
}

// Replies to one user on one repository are counted in a rolling hour.
func TestTakeReplyRollingHour(t *testing.T) {
	now := time.Unix(1800000000, 0)
	s := openTest(t, func() time.Time { return now })
	take := func(repo string, user int64) bool {
		t.Helper()
		var ok bool
		if err := s.Update(func(tx *Tx) error {
			var err error
			ok, err = tx.TakeReply(repo, user, 3)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := 0; i < 3; i++ {
		if !take("o/r", 7) {
			t.Fatalf("reply %d refused under the limit", i+1)
		}
		now = now.Add(10 * time.Minute)
	}
	if take("o/r", 7) {
		t.Fatal("a fourth reply within the hour was allowed")
	}
	if !take("o/r", 8) || !take("o/r2", 7) {
		t.Fatal("another user or another repository shares the count")
	}
	now = now.Add(31 * time.Minute) // the first reply is now more than an hour old
	if !take("o/r", 7) {
		t.Fatal("the rolling hour did not let a reply through once the oldest aged out")
	}
	if take("o/r", 7) {
		t.Fatal("a reply past the limit was allowed")
	}
	now = now.Add(2 * time.Hour)
	if n, err := s.PruneReplies(now.Add(-ReplyWindow), 100); err != nil || n != 3 {
		t.Fatalf("PruneReplies = %d, %v; want the 3 idle counts gone", n, err)
	}
}

// Each comment notice's marker holds its own random nonce, and the marker is
// kept with what the notice produced, for the edits of that comment.
func TestCommentMarkersAreUnguessableAndKept(t *testing.T) {
	s := openTest(t, nil)
	err := s.Update(func(tx *Tx) error {
		for i := 0; i < 2; i++ {
			if err := tx.Enqueue(&Notice{Channel: ChannelGitHub, Kind: NoticeComment, Repo: "o/r", PR: 1, Body: "x"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := s.Outbox(ChannelGitHub)
	if err != nil || len(ns) != 2 {
		t.Fatalf("outbox = %v, %v", ns, err)
	}
	a, b := ns[0].Marker(), ns[1].Marker()
	if len(ns[0].Nonce) != 32 || ns[0].Nonce == ns[1].Nonce || a == Marker(ns[0].ID, "") ||
		!strings.HasPrefix(a, fmt.Sprintf("<!-- opsbot:notice=%d.", ns[0].ID)) {
		t.Fatalf("markers %q and %q", a, b)
	}
	if err := s.NoticeSent(&ns[0], SentRef{CommentID: 9}); err != nil {
		t.Fatal(err)
	}
	if ref, ok, err := s.SentRef(ns[0].ID); err != nil || !ok || ref.Marker != a || ref.CommentID != 9 {
		t.Fatalf("SentRef = %+v %v %v, want marker %q", ref, ok, err, a)
	}
}

// A decision is keyed by its commit however the SHA is spelled: a lookup in
// another case finds it, and a second spelling cannot store a second one.
func TestDecisionKeyIgnoresCase(t *testing.T) {
	s := openTest(t, nil)
	lower := "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	upper := "C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1C1"
	if err := s.Update(func(tx *Tx) error {
		return tx.PutDecision(&Decision{Repo: "o/r", PR: 1, HeadSHA: upper, Decision: "skip", RunID: 9})
	}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Decision("o/r", 1, lower)
	if err != nil || d == nil || d.HeadSHA != lower {
		t.Fatalf("Decision(lower) = %+v, %v; want the decision, spelled lower-case", d, err)
	}
	if h, ok := s.ReusedRun("o/r", lower); !ok || h.RunID != 9 {
		t.Fatalf("ReusedRun(lower) = %+v, %v", h, ok)
	}
	err = s.Update(func(tx *Tx) error {
		return tx.PutDecision(&Decision{Repo: "o/r", PR: 1, HeadSHA: "c1C1" + lower[4:], Decision: "sweep"})
	})
	if err == nil {
		t.Fatal("a second decision for the same commit in another case was stored")
	}
}

// Pruning sent records keeps those an edit may still need: the target of an
// edit waiting in the outbox, and the acknowledgement of a stage request
// the staging side has not finished.
func TestPruneSentKeepsEditTargets(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := openTest(t, func() time.Time { return now })
	var ackPending, ackDone, editTarget, plain uint64
	err := s.Update(func(tx *Tx) error {
		for _, id := range []*uint64{&ackPending, &ackDone, &editTarget, &plain} {
			n := &Notice{Channel: ChannelGitHub, Kind: NoticeComment, Repo: "o/r", PR: 1, Body: "x"}
			if err := tx.Enqueue(n); err != nil {
				return err
			}
			*id = n.ID
		}
		if err := tx.AddStageRequest(&StageRequest{Repo: "o/r", PR: 1, AckNotice: ackPending, State: StageRequested, OriginRef: OriginRef{CommentID: 10}}); err != nil {
			return err
		}
		return tx.AddStageRequest(&StageRequest{Repo: "o/r", PR: 1, AckNotice: ackDone, State: StageStaged, OriginRef: OriginRef{CommentID: 11}})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{ackPending, ackDone, editTarget, plain} {
		if err := s.NoticeSent(&Notice{ID: id, Kind: NoticeComment}, SentRef{CommentID: int64(id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(func(tx *Tx) error {
		return tx.Enqueue(&Notice{Channel: ChannelGitHub, Kind: NoticeEdit, Repo: "o/r", PR: 1, EditOf: editTarget, Body: "y"})
	}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(48 * time.Hour)
	n, err := s.PruneSent(now.Add(-time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("pruned %d records, want 2 (the finished request's and the plain comment's)", n)
	}
	for id, want := range map[uint64]NoticeState{ackPending: NoticeDone, editTarget: NoticeDone, ackDone: NoticeGone, plain: NoticeGone} {
		if got, err := s.NoticeStatus(id); err != nil || got != want {
			t.Errorf("notice %d: status %v (%v), want %v", id, got, err, want)
		}
	}
}

// Reactions to commenters below triage are counted per user and for the
// whole repository in a rolling hour; past either nothing is counted.
func TestTakeReactionPerUserAndPerRepository(t *testing.T) {
	now := time.Unix(1800000000, 0)
	s := openTest(t, func() time.Time { return now })
	take := func(repo string, user int64) bool {
		t.Helper()
		var ok bool
		if err := s.Update(func(tx *Tx) error {
			var err error
			ok, err = tx.TakeReaction(repo, user, 2, 3)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !take("o/r", 1) || !take("o/r", 1) {
		t.Fatal("reactions under the per-user limit refused")
	}
	if take("o/r", 1) {
		t.Fatal("a third reaction to one user within the hour was allowed (per-user limit 2)")
	}
	if !take("o/r", 2) {
		t.Fatal("another user refused under both limits")
	}
	if take("o/r", 3) {
		t.Fatal("a fourth reaction on the repository within the hour was allowed (per-repository limit 3)")
	}
	if !take("o/r2", 3) {
		t.Fatal("another repository shares the count")
	}
	now = now.Add(61 * time.Minute)
	if !take("o/r", 3) {
		t.Fatal("the rolling hour did not let a reaction through once the others aged out")
	}
	now = now.Add(2 * time.Hour)
	if n, err := s.PruneReplies(now.Add(-ReplyWindow), 100); err != nil || n != 6 {
		t.Fatalf("PruneReplies = %d, %v; want the 6 idle counts gone (3 users, 2 repositories, 1 user on o/r2)", n, err)
	}
}

// A delivery resent under a new id is a duplicate across restarts (the
// digests are read back into memory) and until retention prunes the
// first; a database of schema 2 (digests keyed by digest) keeps its
// digests when it is migrated.
func TestReplayDedupeAcrossRestartsPruningAndMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-48 * time.Hour)
	first := &Delivery{ID: "a", Event: "pull_request", Repo: "o/r", PR: 1, ReceivedAt: at, Body: []byte(`{"closed":1}`)}
	if res, err := s.Append(t.Context(), first); err != nil || res != Stored {
		t.Fatalf("Append = %v, %v", res, err)
	}
	if err := s.Complete(first, "ok", nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Written as schema 2 did: the digest index keyed by digest, the mark's digest.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := bodySum(first)
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bSumTime); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bSumTime); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists(bDigests)
		if err != nil {
			return err
		}
		if err := b.Put(sum[:], []byte("a")); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, u64(2))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again := &Delivery{ID: "b", Event: "pull_request", Repo: "o/r", PR: 1, ReceivedAt: time.Now(), Body: []byte(`{"closed":1}`)}
	if res, err := s.Append(t.Context(), again); err != nil || res != Duplicate {
		t.Fatalf("the same body under a new id after the migration: %v, %v; want Duplicate", res, err)
	}
	if n, err := s.PruneDeliveries(time.Now().Add(-24*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("PruneDeliveries = %d, %v", n, err)
	}
	if res, err := s.Append(t.Context(), again); err != nil || res != Stored {
		t.Fatalf("after retention forgot the first: %v, %v; want Stored", res, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bDigests) != nil {
			t.Error("the schema 2 digest bucket is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A delivery with nothing to run is recorded received and processed in one
// commit: its write is applied, nothing waits in the inbox, its id and its
// digest deduplicate later copies, and pruning removes its mark in time.
func TestAppendDoneRecordsAndDeduplicates(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := openTest(t, func() time.Time { return now })
	ctx := context.Background()
	d := delivery("n", 3)
	d.Event, d.Action, d.CommentID, d.NoCommands = "issue_comment", "created", 42, true
	seen := func(tx *Tx) error { _, err := tx.CommentSeen("o/r", 42); return err }
	if res, err := s.AppendDone(ctx, d, "no-commands", seen); err != nil || res != Stored {
		t.Fatalf("AppendDone = %v, %v", res, err)
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Fatalf("pending = %d, want 0: nothing is left to run", len(p))
	}
	st, err := s.DeliveryStatus("n")
	if err != nil || st.Processed != 1 || st.Outcome != "no-commands" {
		t.Fatalf("status = %+v, %v", st, err)
	}
	if m, _ := s.CommentMark("o/r", 42); m != MarkProcessed {
		t.Fatalf("comment mark = %v, want processed", m)
	}
	ran := false
	again := func(*Tx) error { ran = true; return nil }
	if res, err := s.AppendDone(ctx, delivery("n", 3), "no-commands", again); err != nil || res != Duplicate || ran {
		t.Fatalf("the same id again = %v, %v (write ran %v); want Duplicate, not run", res, err, ran)
	}
	replay := delivery("n2", 3)
	replay.Event, replay.Body = d.Event, d.Body
	if res, err := s.Append(ctx, replay); err != nil || res != Duplicate {
		t.Fatalf("the same body under a new id = %v, %v; want Duplicate", res, err)
	}
	boom := errors.New("boom")
	failed := delivery("f", 3)
	failed.Event = "issue_comment"
	if _, err := s.AppendDone(ctx, failed, "no-commands", func(*Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing write = %v, want boom", err)
	}
	if _, err := s.DeliveryStatus("f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed AppendDone left a mark: %v", err)
	}
	if n, err := s.PruneDeliveries(now.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("PruneDeliveries = %d, %v; want 1", n, err)
	}
	if res, err := s.Append(ctx, replay); err != nil || res != Stored {
		t.Fatalf("after pruning = %v, %v; want Stored", res, err)
	}
}

// A schema 3 database keeps seven families of keys in one repos bucket;
// opened by this build, each family moves to a bucket of its own and reads
// as before: the run a head reused, what a sent notice produced, a failed
// notice, the reply budget, the last reconcile, the installation, an
// allow_users binding. A key of no known family stops the open.
func TestMigrateReposByFamily(t *testing.T) {
	write := func(t *testing.T, extra func(b *bolt.Bucket) error) string {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bMeta, bInbox, bDeliveries, bByTime, bSumTime, bDead, bAudit, bAuditPR, bAuditSHA, bAuditRun,
				bPRs, bComments, bOutbox, bStage, bRepos} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			if err := outboxByChannel(tx); err != nil {
				return err
			}
			b := tx.Bucket(bRepos)
			at, _ := now.MarshalText()
			for _, kv := range []struct {
				k []byte
				v any
			}{
				{reusedKey("o/r", "ABC"), nil},
				{sentKey(5), SentRef{CommentID: 99}},
				{failedKey(6), Notice{ID: 6, Channel: ChannelGitHub, Kind: NoticeComment, Repo: "o/r", LastError: "gone"}},
				{replyKey("o/r", 7), replyLog{V: 1, At: []int64{now.UnixNano()}}},
				{allowedUserKey("carol"), AllowedUser{Login: "carol", ID: 7001, ResolvedAt: now}},
			} {
				if kv.v == nil {
					if err := b.Put(kv.k, u64(31)); err != nil {
						return err
					}
					continue
				}
				if err := putJSON(b, kv.k, kv.v); err != nil {
					return err
				}
			}
			if err := b.Put([]byte("reconciled\x00o/r"), at); err != nil {
				return err
			}
			if err := b.Put([]byte("installation\x00o/r"), u64(4242)); err != nil {
				return err
			}
			if extra != nil {
				if err := extra(b); err != nil {
					return err
				}
			}
			return tx.Bucket(bMeta).Put(keySchema, u64(3))
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	s, err := Open(write(t, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h, ok := s.ReusedRun("o/r", "abc"); !ok || h.RunID != 31 {
		t.Errorf("reused run %+v %v, want 31", h, ok)
	}
	if ref, ok, err := s.SentRef(5); err != nil || !ok || ref.CommentID != 99 {
		t.Errorf("sent ref %+v %v %v", ref, ok, err)
	}
	if f, err := s.FailedNotices(); err != nil || len(f) != 1 || f[0].ID != 6 {
		t.Errorf("failed notices %+v %v", f, err)
	}
	if id, err := s.RepoInstallation("o/r"); err != nil || id != 4242 {
		t.Errorf("installation %d %v", id, err)
	}
	if at, err := s.ReconciledAt("o/r"); err != nil || at.IsZero() {
		t.Errorf("reconciled at %v %v", at, err)
	}
	if u, err := s.AllowedUser("Carol"); err != nil || u == nil || u.ID != 7001 {
		t.Errorf("allowed user %+v %v", u, err)
	}
	var again bool
	if err := s.Update(func(tx *Tx) error {
		var err error
		again, err = tx.TakeReply("o/r", 7, 1)
		return err
	}); err != nil || again {
		t.Errorf("a user who had their one reply this hour got another (%v, %v)", again, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bRepos) != nil {
			return errors.New("the schema 3 repos bucket is still there")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	_, err = Open(write(t, func(b *bolt.Bucket) error { return b.Put([]byte("mystery\x00x"), []byte("1")) }), Options{})
	if err == nil || !strings.Contains(err.Error(), "no known family") {
		t.Fatalf("open with an unknown key: %v, want the migration to stop", err)
	}
}

// A decision stored before decisions carried a reason code (schema 4 and
// before kept some with words only) gets the code "recorded", its words as
// the detail, when this build opens the file; a coded one is left as it is.
func TestMigrateDecisionsCoded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error {
		if err := tx.PutDecision(&Decision{Repo: "o/r", PR: 3, HeadSHA: "aaa", Decision: Sweep, Reason: "no authorization found"}); err != nil {
			return err
		}
		return tx.PutDecision(&Decision{Repo: "o/r", PR: 3, HeadSHA: "bbb", Decision: Sweep, Reason: "no reuse authorization",
			Why: Why{Code: ReasonNoPin}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(keySchema, u64(4)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, err := s.Decision("o/r", 3, "aaa")
	if err != nil || old == nil || old.Why.Code != ReasonRecorded || old.Why.Detail != "no authorization found" || old.Reason != "no authorization found" {
		t.Fatalf("the uncoded decision reads %+v, %v", old, err)
	}
	coded, err := s.Decision("o/r", 3, "bbb")
	if err != nil || coded == nil || coded.Why.Code != ReasonNoPin || coded.Why.Detail != "" {
		t.Fatalf("the coded decision reads %+v, %v", coded, err)
	}
}

// The index from a head to its PRs follows each PR's recorded head: a
// branch that heads two PRs names both, a head that moves leaves its old
// commit, and another repository's same commit is its own. A database
// from before the index (schema 5) has it built from the PRs' records.
func TestPRsOfHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heads.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(repo string, pr int, head string) {
		t.Helper()
		if err := s.Update(func(tx *Tx) error {
			return tx.PutPRInfo(&PRInfo{Repo: repo, PR: pr, HeadSHA: head, Title: "t"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	heads := func(repo, sha string) []int {
		t.Helper()
		prs, err := s.PRsOfHead(repo, sha)
		if err != nil {
			t.Fatal(err)
		}
		return prs
	}
	put("o/r", 7, "aaa")
	put("o/r", 3, "AAA") // the same branch into another base
	put("o/r2", 1, "aaa")
	if got := heads("o/r", "aAa"); !slices.Equal(got, []int{3, 7}) {
		t.Fatalf("PRs of aaa = %v, want [3 7]", got)
	}
	put("o/r", 7, "bbb")
	put("o/r", 3, "AAA") // the same head again: nothing moves
	if got, got2 := heads("o/r", "aaa"), heads("o/r", "bbb"); !slices.Equal(got, []int{3}) || !slices.Equal(got2, []int{7}) {
		t.Fatalf("after PR 7 moved: aaa %v, bbb %v; want [3], [7]", got, got2)
	}
	if got := heads("o/r2", "aaa"); !slices.Equal(got, []int{1}) {
		t.Fatalf("o/r2's aaa = %v, want [1]", got)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bHeads); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bHeads); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Put(keySchema, u64(5))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, got2 := heads("o/r", "aaa"), heads("o/r", "bbb"); !slices.Equal(got, []int{3}) || !slices.Equal(got2, []int{7}) {
		t.Fatalf("rebuilt: aaa %v, bbb %v; want [3], [7]", got, got2)
	}
}
