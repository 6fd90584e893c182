package seq

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An act goes through Send: a stop that waits goes first and nothing is
// sent; a mark this process did not make, or sent already, is never sent;
// a fresh one is sent once, its answer handed back; a process stopping
// gets its own end back, whatever the act answered.
func TestSendSendsAnActOnceAfterTheLastStopCheck(t *testing.T) {
	var marks Marks
	sent := 0
	do := func(context.Context) error { sent++; return nil }
	ctx := context.Background()
	waiting := Wakeup{Marks: &marks, Clear: func() error { return ErrYield }}
	mark := marks.New()
	if _, err := waiting.Send(ctx, Act{Mark: mark, Do: do}); !errors.Is(err, ErrYield) || sent != 0 || !marks.Fresh(mark) {
		t.Fatalf("with a stop waiting: err %v, sent %d, mark fresh %v; want a yield, nothing sent, the mark kept", err, sent, marks.Fresh(mark))
	}
	clear := Wakeup{Marks: &marks}
	if answer, err := clear.Send(ctx, Act{Mark: mark, Do: do}); !answer.Taken() || err != nil || sent != 1 {
		t.Fatalf("a fresh mark: %v %v, sent %d", answer, err, sent)
	}
	if _, err := clear.Send(ctx, Act{Mark: mark, Do: do}); !errors.Is(err, ErrNotFresh) || sent != 1 {
		t.Fatalf("the same mark again: %v, sent %d; want ErrNotFresh, not sent", err, sent)
	}
	if _, err := clear.Send(ctx, Act{Mark: "made-before-a-restart", Do: do}); !errors.Is(err, ErrNotFresh) || sent != 1 {
		t.Fatalf("a mark this process did not make: %v, sent %d", err, sent)
	}
	if _, err := (Wakeup{}).Send(ctx, Act{Mark: marks.New(), Do: do}); !errors.Is(err, ErrNotFresh) || sent != 1 {
		t.Fatalf("a step the engine gave no marks: %v, sent %d; want ErrNotFresh, not sent", err, sent)
	}
	lost := errors.New("connection reset")
	if answer, err := clear.Send(ctx, Act{Mark: marks.New(), Do: func(context.Context) error { return lost }}); answer.Err != lost || err != nil ||
		!answer.Unclear() || answer.Shown != NotShown {
		t.Fatalf("a lost answer: %+v %v; want it handed back, nothing read", answer, err)
	}
	verified := 0
	verify := func(context.Context) (Shown, error) { verified++; return ShownTaken, nil }
	if answer, err := clear.Send(ctx, Act{Mark: marks.New(), Do: func(context.Context) error { return lost }, Verify: verify}); err != nil ||
		!answer.Taken() || verified != 1 {
		t.Fatalf("a lost answer read back: %+v %v, read %d times; want taken as shown", answer, err, verified)
	}
	if answer, err := clear.Send(ctx, Act{Mark: marks.New(), Do: func(context.Context) error { return refused{} }, Verify: verify}); err != nil ||
		answer.Taken() || answer.Unclear() || verified != 1 {
		t.Fatalf("a refusal: %+v %v, read %d times; want refused, nothing read back", answer, err, verified)
	}
	stopping, cancel := context.WithCancel(ctx)
	cancel()
	if answer, err := clear.Send(stopping, Act{Mark: marks.New(), Do: func(context.Context) error { return lost }}); answer.Err != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("a process stopping: %v %v; want its own end", answer, err)
	}
}

type refused struct{}

func (refused) Error() string  { return "422: not mergeable" }
func (refused) NotTaken() bool { return true }

// A clear refusal stands even when the step's context ended as it came:
// the act was not taken, and the step says so.
func TestSendHandsBackARefusalWhenTheContextEnded(t *testing.T) {
	var marks Marks
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	answer, err := Wakeup{Marks: &marks}.Send(ctx, Act{Mark: marks.New(), Do: func(context.Context) error { return refused{} }})
	if err != nil || answer.Err == nil || answer.Err.Error() != "422: not mergeable" {
		t.Fatalf("a refusal as the context ended: %v %v; want the refusal", answer, err)
	}
}

