// Package state is opsbot's durable memory: one bbolt file holding the inbox
// of webhook deliveries, pins, decisions, the outbox of notices and the audit.
// It is the only package that imports bbolt. Every read-modify-write happens
// in one transaction, and no network call is ever made inside one.
package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Errors callers test with errors.Is.
var (
	ErrLocked   = errors.New("state: another opsbot holds the database")
	ErrNotFound = errors.New("state: not found")
	ErrClosed   = errors.New("state: store closed")
	ErrNewer    = errors.New("state: database written by a newer opsbot")
)

// SchemaVersion is the layout this build reads and writes.
const SchemaVersion = 8

var (
	bMeta       = []byte("meta")
	bInbox      = []byte("inbox")        // seq -> delivery (pending)
	bDeliveries = []byte("deliveries")   // delivery id -> deliveryMark (dedupe, retention)
	bByTime     = []byte("delivtime")    // received unix nanos(8)+seq(8) -> delivery id (retention index)
	bDigests    = []byte("delivsum")     // schema 2: sha256(event \0 body) -> delivery id; moved to bSumTime by schema 3
	bSumTime    = []byte("delivsumtime") // received unix nanos(8)+seq(8) -> sha256(event \0 body): the dedupe of replays under new ids, in time order
	bDead       = []byte("deadletter")   // seq -> dead letter
	bAudit      = []byte("audit")        // seq -> AuditRecord
	bAuditPR    = []byte("audit_pr")     // repo \0 pr(8) seq(8) -> nil
	bAuditSHA   = []byte("audit_sha")    // sha \0 seq(8) -> nil
	bAuditRun   = []byte("audit_run")    // run(8) seq(8) -> nil
	bPRs        = []byte("prs")          // repo -> pr(8) -> per-PR keys
	bComments   = []byte("comments")     // repo -> comment id(8) -> seen mark (see CommentSeen)
	bOutbox     = []byte("outbox")       // seq -> Notice
	bStage      = []byte("stage")        // repo -> seq -> StageRequest
	bRepos      = []byte("repos")        // schema 3: the families below under one bucket; split by schema 4
	// One bucket per family of keys (schema 4); each key keeps its family's prefix.
	bReused        = []byte("reused")        // "reused\0" repo \0 sha -> run id(8): the run a skipped head reused
	bSent          = []byte("sent")          // "sent\0" notice id(8) -> SentRef: what a sent notice produced
	bFailed        = []byte("failed")        // "failed\0" notice id(8) -> Notice: given up
	bBudgets       = []byte("budgets")       // "replies\0" / "reactions\0" repo \0 user(8) -> replyLog
	bReconciled    = []byte("reconciled")    // "reconciled\0" repo -> time: the last reconcile
	bInstallations = []byte("installations") // "installation\0" repo -> installation id(8)
	bUsers         = []byte("allowed_users") // "user\0" login -> AllowedUser
	bHeads         = []byte("heads")         // repo \0 sha \0 pr(8) -> nil: the PRs whose recorded head is sha (schema 6)
	bSeqWake       = []byte("seqwake")       // due unix nanos(8) pr(8) repo \0 kind -> nil: when each sequence is due (its wake-up or deadline; schema 7)
	bSaved         = []byte("saved")         // repo \0 ISO week -> SavedWeek: what the skips saved
	bApprovals     = []byte("approvals")     // approvals of external PRs' heads and their runs (approvals.go)
	bOffers        = []byte("offers")        // repo \0 nonce -> Offer: the buttons offered and those used (schema 8; "buttons" before)
	bSeqCommits    = []byte("seqcommits")    // repo \0 sha \0 pr(8) kind -> nil: the live sequences a commit's events wake (record.Sequence.Commits)
	allBuckets     = [][]byte{bMeta, bInbox, bDeliveries, bByTime, bSumTime, bDead, bAudit, bAuditPR, bAuditSHA, bAuditRun,
		bPRs, bComments, bOutbox, bStage, bReused, bSent, bFailed, bBudgets, bReconciled, bInstallations, bUsers, bHeads, bSeqWake, bSaved, bApprovals,
		bOffers, bSeqCommits}
	keySchema = []byte("schema")
)

