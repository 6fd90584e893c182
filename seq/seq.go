// Package seq is opsbot's engine for multi-step work (a merge request, a
// stage request, an approval): a sequence is a durable record (state's
// Sequence: its step, its data, a wake-up time and a deadline) whose
// transitions are guarded by its version. Nothing waits in memory: one
// Ticker turns every sequence that is due into a wake-up delivery, which
// the intake stores and the worker processes in order with the PR's
// webhooks, like any delivery; a restart loses nothing, since what was due
// is due again. A step is level-triggered: it re-reads what it acts on
// (the PR, its head, its checks) and acts only if the world still matches.
package seq

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Event is the event name of a wake-up delivery. Wake-ups come only from
// the Ticker: their ids start with IDPrefix, which the webhook refuses.
const Event = "opsbot_wakeup"

// IDPrefix starts the id of every wake-up delivery.
const IDPrefix = "opsbot-wake-"

// Payload is a wake-up delivery's body: the repository and PR (as a
// webhook names them, so the intake orders it with the PR's webhooks) and
// the sequence and version that were due.
type Payload struct {
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Number int          `json:"number"`
	Wakeup record.SeqRef `json:"opsbot_wakeup"`
}

// Delivery is the wake-up delivery of a due sequence: its id (one per
// sequence and version, so a sequence handed over twice before it moved is
// stored once) and its body.
func Delivery(ref record.SeqRef) (id string, body []byte) {
	var p Payload
	p.Repository.FullName, p.Number, p.Wakeup = ref.Repo, ref.PR, ref
	body, _ = json.Marshal(p) // plain strings and numbers: cannot fail
	return fmt.Sprintf("%s%s-%s-%d-v%d", IDPrefix, ref.Kind, strings.ReplaceAll(ref.Repo, "/", "-"), ref.PR, ref.Version), body
}

// Kind is one kind of sequence: its name (stored in the record) and its
// step, which a wake-up runs.
type Kind struct {
	Name string
	// Wake steps the sequence ref names, due now: it re-reads the world and
	// returns the write of the sequence's next version (in the write, the
	// record is read again: a version other than ref's moved meanwhile, and
	// its own wake-up comes) with what it does. An error is retried as any
	// delivery's.
	Wake func(ctx context.Context, rc *config.Repo, ref record.SeqRef) (outcome string, w Write, err error)
}

// Write is a step's change, committed with the wake-up's processing.
type Write func(tx record.Tx) error

// Ticker hands a wake-up delivery to the intake for each due sequence.
type Ticker struct {
	// Due lists the sequences due now (state.Store.DueSequences).
	Due func(now time.Time, max int) ([]record.SeqRef, error)
	// Take stores and queues a delivery (the intake); a duplicate is fine.
	Take func(ctx context.Context, event, id string, body []byte) error
	Now  func() time.Time
	Log  *slog.Logger
	// Every is the time between passes; 0 is 5 s.
	Every time.Duration
}

// MaxPerTick bounds the wake-ups one pass hands over; the rest come next.
const MaxPerTick = 500

// Tick hands over what is due now, once, and says how many.
func (t *Ticker) Tick(ctx context.Context) (int, error) {
	due, err := t.Due(t.Now(), MaxPerTick)
	if err != nil {
		return 0, fmt.Errorf("listing the sequences due: %w", err)
	}
	for i, ref := range due {
		id, body := Delivery(ref)
		if err := t.Take(ctx, Event, id, body); err != nil {
			return i, fmt.Errorf("handing over the wake-up of %s %s#%d: %w", ref.Kind, ref.Repo, ref.PR, err)
		}
	}
	return len(due), nil
}

// Run ticks until ctx ends; a failed pass is logged and tried at the next.
func (t *Ticker) Run(ctx context.Context) {
	every := t.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		if _, err := t.Tick(ctx); err != nil && ctx.Err() == nil {
			t.Log.Error("waking due sequences failed; trying again at the next tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}
