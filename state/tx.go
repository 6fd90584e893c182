package state

import (
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
func (s *Store) Update(w Write) error {
	t := &Tx{now: s.now}
	err := s.db.Update(func(btx *bolt.Tx) error {
		t.tx, t.enqueued = btx, false
		return w(t)
	})
	if err == nil && t.enqueued {
		s.wake()
	}
	return err
}