// The GitHub client asks Sending right before each request of an act: a
// stop stored after Send's own check stops the request; with nothing of
// the act sent (or only requests GitHub refused), the mark is this
// process's again and Send yields; after a request GitHub may have taken,
// the stopped one is an answer that does not say, the mark used up.
func TestSendingIsTheLastCheckBeforeEachRequest(t *testing.T) {
	var marks Marks
	stopped := false
	w := Wakeup{Marks: &marks, Clear: func() error {
		if stopped {
			return ErrYield
		}
		return nil
	}}
	if answered, err := Sending(context.Background()); err != nil || answered == nil {
		t.Fatalf("outside an act: %v; want nothing to check", err)
	}
	mark := marks.New()
	_, err := w.Send(context.Background(), Act{Mark: mark, Do: func(ctx context.Context) error {
		answered, err := Sending(ctx) // refused under a rate limit: the client sends it again
		if err != nil {
			return err
		}
		answered(true)
		stopped = true // a cancel stored while the client waited
		_, err = Sending(ctx)
		return err
	}})
	if !errors.Is(err, ErrYield) || !marks.Fresh(mark) {
		t.Fatalf("stopped after a refused request: %v, fresh %v; want a yield with the mark kept", err, marks.Fresh(mark))
	}
	stopped = false
	answer, err := w.Send(context.Background(), Act{Mark: mark, Do: func(ctx context.Context) error {
		answered, err := Sending(ctx)
		if err != nil {
			return err
		}
		answered(false) // a 5xx, or nothing: GitHub may have taken it
		stopped = true
		_, err = Sending(ctx)
		return err
	}})
	var ns *NotSent
	if err != nil || !errors.As(answer.Err, &ns) || !ns.MaybeTaken || marks.Fresh(mark) {
		t.Fatalf("stopped after a request GitHub may have taken: %v %v, fresh %v; want an answer that does not say, the mark used up", answer, err, marks.Fresh(mark))
	}
}

// A request GitHub answered last is GitHub's answer, even a 4xx the client
// does not type as a refusal (a 404): the mark is used up and the kind
// decides from the answer, so the act is never sent again and again.
func TestSendHandsBackWhatGitHubAnsweredLast(t *testing.T) {
	var marks Marks
	mark := marks.New()
	notFound := errors.New("404 Not Found")
	answer, err := Wakeup{Marks: &marks}.Send(context.Background(), Act{Mark: mark, Do: func(ctx context.Context) error {
		answered, err := Sending(ctx)
		if err != nil {
			return err
		}
		answered(true) // a 4xx
		return notFound
	}})
	if err != nil || answer.Err != notFound || marks.Fresh(mark) {
		t.Fatalf("a 404: %+v %v, fresh %v; want the answer handed back, the mark used up", answer, err, marks.Fresh(mark))
	}
}

// A mark made and never tried is this process's for MarkLife; older, it
// is taken as not this process's (the step reads GitHub), and it is
// dropped as marks are made, so a long-running process keeps no marks of
// sequences that ended before their act was sent.
func TestMarksNeverTriedAreDroppedAfterTheirLife(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	marks := Marks{now: func() time.Time { return now }}
	old := marks.New()
	now = now.Add(MarkLife)
	if !marks.Fresh(old) {
		t.Fatal("a mark within its life is not fresh")
	}
	now = now.Add(time.Minute)
	if marks.Fresh(old) || marks.Try(old) {
		t.Fatal("a mark past its life is still this process's")
	}
	young := marks.New()
	if _, kept := marks.made[old]; kept || !marks.Fresh(young) || len(marks.made) != 1 {
		t.Fatalf("after a new mark: %v; want the old one dropped, the new one kept", marks.made)
	}
}
