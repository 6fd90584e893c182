package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Delivery is one webhook delivery as GitHub sent it, kept until processed.
type Delivery struct {
	Seq        uint64    `json:"seq,omitempty"` // the inbox key; not in the stored header
	ID         string    `json:"id"`            // X-GitHub-Delivery
	Event      string    `json:"event"`
	Action     string    `json:"action,omitempty"`
	Repo       string    `json:"repo,omitempty"`
	PR         int       `json:"pr,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// NoCommands marks a new comment with no command line in it: nothing to run.
	NoCommands bool `json:"no_commands,omitempty"`
	// CommentID is the comment of an issue_comment delivery, so one with no
	// commands is recorded as seen without decoding the payload again.
	CommentID int64 `json:"comment_id,omitempty"`
	// Parsed is what ingest read from the body (events.Schema.Classify),
	// in a form the events package owns: stored with the delivery so the
	// worker does not read the body again. Empty for deliveries stored
	// before ingest recorded it.
	Parsed json.RawMessage `json:"parsed,omitempty"`
	Body   []byte          `json:"-"`
	// Sum, when set, is what identifies the delivery for the dedupe of
	// deliveries resent under a new id (auth.SignatureSum, of its
	// verified signature); unset, Append hashes the event and body.
	Sum [sha256.Size]byte `json:"-"`
}

// Key is the ordering key: deliveries with the same key are processed in
// arrival order, one at a time.
func (d *Delivery) Key() string {
	if d.PR > 0 {
		return fmt.Sprintf("%s#%d", d.Repo, d.PR)
	}
	return d.Repo
}

// AppendResult says what Append did.
type AppendResult int

const (
	Stored    AppendResult = iota // new delivery, durably stored
	Duplicate                     // delivery id, or the same event and body, seen before; nothing stored
)

// writeReq is one write waiting for the committer.
type writeReq struct {
	fn        func(t *Tx) error
	delivery  *Delivery // for Tx.DeliveryID
	err       error
	enqueued  bool
	dIn, dOut int
	dDead     int
	done      chan struct{}
}

// Append stores a delivery durably (committed and fsync'd) unless its id, or
// a delivery of the same event with the same body, was seen before (while
// delivery ids are kept): GitHub's signature does not cover the delivery id,
// so a captured delivery resent under a new id is a duplicate too.
// Concurrent calls share one commit. On success d.Seq is set.
func (s *Store) Append(ctx context.Context, d *Delivery) (AppendResult, error) {
	// The record is built here, in the caller's goroutine, so the one
	// committer only stores it.
	val, err := encodeDelivery(d)
	if err != nil {
		return 0, fmt.Errorf("storing delivery %s: %w", d.ID, err)
	}
	sum := d.Sum
	if sum == ([sha256.Size]byte{}) {
		sum = bodySum(d) // hashing the body is the caller's work, not the committer's
	}
	var res AppendResult
	err = s.write(ctx, nil, func(t *Tx) error {
		var err error
		res, err = s.appendTx(t, d, val, sum)
		if res == Stored {
			t.dIn++
		}
		return err
	})
	if err != nil {
		d.Seq = 0
		return 0, fmt.Errorf("storing delivery %s: %w", d.ID, err)
	}
	return res, nil
}

// AppendDone records a delivery that needs no processing (a comment with no
// command line: its seen mark is all it changes) as received and processed
// at once: deduplicated as Append deduplicates, then w and the processed
// mark in the same commit, fsync'd before it returns. Nothing goes to the
// inbox and the body is not stored, since nothing will read it: for the
// most common delivery a commit writes a few small keys instead of the
// body's pages and a second, completing, write (docs/BENCHMARKS.md).
func (s *Store) AppendDone(ctx context.Context, d *Delivery, outcome string, w Write) (AppendResult, error) {
	sum := d.Sum
	if sum == ([sha256.Size]byte{}) {
		sum = bodySum(d)
	}
	mark, err := json.Marshal(deliveryMark{ReceivedAt: d.ReceivedAt, ProcessedAt: d.ReceivedAt, Outcome: outcome, Processed: 1})
	if err != nil {
		return 0, err
	}
	var res AppendResult
	err = s.write(ctx, d, func(t *Tx) error {
		tx := t.tx
		marks := tx.Bucket(bDeliveries)
		res = Duplicate
		if marks.Get([]byte(d.ID)) != nil || s.has(t.sums, keyOf(sum)) {
			return nil
		}
		// The time index's sequence: the inbox's, so keys never collide
		// with a stored delivery's.
		seq, err := tx.Bucket(bInbox).NextSequence()
		if err != nil {
			return err
		}
		if w != nil {
			if err := w(t); err != nil {
				return err
			}
		}
		if err := marks.Put([]byte(d.ID), mark); err != nil {
			return err
		}
		k := timeKey(d.ReceivedAt, seq)
		key := keyOf(sum)
		if err := tx.Bucket(bSumTime).Put(k, key[:]); err != nil {
			return err
		}
		t.sums.add[key] = struct{}{}
		res = Stored
		return tx.Bucket(bByTime).Put(k, []byte(d.ID))
	})
	if err != nil {
		return 0, fmt.Errorf("storing delivery %s: %w", d.ID, err)
	}
	return res, nil
}

// write runs fn in a transaction shared with the other writes queued at the
// same moment (one commit, one fsync for all of them) and waits until it is
// durable. fn may run more than once (alone, after a shared transaction
// failed), so it must not act outside the transaction.
func (s *Store) write(ctx context.Context, d *Delivery, fn func(t *Tx) error) error {
	r := &writeReq{fn: fn, delivery: d, done: make(chan struct{})}
	select {
	case s.appends <- r:
	case <-s.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the write is committed or failed; wait for it, so the
	// caller's answer matches what is on disk. If the committer has exited,
	// a request it never took is answered here.
	select {
	case <-r.done:
	case <-s.done:
		select {
		case <-r.done:
		default:
			return ErrClosed
		}
	}
	if r.err == nil {
		// Rises before falls: a delivery completed into a notice must never
		// read as an empty inbox and an empty outbox in between.
		counts := [...]struct {
			c *atomic.Int64
			d int
		}{{&s.inboxN, r.dIn}, {&s.outboxN, r.dOut}, {&s.deadN, r.dDead}}
		for _, c := range counts {
			if c.d > 0 {
				c.c.Add(int64(c.d))
			}
		}
		for _, c := range counts {
			if c.d < 0 {
				c.c.Add(int64(c.d))
			}
		}
		if r.enqueued {
			s.wake()
		}
	}
	return r.err
}

// committer is the group commit: it takes every write waiting, runs them in
// one transaction (one fsync), and answers them all. While a commit is in
// flight the next group gathers, so the group follows the load with no timer
// to wait on. If a shared transaction fails, each write is retried alone so
// one bad write cannot fail the others.
func (s *Store) committer() {
	defer close(s.done)
	const maxGroup = 512
	group := make([]*writeReq, 0, maxGroup)
	for {
		select {
		case r := <-s.appends:
			group = append(group[:0], r)
		case <-s.stop:
			s.drainClosed()
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case r := <-s.appends:
				group = append(group, r)
			default:
				break more
			}
		}
		s.inFlight.Store(int64(len(group)))
		began := time.Now()
		err := s.run(group)
		if err != nil && len(group) > 1 {
			for _, r := range group {
				r.err = s.run([]*writeReq{r})
			}
		} else {
			for _, r := range group {
				r.err = err
			}
		}
		s.inFlight.Store(0)
		s.commits.Add(1)
		if s.onCommit != nil {
			s.onCommit(len(group), time.Since(began))
		}
		for _, r := range group {
			close(r.done)
		}
	}
}

// sumChanges are the sums one run of a group adds and removes: the
// store's set changes only once the run commits.
type sumChanges struct {
	add, del map[sumKey]struct{}
}

// has reports whether a sum is kept, counting this run's changes.
func (s *Store) has(c *sumChanges, sum sumKey) bool {
	if _, ok := c.add[sum]; ok {
		return true
	}
	if _, ok := c.del[sum]; ok {
		return false
	}
	_, ok := s.sums[sum]
	return ok
}

func (s *Store) run(group []*writeReq) error {
	sums := &sumChanges{add: map[sumKey]struct{}{}, del: map[sumKey]struct{}{}}
	err := s.db.Update(func(btx *bolt.Tx) error {
		for _, r := range group {
			t := &Tx{tx: btx, now: s.now, delivery: r.delivery, sums: sums}
			if err := r.fn(t); err != nil {
				return err
			}
			r.enqueued, r.dIn, r.dOut, r.dDead = t.enqueued, t.dIn, t.dOut, t.dDead
		}
		if s.failWrites != nil {
			// At commit, after the writes ran, as a full disk fails.
			return s.failWrites()
		}
		return nil
	})
	if err == nil {
		for k := range sums.del {
			delete(s.sums, k)
		}
		for k := range sums.add {
			s.sums[k] = struct{}{}
		}
	}
	return err
}

func (s *Store) drainClosed() {
	for {
		select {
		case r := <-s.appends:
			r.err = ErrClosed
			close(r.done)
		default:
			return
		}
	}
}

type deliveryMark struct {
	Seq         uint64    `json:"seq"`
	ReceivedAt  time.Time `json:"received_at"`
	ProcessedAt time.Time `json:"processed_at,omitzero"`
	Outcome     string    `json:"outcome,omitempty"`
	Processed   int       `json:"processed,omitempty"` // times completed; exactly one when done
	Digest      []byte    `json:"digest,omitempty"`    // schema 2 only: the digest is indexed in bSumTime now
}

// bodySum identifies a delivery by what it says, not by its id: a hash of
// its event and body (a "sum", as opsbot calls every hash; a "digest" is
// the weekly Slack summary).
func bodySum(d *Delivery) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(d.Event))
	h.Write([]byte{0})
	h.Write(d.Body)
	return [sha256.Size]byte(h.Sum(nil))
}

// sumKey is what the dedupe keeps of a delivery's sum: its first 16
// bytes, half the memory of the whole; two deliveries would collide by
// chance with odds of 2^-128 a pair.
type sumKey [16]byte

func keyOf(sum [sha256.Size]byte) sumKey { return sumKey(sum[:16]) }

func (s *Store) appendTx(t *Tx, d *Delivery, val []byte, full [sha256.Size]byte) (AppendResult, error) {
	sum := keyOf(full)
	tx := t.tx
	marks := tx.Bucket(bDeliveries)
	if marks.Get([]byte(d.ID)) != nil {
		return Duplicate, nil
	}
	if s.has(t.sums, sum) {
		return Duplicate, nil
	}
	inbox := tx.Bucket(bInbox)
	seq, err := inbox.NextSequence()
	if err != nil {
		return 0, err
	}
	d.Seq = seq
	if err := inbox.Put(u64(seq), val); err != nil {
		return 0, err
	}
	if err := putJSON(marks, []byte(d.ID), deliveryMark{Seq: seq, ReceivedAt: d.ReceivedAt}); err != nil {
		return 0, err
	}
	k := timeKey(d.ReceivedAt, seq)
	if err := tx.Bucket(bSumTime).Put(k, sum[:]); err != nil {
		return 0, err
	}
	t.sums.add[sum] = struct{}{}
	return Stored, tx.Bucket(bByTime).Put(k, []byte(d.ID))
}

func timeKey(t time.Time, seq uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(t.UnixNano()))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// A delivery is stored as a 4-byte header length, the header as JSON, then the raw body.
func encodeDelivery(d *Delivery) ([]byte, error) {
	h, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4+len(h)+len(d.Body))
	binary.BigEndian.PutUint32(out, uint32(len(h)))
	copy(out[4:], h)
	copy(out[4+len(h):], d.Body)
	return out, nil
}

func decodeDelivery(key, raw []byte, withBody bool) (*Delivery, error) {
	if len(raw) < 4 {
		return nil, errors.New("state: short delivery record")
	}
	n := int(binary.BigEndian.Uint32(raw))
	if 4+n > len(raw) {
		return nil, errors.New("state: corrupt delivery header")
	}
	var d Delivery
	if err := json.Unmarshal(raw[4:4+n], &d); err != nil {
		return nil, fmt.Errorf("state: decoding delivery: %w", err)
	}
	d.Seq = binary.BigEndian.Uint64(key) // the key is the sequence number
	if withBody {
		d.Body = bytes.Clone(raw[4+n:])
	}
	return &d, nil
}

// Pending lists every unprocessed delivery in arrival order, without bodies.
func (s *Store) Pending() ([]*Delivery, error) {
	var out []*Delivery
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bInbox).ForEach(func(k, v []byte) error {
			d, err := decodeDelivery(k, v, false)
			if err != nil {
				return fmt.Errorf("inbox entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// Waiting reports whether a delivery other than the one numbered self
// waits in the inbox with ordering key key (a PR's) and is one that match
// takes (by its header: event and action). A sequence's step asks it right
// before an act it cannot take back, so a cancel stored meanwhile is
// processed first. It reads every pending delivery's header: the inbox
// holds what is not processed yet, which is small unless opsbot is behind.
func (s *Store) Waiting(key string, self uint64, match func(event, action string) bool) (bool, error) {
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bInbox).Cursor()
		for k, v := c.First(); k != nil && !found; k, v = c.Next() {
			if binary.BigEndian.Uint64(k) == self {
				continue
			}
			d, err := decodeDelivery(k, v, false)
			if err != nil {
				return fmt.Errorf("inbox entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			found = d.Key() == key && match(d.Event, d.Action)
		}
		return nil
	})
	return found, err
}

// Delivery loads one pending delivery with its body.
func (s *Store) Delivery(seq uint64) (*Delivery, error) {
	var d *Delivery
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bInbox).Get(u64(seq))
		if raw == nil {
			return ErrNotFound
		}
		var err error
		d, err = decodeDelivery(u64(seq), raw, true)
		return err
	})
	return d, err
}

// Write is the state change a processed delivery causes. It runs inside the
// transaction that marks the delivery processed, so both happen or neither.
type Write func(tx *Tx) error

// Complete runs w and removes delivery d (as loaded by Delivery: its Seq
// and ID) from the inbox in one transaction, recording outcome. Completing
// a delivery that is no longer pending does nothing and returns
// ErrNotFound: it was completed before. The record is not decoded again in
// the transaction: the one committer only writes.
func (s *Store) Complete(d *Delivery, outcome string, w Write) error {
	seq := d.Seq
	// The mark is built here, not in the committer: the one committer only
	// writes (docs/BENCHMARKS.md).
	mark, err := json.Marshal(deliveryMark{Seq: seq, ReceivedAt: d.ReceivedAt, ProcessedAt: s.now(), Outcome: outcome, Processed: 1})
	if err != nil {
		return err
	}
	notFound := false
	err = s.write(context.Background(), nil, func(t *Tx) error {
		notFound = false
		btx := t.tx
		inbox := btx.Bucket(bInbox)
		if inbox.Get(u64(seq)) == nil {
			notFound = true
			return nil
		}
		if w != nil {
			t.delivery = d
			if err := w(t); err != nil {
				return err
			}
		}
		if err := inbox.Delete(u64(seq)); err != nil {
			return err
		}
		t.dIn--
		marks := btx.Bucket(bDeliveries)
		if old := marks.Get([]byte(d.ID)); bytes.Contains(old, []byte(`"processed":`)) {
			// Its inbox entry was there, so it never was: a second
			// completion would mean the store is corrupt.
			return fmt.Errorf("state: delivery %s (seq %d) is marked processed already", d.ID, seq)
		}
		return marks.Put([]byte(d.ID), mark)
	})
	if err == nil && notFound {
		return ErrNotFound
	}
	return err
}

// DeadLetter is a delivery that could not be processed, kept with its reason.
type DeadLetter struct {
	Delivery *Delivery `json:"delivery"`
	Reason   string    `json:"reason"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at"`
	Body     []byte    `json:"body"`
}