// Store is the opened database. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
	now  func() time.Time

	failWrites func() error
	onCommit   func(int, time.Duration)

	appends  chan *writeReq
	inFlight atomic.Int64 // appends in the group being committed
	commits  atomic.Int64 // group commits done
	inboxN   atomic.Int64 // deliveries in the inbox
	outboxN  atomic.Int64 // notices in the outbox
	deadN    atomic.Int64 // dead letters
	// sums are the digests of the deliveries kept (bSumTime, loaded at
	// start), looked up by the committer alone: the index on disk is written
	// in time order, so an append adds to its right edge instead of
	// dirtying a random page (docs/BENCHMARKS.md).
	sums      map[sumKey]struct{}
	subMu     sync.Mutex
	subs      []chan struct{}
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// Options tune Open.
type Options struct {
	// Timeout bounds the wait for the file lock. Zero means one second.
	Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NoSync skips fsync. Only benchmarks that measure something else use it.
	NoSync bool
	// FailWrites, when set, is asked before each commit, after the writes
	// ran; an error it returns fails the commit as a full disk would and
	// rolls the writes back. Fault tests inject it.
	FailWrites func() error
	// OnCommit, when set, is told the size and duration of each group commit (metrics).
	OnCommit func(writes int, took time.Duration)
}

// Open opens or creates the database at path, creates every bucket, and
// migrates the schema forward. If another process holds the file it fails
// with ErrLocked after the timeout.
func Open(path string, opt Options) (*Store, error) {
	if opt.Timeout == 0 {
		opt.Timeout = time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opt.Timeout, NoSync: opt.NoSync, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: another opsbot holds %s (stop it, or use another state_path)", ErrLocked, path)
		}
		return nil, fmt.Errorf("opening state %q: %w", path, err)
	}
	removeStaleBackups(path)
	s := &Store{db: db, path: path, now: opt.Now, failWrites: opt.FailWrites, onCommit: opt.OnCommit, appends: make(chan *writeReq, 4096),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	// Depths are counted once here and kept as writes commit, so metrics
	// never walk the buckets; the digests kept are read into memory.
	s.sums = map[sumKey]struct{}{}
	err = db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bSumTime).ForEach(func(_, v []byte) error {
			if len(v) >= len(sumKey{}) {
				s.sums[sumKey(v[:16])] = struct{}{}
			}
			return nil
		}); err != nil {
			return err
		}
		s.inboxN.Store(int64(tx.Bucket(bInbox).Stats().KeyN))
		n := 0
		for _, ch := range channels {
			n += tx.Bucket(bOutbox).Bucket(ch).Stats().KeyN
		}
		s.outboxN.Store(int64(n))
		s.deadN.Store(int64(tx.Bucket(bDead).Stats().KeyN))
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	go s.committer()
	return s, nil
}

// ErrNoDatabase is OpenReadOnly's answer for a path where there is no file.
var ErrNoDatabase = errors.New("state: no database at that path")

