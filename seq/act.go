package seq

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNotFresh is an act whose mark this process did not make, or sent
// already: it may have been taken, so it is never sent again blindly (the
// step decides from what GitHub shows).
var ErrNotFresh = errors.New("seq: the act's mark is not this process's, or was sent already: not sent again")

// Act is an act a step sends that cannot be taken back (a merge, a
// branch update or move, an enqueue, a dispatch), through Wakeup.Send.
type Act struct {
	// Mark is the act's mark, made in the engine's marks (Wakeup.Marks,
	// commands.Deps.Acts) and written in the sequence's record by an
	// earlier step: the act is sent once, under it.
	Mark string
	// Do sends the act.
	Do func(ctx context.Context) error
	// Verify reads GitHub back where Do's answer does not say whether the
	// act was taken (lost, or an untyped error): the engine calls it before
	// the kind says anything. nil: nothing read at once can tell (a branch
	// update GitHub makes after it answers): the kind waits for what the
	// act makes.
	Verify func(ctx context.Context) (Shown, error)
}

// Shown is what GitHub shows of an act read back (Act.Verify).
type Shown int

// What an act read back shows.
const (
	// NotShown: GitHub does not show it taken (yet), nor that it cannot
	// be: the kind reads again later, never asks again blindly.
	NotShown Shown = iota
	// ShownTaken: GitHub shows the act taken (the PR merged at the head,
	// the branch at opsbot's commit, the PR queued, the run made).
	ShownTaken
	// ShownNotTaken: GitHub shows the act not taken when read back (a
	// compare-and-swap's branch still where it was, or moved by another
	// push): the kind stops, and does not ask again; should a request
	// GitHub was still working on land later, nothing opsbot holds covers
	// what it made.
	ShownNotTaken
)

// Answer is what became of an act: GitHub's answer (Err: nil, taken; a
// refusal; or one that does not say), and, for one that does not say,
// what the engine read back (Shown; ReadErr, the read's error).
type Answer struct {
	Err     error
	Shown   Shown
	ReadErr error
}

// Taken reports whether GitHub took the act: it said so, or it shows so.
func (a Answer) Taken() bool { return a.Err == nil || a.Shown == ShownTaken }

// Unclear reports whether GitHub's answer did not say (lost, untyped):
// then Shown says what the read back showed.
func (a Answer) Unclear() bool {
	var no notTaken
	return a.Err != nil && !(errors.As(a.Err, &no) && no.NotTaken())
}

// Send sends act, the one way every kind sends what it cannot take back:
// a stop that waits for the PR goes first (ErrYield), checked as the last
// thing before the act, with nothing read from GitHub between; the act's
// mark is used up (ErrNotFresh for one that is not this process's, or was
// tried); Do runs once; and where its answer does not say (lost, untyped)
// GitHub is read back (Act.Verify) before the kind says anything.
//
// Do's context carries the stop check down to the GitHub client, which
// asks it again right before each request of the act goes out (Sending),
// after whatever the client waited first (a rate limit it waits out, a
// back-off): a stop stored meanwhile sends nothing, and where no request
// of the act may have been taken, the mark is this process's again and
// Send answers as its first check would have.
//
// A step whose context ended meanwhile (the process stopping, the
// attempt's time up) gets ctx's error back unless Do's answer is a clear
// refusal: the next step, in this process or the next, finds the mark
// tried and reads GitHub before it says anything.
func (w Wakeup) Send(ctx context.Context, act Act) (Answer, error) {
	if err := w.CheckClear(); err != nil {
		return Answer{}, err
	}
	marks := w.Marks
	if marks == nil || !marks.Try(act.Mark) {
		return Answer{}, ErrNotFresh
	}
	st := &actState{check: w.CheckClear}
	a := Answer{Err: act.Do(context.WithValue(ctx, actKey{}, st))}
	var ns *NotSent
	if a.Unclear() && st.nothingLeft() {
		// The act's last request was stopped before it left (a stop
		// waited at the last check, the step's time ran out while the
		// client waited, GitHub's token could not be had), and GitHub
		// refused all that did leave: the act is still to send, under its
		// mark.
		marks.restore(act.Mark)
		switch {
		case errors.As(a.Err, &ns):
			return Answer{}, ns.Err
		case ctx.Err() != nil:
			return Answer{}, ctx.Err()
		}
		return Answer{}, fmt.Errorf("the act was not sent, and is sent at a later step: %w", a.Err)
	}
	if a.Unclear() && ctx.Err() != nil {
		return Answer{}, ctx.Err()
	}
	if a.Unclear() && act.Verify != nil {
		a.Shown, a.ReadErr = act.Verify(ctx)
	}
	return a, nil
}