// Bury moves a pending delivery to the dead-letter bucket with its reason,
// and applies also (nil: nothing) in the same transaction.
func (s *Store) Bury(seq uint64, reason string, attempts int, also Write) error {
	return s.write(context.Background(), nil, func(t *Tx) error {
		tx := t.tx
		inbox := tx.Bucket(bInbox)
		raw := inbox.Get(u64(seq))
		if raw == nil {
			return ErrNotFound
		}
		d, err := decodeDelivery(u64(seq), raw, true)
		if err != nil {
			return err
		}
		dl := DeadLetter{Delivery: d, Reason: reason, Attempts: attempts, At: s.now(), Body: d.Body}
		if err := putJSON(tx.Bucket(bDead), u64(seq), dl); err != nil {
			return err
		}
		marks := tx.Bucket(bDeliveries)
		var m deliveryMark
		if _, err := getJSON(marks, []byte(d.ID), &m); err != nil {
			return err
		}
		m.ProcessedAt, m.Outcome = s.now(), "dead-letter"
		if err := putJSON(marks, []byte(d.ID), m); err != nil {
			return err
		}
		if also != nil {
			if err := also(t); err != nil {
				return err
			}
		}
		t.dIn--
		t.dDead++
		return inbox.Delete(u64(seq))
	})
}

