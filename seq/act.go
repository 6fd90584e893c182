package seq

import (
	"context"
	"errors"
)

// ErrNotFresh is an act whose mark this process did not make, or sent
// already: it may have been taken, so it is never sent again blindly (the
// step decides from what GitHub shows).
var ErrNotFresh = errors.New("seq: the act's mark is not this process's, or was sent already: not sent again")

// Send sends an act that cannot be taken back (a merge, a branch update or
// move, an enqueue, a dispatch), marked in the sequence's record by an
// earlier step, the one way every kind sends one: a stop that waits for
// the PR goes first (ErrYield), checked as the last thing before the act,
// with nothing read from GitHub between; the mark is used up (ErrNotFresh
// for one that is not this process's, or was tried); and do runs once. A
// process that is stopping (ctx ended) gets ctx's error back whatever do
// answered: the next process finds the mark. Otherwise answer is do's own:
// nil (taken), a refusal, or an answer that does not say (lost, untyped),
// which the kind reads GitHub back for before it says anything.
func (w Wakeup) Send(ctx context.Context, marks *Marks, mark string, do func(context.Context) error) (answer, err error) {
	if err := w.CheckClear(); err != nil {
		return nil, err
	}
	if !marks.Try(mark) {
		return nil, ErrNotFresh
	}
	answer = do(ctx)
	if answer != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return answer, nil
}
