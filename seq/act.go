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
// step whose context ended meanwhile (the process stopping, the attempt's
// time up) gets ctx's error back unless do's answer is a clear refusal:
// the next step, in this process or the next, finds the mark tried and
// reads GitHub before it says anything. Otherwise answer is do's own:
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
	var no notTaken
	if answer != nil && ctx.Err() != nil && !(errors.As(answer, &no) && no.NotTaken()) {
		return nil, ctx.Err()
	}
	return answer, nil
}

// notTaken is an answer that says for certain the act was not taken
// (ghclient.Refusal): it stands even when the step's context ended (the
// process stopping, the attempt's time up).
type notTaken interface{ NotTaken() bool }