// DeadLetters lists the dead-lettered deliveries, oldest first.
func (s *Store) DeadLetters() ([]DeadLetter, error) {
	var out []DeadLetter
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bDead).ForEach(func(k, v []byte) error {
			var dl DeadLetter
			if err := json.Unmarshal(v, &dl); err != nil {
				return err
			}
			out = append(out, dl)
			return nil
		})
	})
	return out, err
}

// DeliveryStatus is what the store knows of a delivery id.
type DeliveryStatus struct {
	Seq         uint64
	ReceivedAt  time.Time
	ProcessedAt time.Time
	Outcome     string
	Processed   int
}

// DeliveryStatus reports whether a delivery id was seen and how it ended.
func (s *Store) DeliveryStatus(id string) (DeliveryStatus, error) {
	var m deliveryMark
	err := s.db.View(func(tx *bolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bDeliveries), []byte(id), &m)
		if !ok && err == nil {
			return ErrNotFound
		}
		return err
	})
	return DeliveryStatus{Seq: m.Seq, ReceivedAt: m.ReceivedAt, ProcessedAt: m.ProcessedAt, Outcome: m.Outcome,
		Processed: m.Processed}, err
}

// InboxStats is the inbox's depth and the age of its oldest entry.
type InboxStats struct {
	Depth      int
	Oldest     time.Time
	DeadLetter int
}

