package seq

import (
	"context"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state/plan"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// Typed is a kind of sequence whose data is D, written as its states
// decide and nothing more: the engine reads the record at the version that
// was due and chooses Step, Expire or Cleanup (events' wake-up route), and
// Typed decodes the data, guards the plan a state returns by that version
// (plan.SequenceAt: a sequence that moved meanwhile writes nothing, and
// its own wake-up comes), and applies it as the wake-up's write. A state
// waits with Waiting, ends with a PutSequence of a done version, and sends
// what it cannot take back with Wakeup.Send. Kind is the engine's form.
type Typed[D any] struct {
	Name string
	// Step steps a sequence due now; Expire ends it at its deadline (nil:
	// the engine ends it as "expired"); Cleanup deletes what a done one
	// left on GitHub (nil: it makes nothing there). Kind says what each is
	// for. Cleanup's plan is not guarded by the version (a done sequence is
	// version 0 to plan.SequenceAt): its PutSequence's Read is its guard.
	Step, Expire, Cleanup func(ctx context.Context, rc *config.Repo, s Step[D]) (outcome string, p plan.Plan, err error)
	Routes                []Route
	OnStart               Conflict
	Stop                  string
	// Teller tells the plan's notices as it is applied (the notifier's).
	Teller func() plan.Teller
}

// Step is one step of a typed sequence: the wake-up, and the sequence's
// data as stored at the version that was due.
type Step[D any] struct {
	Wakeup
	Data D
}

// Kind is the kind as the engine runs it.
func (t Typed[D]) Kind() Kind {
	k := Kind{Name: t.Name, Routes: t.Routes, OnStart: t.OnStart, Stop: t.Stop}
	if t.Step != nil { // without one, the engine says the kind is unknown
		k.Wake = t.run(t.Step, true)
	}
	if t.Expire != nil {
		k.Expire = t.run(t.Expire, true)
	}
	if t.Cleanup != nil {
		k.Cleanup = t.run(t.Cleanup, false)
	}
	return k
}

func (t Typed[D]) run(f func(context.Context, *config.Repo, Step[D]) (string, plan.Plan, error), guarded bool) func(context.Context, *config.Repo, Wakeup) (string, Write, error) {
	return func(ctx context.Context, rc *config.Repo, w Wakeup) (string, Write, error) {
		d, err := DataOf[D](w.Seq)
		if err != nil {
			return "", nil, err
		}
		out, p, err := f(ctx, rc, Step[D]{Wakeup: w, Data: d})
		if err != nil {
			return "", nil, err
		}
		if guarded {
			p.Require = append([]plan.Fact{plan.SequenceAt{Repo: w.Seq.Repo, PR: w.Seq.PR, Kind: w.Seq.Kind, Version: w.Seq.Version}}, p.Require...)
		}
		var tl plan.Teller
		if t.Teller != nil {
			tl = t.Teller()
		}
		return out, func(tx record.Tx) error { return plan.Apply(tx, tl, p) }, nil
	}
}
