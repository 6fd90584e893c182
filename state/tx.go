package state

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Tx is one read-write transaction, offered to the code that decides what a
// delivery changes. Everything done through it commits together or not at all.
type Tx struct {
	tx       *bolt.Tx
	now      func() time.Time
	delivery *Delivery
	enqueued bool // a notice was added: wake the senders after commit
	dIn      int  // change in inbox depth, applied after commit
	dOut     int  // change in outbox depth, applied after commit
	dDead    int  // change in dead letters, applied after commit
	// sums is the group's view of the delivery sums: what this run of
	// the group added and removed, applied to the store's set after commit.
	sums *sumChanges
}

// Now is the store's clock.
func (t *Tx) Now() time.Time { return t.now() }

// DeliveryID is the id of the delivery being completed, or "".
func (t *Tx) DeliveryID() string {
	if t.delivery == nil {
		return ""
	}
	return t.delivery.ID
}

// Audit appends a record to the audit. Time and the delivery id are filled
// in when empty.
func (t *Tx) Audit(r AuditRecord) error {
	if r.Time.IsZero() {
		r.Time = t.now()
	}
	if r.DeliveryID == "" {
		r.DeliveryID = t.DeliveryID()
	}
	return appendAuditTx(t.tx, &r)
}

// Update runs w in one read-write transaction that is not tied to a delivery
// (a decision asked for over the API, an outbox sender's bookkeeping).
//
// It shares a commit with the writes queued at the same moment, so w may run
// more than once and must not act outside the transaction.
func (s *Store) Update(w Write) error {
	return s.write(context.Background(), nil, w)
}

// update runs fn through the group committer.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	return s.write(context.Background(), nil, func(t *Tx) error { return fn(t.tx) })
}