// InboxStats reads the inbox depth and oldest pending delivery.
func (s *Store) InboxStats() (InboxStats, error) {
	var st InboxStats
	err := s.db.View(func(tx *bolt.Tx) error {
		in := tx.Bucket(bInbox)
		st.Depth = int(s.inboxN.Load())
		if k, v := in.Cursor().First(); v != nil {
			d, err := decodeDelivery(k, v, false)
			if err != nil {
				return err
			}
			st.Oldest = d.ReceivedAt
		}
		st.DeadLetter = int(s.deadN.Load())
		return nil
	})
	return st, err
}

// PruneDeliveries forgets processed delivery ids (and the sums of their
// bodies) received before cutoff, at most limit of them, and returns how many
// went. Pending deliveries and the audit are never pruned.
func (s *Store) PruneDeliveries(cutoff time.Time, limit int) (int, error) {
	n := 0
	err := s.write(context.Background(), nil, func(t *Tx) error {
		tx := t.tx
		n = 0
		byTime := tx.Bucket(bByTime)
		sums := tx.Bucket(bSumTime)
		marks := tx.Bucket(bDeliveries)
		inbox := tx.Bucket(bInbox)
		c := byTime.Cursor()
		end := timeKey(cutoff, 0)
		for k, v := c.First(); k != nil && bytes.Compare(k, end) < 0 && n < limit; {
			seq := binary.BigEndian.Uint64(k[8:])
			if inbox.Get(u64(seq)) != nil {
				k, v = c.Next()
				continue
			}
			kk := bytes.Clone(k)
			if sum := sums.Get(k); len(sum) >= len(sumKey{}) {
				t.sums.del[sumKey(sum[:16])] = struct{}{}
				if err := sums.Delete(kk); err != nil {
					return err
				}
			}
			if err := marks.Delete(v); err != nil {
				return err
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
			k, v = c.Seek(kk)
		}
		return nil
	})
	return n, err
}

// RewritePending offers every pending delivery, with its body, to fn in one
// transaction, and stores again each fn changed: how an older build's
// deliveries gain what ingest records now (events.UpgradeInbox). It
// returns how many changed.
func (s *Store) RewritePending(fn func(d *Delivery) (changed bool, err error)) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(bInbox)
		var keys, vals [][]byte
		err := b.ForEach(func(k, v []byte) error {
			d, err := decodeDelivery(k, v, true)
			if err != nil {
				return fmt.Errorf("inbox entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			changed, err := fn(d)
			if err != nil || !changed {
				return err
			}
			d.Seq = 0 // the key, not the header, holds it
			raw, err := encodeDelivery(d)
			if err != nil {
				return err
			}
			keys, vals = append(keys, bytes.Clone(k)), append(vals, raw)
			return nil
		})
		if err != nil {
			return err
		}
		for i, k := range keys {
			if err := b.Put(k, vals[i]); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	return n, err
}
