package state

import (
	"errors"
	"testing"
	"time"
)

func grantTest(t *testing.T, s *Store, run int64) *Pin {
	t.Helper()
	p := &Pin{Repo: "o/r", PR: 1, RunID: run, PRHeadAtGrant: "c1", ActorID: 7, ActorLogin: "maintainer", Role: "maintain"}
	if err := s.Update(func(tx *Tx) error {
		_, err := tx.Grant(p, PinChange{ActorID: 7, ActorLogin: "maintainer", OriginRef: OriginRef{CommentID: 70}})
		return err
	}); err != nil {
		t.Fatalf("granting a pin of run %d: %v", run, err)
	}
	return p
}

func transition(s *Store, p *Pin, to PinState) error {
	cp := *p
	return s.Update(func(tx *Tx) error {
		q := cp // the write may run twice: start from the caller's copy each time
		return tx.Transition(&q, to, PinChange{Reason: "test", HeadSHA: "c2"})
	})
}

func TestTransitionFromActiveOnly(t *testing.T) {
	now := func() time.Time { return time.Unix(1700000000, 0) }
	for _, to := range []PinState{PinConsumed, PinSuperseded, PinRevoked, PinInvalid, PinExpired} {
		t.Run(string(to), func(t *testing.T) {
			s := openTest(t, now)
			p := grantTest(t, s, 10)
			if err := transition(s, p, to); err != nil {
				t.Fatalf("active -> %s: %v", to, err)
			}
			pins, err := s.Pins("o/r", 1)
			if err != nil || len(pins) != 1 {
				t.Fatalf("Pins = %v, %v; want one pin", pins, err)
			}
			if got := pins[0]; got.State != to || got.ClosedReason != "test" || !got.ClosedAt.Equal(now()) {
				t.Fatalf("stored pin = %+v, want %s closed at %v for \"test\"", got, to, now())
			}
			if to == PinConsumed && pins[0].ConsumedBy != "c2" {
				t.Fatalf("ConsumedBy = %q, want c2", pins[0].ConsumedBy)
			}
			if a, err := s.ActivePin("o/r", 1); err != nil || a != nil {
				t.Fatalf("ActivePin after %s = %v, %v; want none", to, a, err)
			}
			// Out of active, a pin never moves again: a consumed pin cannot
			// be revoked, an expired one cannot be consumed.
			for _, again := range []PinState{PinConsumed, PinSuperseded, PinRevoked, PinInvalid, PinExpired} {
				if err := transition(s, p, again); !errors.Is(err, ErrPinNotActive) {
					t.Errorf("%s -> %s: err = %v, want ErrPinNotActive", to, again, err)
				}
			}
			if pins, _ := s.Pins("o/r", 1); pins[0].State != to {
				t.Fatalf("a refused transition changed the pin to %s", pins[0].State)
			}
		})
	}
}

func TestTransitionRefusesNonClosedStates(t *testing.T) {
	s := openTest(t, nil)
	p := grantTest(t, s, 10)
	for _, to := range []PinState{PinActive, "", "paused", "Consumed"} {
		if err := transition(s, p, to); !errors.Is(err, ErrPinTransition) {
			t.Errorf("active -> %q: err = %v, want ErrPinTransition", to, err)
		}
	}
	if a, err := s.ActivePin("o/r", 1); err != nil || a == nil || a.ID != p.ID {
		t.Fatalf("ActivePin = %v, %v; want pin %d still active", a, err, p.ID)
	}
}

func TestTransitionRefusesAPinThatIsNoLongerTheActiveOne(t *testing.T) {
	s := openTest(t, nil)
	old := grantTest(t, s, 10)
	grantTest(t, s, 11) // supersedes old
	if err := transition(s, old, PinRevoked); !errors.Is(err, ErrPinNotActive) {
		t.Fatalf("revoking a superseded pin: err = %v, want ErrPinNotActive", err)
	}
	never := &Pin{Repo: "o/r", PR: 2, ID: 99}
	if err := transition(s, never, PinExpired); !errors.Is(err, ErrPinNotActive) {
		t.Fatalf("a pin never stored: err = %v, want ErrPinNotActive", err)
	}
}