// notTaken is an answer that says for certain the act was not taken
// (ghclient.Refusal): it stands even when the step's context ended (the
// process stopping, the attempt's time up).
type notTaken interface{ NotTaken() bool }

// NotSent is a request of an act the GitHub client did not send: its
// last stop check (Sending) answered Err (ErrYield: a stop waits for the
// PR; or the read of the inbox failed). MaybeTaken says an earlier
// request of the same act went out and GitHub's answer to it did not say
// it was refused (the act may have been taken: the kind reads GitHub back).
type NotSent struct {
	Err        error
	MaybeTaken bool
}

func (e *NotSent) Error() string {
	return "not sent: the last check before the request answered: " + e.Err.Error()
}

func (e *NotSent) Unwrap() error { return e.Err }

type actKey struct{}

// actState is what Send leaves in its act's context for the GitHub client.
type actState struct {
	check func() error
	mu    sync.Mutex
	maybe bool // a request went out whose answer was not a clear refusal
	// stopped says the act's last request was stopped before it left
	// (Sending's check, Unsent): its answer is the client's, not GitHub's.
	stopped bool
}

// nothingLeft reports whether the act's last request was stopped before
// it left and no earlier one may have been taken (GitHub refused each that
// went out under its rate limit). A request GitHub answered last is
// GitHub's answer, whatever it is; a client that says nothing (Sending
// never asked) may have sent anything.
func (a *actState) nothingLeft() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopped && !a.maybe
}

// InAct reports whether ctx is an act's (Send): the GitHub client then
// asks Sending before each request, or says why one was not sent (Unsent).
func InAct(ctx context.Context) bool {
	_, ok := ctx.Value(actKey{}).(*actState)
	return ok
}

// Unsent is the error of a request of an act the GitHub client did not
// send for err (the step's time ran out while it waited, the token for
// GitHub could not be had): a *NotSent, the act told that nothing of this
// request left. Outside an act it is err.
func Unsent(ctx context.Context, err error) error {
	a, _ := ctx.Value(actKey{}).(*actState)
	if a == nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	return &NotSent{Err: err, MaybeTaken: a.maybe}
}

// Sending is the stop check the GitHub client asks right before a request
// goes out, as the last thing before it, after any wait of the client's
// own: outside an act (Send) it is nil and answered is a no-op; within
// one, a stop waiting for the PR is a *NotSent, and nothing may be sent.
// Otherwise the request is sent, and answered is told whether GitHub's
// answer said for certain the request was refused (a 4xx: the act was not
// taken), so that a later request of the same act the check stops says
// whether anything may have been taken.
func Sending(ctx context.Context) (answered func(refused bool), err error) {
	a, _ := ctx.Value(actKey{}).(*actState)
	if a == nil {
		return func(bool) {}, nil
	}
	a.mu.Lock()
	maybe := a.maybe
	a.mu.Unlock()
	if err := a.check(); err != nil {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		return nil, &NotSent{Err: err, MaybeTaken: maybe}
	}
	a.mu.Lock()
	a.stopped = false
	a.mu.Unlock()
	return func(refused bool) {
		if !refused {
			a.mu.Lock()
			a.maybe = true
			a.mu.Unlock()
		}
	}, nil
}
