package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
)

// becomeReady asks GitHub until it answers, then begins; a begin that
// fails is tried again without asking who opsbot is again; the readiness
// says why until both succeed; waits grow; a cancelled context ends it.
func TestBecomeReady(t *testing.T) {
	down := errors.New("GET /user: 503 Service Unavailable")
	cases := []struct {
		name       string
		learnFails int // tries of learn that fail before one succeeds (-1: every one)
		beginFails int
		wantLearns int
		wantBegins int
		wantReady  bool
		wantWhy    string // the readiness seen at the last wait
	}{
		{name: "GitHub answers at once", wantLearns: 1, wantBegins: 1, wantReady: true},
		{name: "GitHub down for three tries", learnFails: 3, wantLearns: 4, wantBegins: 1, wantReady: true,
			wantWhy: "cannot learn opsbot's own GitHub account (try 3 failed, next in"},
		{name: "begin fails once: who opsbot is is not asked again", beginFails: 1, wantLearns: 1, wantBegins: 2, wantReady: true,
			wantWhy: "cannot start processing (try 1 failed"},
		{name: "GitHub never answers, until stopped", learnFails: -1, wantLearns: 5, wantReady: false,
			wantWhy: "cannot learn opsbot's own GitHub account (try 5 failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var r readiness
			r.set("learning")
			learns, begins := 0, 0
			var waits []time.Duration
			var why string
			wait := func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				why = r.notReady()
				if c.learnFails < 0 && len(waits) == 5 {
					cancel() // stopped while GitHub is down
					return ctx.Err()
				}
				return nil
			}
			learn := func(context.Context) (ghclient.Identity, error) {
				learns++
				if c.learnFails < 0 || learns <= c.learnFails {
					return ghclient.Identity{}, down
				}
				return ghclient.Identity{Login: "opsbot[bot]", ID: 1}, nil
			}
			begin := func(id ghclient.Identity) error {
				begins++
				if id.ID != 1 {
					t.Fatalf("begin with %+v", id)
				}
				if begins <= c.beginFails {
					return errors.New("reading the stored allow_users accounts: disk on fire")
				}
				return nil
			}
			becomeReady(ctx, &r, selfBackoff(), wait, slog.New(slog.DiscardHandler), learn, begin)
			if learns != c.wantLearns || begins != c.wantBegins {
				t.Fatalf("learned %d times, began %d; want %d and %d", learns, begins, c.wantLearns, c.wantBegins)
			}
			if got := r.notReady() == ""; got != c.wantReady {
				t.Fatalf("ready = %v (%q), want %v", got, r.notReady(), c.wantReady)
			}
			if c.wantWhy != "" && !strings.Contains(why, c.wantWhy) {
				t.Fatalf("readiness while waiting = %q, want it to say %q", why, c.wantWhy)
			}
			for i := 1; i < len(waits); i++ {
				if waits[i] <= waits[i-1]/2 {
					t.Fatalf("waits %v do not grow", waits)
				}
			}
			if len(waits) > 0 && (waits[0] < 500*time.Millisecond || waits[0] > 1500*time.Millisecond) {
				t.Fatalf("first wait %s, want about 1 s", waits[0])
			}
		})
	}
}