// OpenReadOnly opens an existing database for reading only, as the commands
// that read one (audit, backup) do: a path with no file is ErrNoDatabase and
// nothing is created there; a file that is not an opsbot database, or is of
// a newer schema than this build's, is refused; nothing is migrated or
// written. bbolt's shared lock lets several readers in but no writer, so a
// file a running opsbot holds fails with ErrLocked after the timeout (zero:
// one second). Writes to the store fail (ErrClosed, or bbolt's read-only
// error).
func OpenReadOnly(path string, timeout time.Duration) (*Store, error) {
	if timeout == 0 {
		timeout = time.Second
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNoDatabase, path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening state %q: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a directory", ErrNoDatabase, path)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: another opsbot holds %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("opening state %q: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if meta == nil {
			return fmt.Errorf("%s is a bbolt file but not an opsbot database (no meta bucket)", path)
		}
		if raw := meta.Get(keySchema); raw != nil {
			if v := int(binary.BigEndian.Uint64(raw)); v > SchemaVersion {
				return fmt.Errorf("%w: schema %d, this build knows %d; upgrade opsbot", ErrNewer, v, SchemaVersion)
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	// No committer: stop and done are closed, appends is nil, so a write
	// is answered ErrClosed at once.
	s := &Store{db: db, path: path, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	s.closeOnce.Do(func() { close(s.stop) })
	close(s.done)
	return s, nil
}

// migrations[i] moves a database from schema i to i+1.
var migrations = []func(tx *bolt.Tx) error{
	0: func(tx *bolt.Tx) error { return nil }, // fresh file: buckets only
	1: outboxByChannel,
	2: digestsInTimeOrder,
	3: reposByFamily,
	4: decisionsCoded,
	5: headsIndexed,
	6: seqsDueIndexed,
	7: offersNonced,
}

// headsIndexed (schema 5 to 6) builds the index from each PR's recorded
// head to the PR (PRsOfHead) from the PRs' records.
func headsIndexed(tx *bolt.Tx) error {
	root, heads := tx.Bucket(bPRs), tx.Bucket(bHeads)
	return root.ForEachBucket(func(repo []byte) error {
		rb := root.Bucket(repo)
		return rb.ForEachBucket(func(pr []byte) error {
			var info PRInfo
			ok, err := getJSON(rb.Bucket(pr), kInfo, &info)
			if err != nil {
				return fmt.Errorf("the record of PR %x of %s: %w", pr, repo, err)
			}
			if !ok || info.HeadSHA == "" {
				return nil
			}
			return heads.Put(headKey(info.Repo, info.HeadSHA, info.PR), nil)
		})
	})
}

// decisionsCoded (schema 4 to 5) gives every decision stored before
// decisions carried a reason code the code ReasonRecorded, with its words
// as the detail: every reader then words a decision from its code alone.
// Fields it does not know are kept as they are.
func decisionsCoded(tx *bolt.Tx) error {
	return tx.Bucket(bPRs).ForEachBucket(func(repo []byte) error {
		rb := tx.Bucket(bPRs).Bucket(repo)
		return rb.ForEachBucket(func(pr []byte) error {
			b := rb.Bucket(pr)
			var keys, vals [][]byte
			c := b.Cursor()
			for k, v := c.Seek([]byte(pDec)); k != nil && bytes.HasPrefix(k, []byte(pDec)); k, v = c.Next() {
				var d map[string]json.RawMessage
				if err := json.Unmarshal(v, &d); err != nil {
					return fmt.Errorf("decision %q of %s: %w", k, repo, err)
				}
				var why Why
				if raw, ok := d["why"]; ok {
					if err := json.Unmarshal(raw, &why); err != nil {
						return fmt.Errorf("decision %q of %s: its why: %w", k, repo, err)
					}
				}
				if why.Code != "" {
					continue
				}
				var reason string
				if raw, ok := d["reason"]; ok {
					if err := json.Unmarshal(raw, &reason); err != nil {
						return fmt.Errorf("decision %q of %s: its reason: %w", k, repo, err)
					}
				}
				raw, err := json.Marshal(Why{Code: record.ReasonRecorded, Detail: reason})
				if err != nil {
					return err
				}
				d["why"] = raw
				out, err := json.Marshal(d)
				if err != nil {
					return err
				}
				keys, vals = append(keys, bytes.Clone(k)), append(vals, out)
			}
			for i, k := range keys {
				if err := b.Put(k, vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// repoFamilies are the key prefixes of the schema 3 repos bucket and the
// bucket each family moves to.
var repoFamilies = []struct {
	prefix string
	to     []byte
}{
	{"reused\x00", bReused}, {"sent\x00", bSent}, {"failed\x00", bFailed}, {"replies\x00", bBudgets},
	{"reactions\x00", bBudgets}, {"reconciled\x00", bReconciled}, {"installation\x00", bInstallations}, {"user\x00", bUsers},
}

// reposByFamily (schema 3 to 4) moves each family of keys of the shared
// repos bucket to a bucket of its own, keys unchanged. A key of no known
// family stops the migration: nothing is lost by guessing.
func reposByFamily(tx *bolt.Tx) error {
	old := tx.Bucket(bRepos)
	if old == nil {
		return nil
	}
	err := old.ForEach(func(k, v []byte) error {
		for _, f := range repoFamilies {
			if bytes.HasPrefix(k, []byte(f.prefix)) {
				return tx.Bucket(f.to).Put(bytes.Clone(k), bytes.Clone(v))
			}
		}
		return fmt.Errorf("repos bucket: key %q belongs to no known family", k)
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bRepos)
}

// digestsInTimeOrder (schema 2 to 3) moves the digest index from digest
// keys (random, so each append dirtied a page of its own) to time keys, the
// same as the retention index's; the committer looks sums up in memory.
func digestsInTimeOrder(tx *bolt.Tx) error {
	old := tx.Bucket(bDigests)
	if old == nil {
		return nil
	}
	marks, byTime := tx.Bucket(bDeliveries), tx.Bucket(bSumTime)
	err := old.ForEach(func(sum, id []byte) error {
		var m deliveryMark
		ok, err := getJSON(marks, id, &m)
		if err != nil || !ok {
			return err // a sum whose mark was pruned goes with the old bucket
		}
		return byTime.Put(timeKey(m.ReceivedAt, m.Seq), bytes.Clone(sum[:min(len(sum), 16)]))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(bDigests)
}

// outboxByChannel (schema 1 to 2) gives each channel its own outbox bucket
// and moves the notices waiting in the shared one into them.
func outboxByChannel(tx *bolt.Tx) error {
	root := tx.Bucket(bOutbox)
	for _, ch := range channels {
		if _, err := root.CreateBucketIfNotExists(ch); err != nil {
			return err
		}
	}
	var keys, vals [][]byte
	err := root.ForEach(func(k, v []byte) error {
		if v != nil { // a notice, not a channel bucket
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, k := range keys {
		var n Notice
		if err := json.Unmarshal(vals[i], &n); err != nil {
			return fmt.Errorf("outbox entry %x: %w", k, err)
		}
		b := root.Bucket([]byte(n.Channel))
		if b == nil {
			return fmt.Errorf("outbox entry %x: unknown channel %q", k, n.Channel)
		}
		if err := b.Put(k, vals[i]); err != nil {
			return err
		}
		if err := root.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) migrate() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(bMeta)
		v := 0
		if raw := meta.Get(keySchema); raw != nil {
			v = int(binary.BigEndian.Uint64(raw))
		}
		if v > SchemaVersion {
			return fmt.Errorf("%w: schema %d, this build knows %d; upgrade opsbot", ErrNewer, v, SchemaVersion)
		}
		if v == 0 {
			// A fresh file gets the current layout at once.
			if err := outboxByChannel(tx); err != nil {
				return err
			}
			v = SchemaVersion
		}
		for ; v < SchemaVersion; v++ {
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migrating state from schema %d: %w", v, err)
			}
		}
		return meta.Put(keySchema, u64(SchemaVersion))
	})
}

// Close stops the committer and closes the file. Appends after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return s.db.Close()
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Backup writes a consistent copy of the database to w while others keep
// reading and writing.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// BackupFile writes a consistent copy of the database to a new temporary
// file beside it, checks the copy, and returns it open at its start with its
// size. The read transaction lasts only as long as the local write, so a
// slow reader of the copy never holds back commits that must grow the file.
// The copy forgets when each repository was reconciled and the buttons
// offered (ForgetOnCopy), so a database restored from it starts with a
// first reconcile that runs nothing, and takes no click offered before. The caller closes the file and removes it (by f.Name()); copies a
// crash left behind are removed the next time the store is opened.
func (s *Store) BackupFile() (f *os.File, n int64, err error) {
	f, err = os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+backupSuffix+"*")
	if err != nil {
		return nil, 0, fmt.Errorf("creating the backup's temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			f = nil
		}
	}()
	if _, err = s.Backup(f); err != nil {
		return nil, 0, fmt.Errorf("writing the backup copy: %w", err)
	}
	if err = ForgetOnCopy(f.Name()); err != nil {
		return nil, 0, fmt.Errorf("clearing the backup copy's reconcile stamps: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the backup copy's size: %w", err)
	}
	n = st.Size()
	if err = CheckFile(f.Name()); err != nil {
		return nil, 0, fmt.Errorf("the backup copy does not pass bbolt's check: %w", err)
	}
	if _, err = f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("rewinding the backup copy: %w", err)
	}
	return f, n, nil
}

// backupSuffix marks BackupFile's temporary copies: "opsbot.db.backup-123".
const backupSuffix = ".backup-"

// removeStaleBackups removes the temporary copies a crash left beside the
// database at path.
func removeStaleBackups(path string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(filepath.Base(path))+backupSuffix+"*"))
	for _, p := range stale {
		os.Remove(p) // best effort: a copy that stays is only disk space
	}
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Check runs bbolt's consistency check and returns every problem found.
func (s *Store) Check() []error {
	var errs []error
	_ = s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	return errs
}

// CheckFile opens a database file read-only and checks it.
func CheckFile(path string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		if tx.Bucket(bMeta) == nil {
			errs = append(errs, errors.New("no meta bucket: not an opsbot database"))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func getJSON(b *bolt.Bucket, k []byte, v any) (bool, error) {
	raw := b.Get(k)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decoding %s: %w", k, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
