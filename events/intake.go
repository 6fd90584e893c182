package events

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/SemiAnalysisAI/opsbot/state"
)

// Intake takes deliveries into opsbot from every source: the GitHub
// webhook, recovery (reconcile), and the sources to come (Slack
// interactions, internal wake-ups). Each source verifies its own input;
// the intake classifies it, stores it (completing at once a delivery that
// needs no worker) and queues the rest, the same way for all of them.
type Intake struct {
	Schema *Schema
	Store  Inbox
	Queue  Queue
}

// Inbox is where the intake stores deliveries.
type Inbox interface {
	Append(ctx context.Context, d *state.Delivery) (state.AppendResult, error)
	// AppendDone records a delivery that needs no processing, with its one
	// write, as received and processed in one fsync'd commit.
	AppendDone(ctx context.Context, d *state.Delivery, outcome string, w state.Write) (state.AppendResult, error)
}

// Queue takes stored deliveries for processing.
type Queue interface{ Enqueue(d *state.Delivery) }

// Taken is what became of a delivery at intake.
type Taken struct {
	// Delivery is the stored record; nil when the delivery is ignored.
	Delivery *state.Delivery
	// Ignored says why opsbot does not use the delivery.
	Ignored string
	// Result is whether it was stored or was a duplicate.
	Result state.AppendResult
	// Done is, for a delivery completed at intake, its outcome.
	Done string
}

// ErrBadBody is a delivery whose body is not a payload (not valid JSON).
var ErrBadBody = errors.New("events: the body is not a valid payload")

// ErrLookup is a delivery whose classify could not read what it needs of
// opsbot's state (the index of heads): not the body's fault, so the
// source asks for it again.
var ErrLookup = errors.New("events: reading opsbot's state to classify the delivery failed")

// Take classifies, stores and queues one delivery. sum, when not zero, is
// the delivery's sum (a webhook's verified signature), which finds a
// copy sent again. An error wrapping ErrBadBody is the body's fault; any
// other is the store's, and the source should ask for the delivery again.
func (in *Intake) Take(ctx context.Context, event, id string, body []byte, sum [32]byte) (Taken, error) {
	d, ignored, err := in.Schema.Classify(event, id, body)
	if errors.Is(err, ErrLookup) {
		return Taken{}, err
	}
	if err != nil {
		return Taken{}, fmt.Errorf("%w: %w", ErrBadBody, err)
	}
	if d == nil {
		return Taken{Ignored: ignored}, nil
	}
	d.Sum = sum
	if event == EventCheckRun && d.Action == "requested_action" {
		// Two clicks on one button are the same payload: each is its own
		// delivery, known by GitHub's id alone (a zero sum would have the
		// store hash the body, which both share).
		d.Sum = sha256.Sum256([]byte("check_run requested_action\x00" + id))
	}
	t := Taken{Delivery: d}
	if outcome, w, ok := Done(d); ok {
		// Nothing to run (a comment with no command line): its one write
		// commits with its receipt, and no worker reads it again.
		t.Result, err = in.Store.AppendDone(ctx, d, outcome, w)
		if err == nil && t.Result == state.Stored {
			t.Done = outcome
		}
		return t, err
	}
	if t.Result, err = in.Store.Append(ctx, d); err != nil || t.Result == state.Duplicate {
		return t, err
	}
	in.Queue.Enqueue(d)
	return t, nil
}