func TestGrantSupersedesAndAuditsEachChange(t *testing.T) {
	s := openTest(t, nil)
	first := grantTest(t, s, 10)
	second := grantTest(t, s, 11)
	if err := transition(s, second, PinRevoked); err != nil {
		t.Fatal(err)
	}
	pins, err := s.Pins("o/r", 1)
	if err != nil || len(pins) != 2 {
		t.Fatalf("Pins = %v, %v; want two", pins, err)
	}
	if got := pins[0]; got.State != PinSuperseded || got.SupersededBy != second.ID || got.ID != first.ID {
		t.Fatalf("first pin = %+v, want superseded by %d", got, second.ID)
	}
	recs, _, err := s.Audit(AuditQuery{Kind: "pin"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		outcome string
		pin     uint64
		head    string
		role    string
	}
	var got []row
	for _, r := range recs {
		got = append(got, row{r.Outcome, r.PinID, r.HeadSHA, r.Role})
	}
	want := []row{{"active", first.ID, "c1", "maintain"}, {"superseded", first.ID, "", ""}, {"active", second.ID, "c1", "maintain"},
		{"revoked", second.ID, "c2", ""}}
	if len(got) != len(want) {
		t.Fatalf("pin audit = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pin audit[%d] = %+v, want %+v (all: %+v)", i, got[i], want[i], got)
		}
	}
}

// ExpireRepoPins expires every active pin of one repository (every PR,
// audited with the reason) and nothing of a repository whose name it
// prefixes; ReposWithActivePins finds the repositories that hold one.
func TestExpireRepoPins(t *testing.T) {
	s := openTest(t, nil)
	grant := func(repo string, pr int, run int64) {
		t.Helper()
		if err := s.Update(func(tx *Tx) error {
			_, err := tx.Grant(&Pin{Repo: repo, PR: pr, RunID: run, ActorID: 7, ActorLogin: "maintainer"}, PinChange{ActorID: 7})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	grant("O/R", 1, 10)
	grant("O/R", 2, 20)
	grant("o/r2", 1, 30)
	repos, err := s.ReposWithActivePins()
	if err != nil || len(repos) != 2 || repos[0] != "o/r" || repos[1] != "o/r2" {
		t.Fatalf("ReposWithActivePins = %q, %v; want [o/r o/r2]", repos, err)
	}
	pins, err := s.ExpireRepoPins("o/r", "removed")
	if err != nil || len(pins) != 2 || pins[0].State != PinExpired || pins[1].State != PinExpired {
		t.Fatalf("ExpireRepoPins = %+v, %v; want both o/r pins expired", pins, err)
	}
	for pr := 1; pr <= 2; pr++ {
		if p, err := s.ActivePin("o/r", pr); err != nil || p != nil {
			t.Fatalf("o/r#%d still has %+v, %v", pr, p, err)
		}
	}
	if p, err := s.ActivePin("o/r2", 1); err != nil || p == nil {
		t.Fatalf("o/r2#1 lost its pin: %+v, %v", p, err)
	}
	recs, _, err := s.Audit(AuditQuery{Repo: "o/r"})
	if err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, r := range recs {
		if r.Kind == "pin" && r.Outcome == string(PinExpired) && r.Reason == "removed" {
			expired++
		}
	}
	if expired != 2 {
		t.Fatalf("audited %d expiries, want 2: %+v", expired, recs)
	}
	if pins, err := s.ExpireRepoPins("o/r", "again"); err != nil || len(pins) != 0 {
		t.Fatalf("expiring again = %+v, %v; want nothing", pins, err)
	}
	if repos, err := s.ReposWithActivePins(); err != nil || len(repos) != 1 || repos[0] != "o/r2" {
		t.Fatalf("ReposWithActivePins after = %q, %v", repos, err)
	}
}
