package seq

import (
	"context"
	"errors"
	"testing"
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
	waiting := Wakeup{Clear: func() error { return ErrYield }}
	mark := marks.New()
	if _, err := waiting.Send(ctx, &marks, mark, do); !errors.Is(err, ErrYield) || sent != 0 || !marks.Fresh(mark) {
		t.Fatalf("with a stop waiting: err %v, sent %d, mark fresh %v; want a yield, nothing sent, the mark kept", err, sent, marks.Fresh(mark))
	}
	clear := Wakeup{}
	if answer, err := clear.Send(ctx, &marks, mark, do); answer != nil || err != nil || sent != 1 {
		t.Fatalf("a fresh mark: %v %v, sent %d", answer, err, sent)
	}
	if _, err := clear.Send(ctx, &marks, mark, do); !errors.Is(err, ErrNotFresh) || sent != 1 {
		t.Fatalf("the same mark again: %v, sent %d; want ErrNotFresh, not sent", err, sent)
	}
	if _, err := clear.Send(ctx, &marks, "made-before-a-restart", do); !errors.Is(err, ErrNotFresh) || sent != 1 {
		t.Fatalf("a mark this process did not make: %v, sent %d", err, sent)
	}
	lost := errors.New("connection reset")
	if answer, err := clear.Send(ctx, &marks, marks.New(), func(context.Context) error { return lost }); answer != lost || err != nil {
		t.Fatalf("a lost answer: %v %v; want it handed back", answer, err)
	}
	stopping, cancel := context.WithCancel(ctx)
	cancel()
	if answer, err := clear.Send(stopping, &marks, marks.New(), func(context.Context) error { return lost }); answer != nil || !errors.Is(err, context.Canceled) {
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
	answer, err := Wakeup{}.Send(ctx, &marks, marks.New(), func(context.Context) error { return refused{} })
	if err != nil || answer == nil || answer.Error() != "422: not mergeable" {
		t.Fatalf("a refusal as the context ended: %v %v; want the refusal", answer, err)
	}
}
