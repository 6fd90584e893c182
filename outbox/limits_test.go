package outbox_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/state"
)

func enqueueInst(t *testing.T, st *state.Store, inst int64, repo string, pr int, kind state.NoticeKind, body string) uint64 {
	t.Helper()
	var id uint64
	if err := st.Update(func(tx *state.Tx) error {
		n := &state.Notice{Channel: state.ChannelGitHub, Kind: kind, Repo: repo, PR: pr, Installation: inst, SHA: body, Body: body}
		err := tx.Enqueue(n)
		id = n.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func pendingNextAt(t *testing.T, st *state.Store, body string) time.Time {
	t.Helper()
	ns, err := st.Outbox(state.ChannelGitHub)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Body == body {
			return n.NextAt
		}
	}
	t.Fatalf("%s is not in the outbox", body)
	return time.Time{}
}

// A rate limit of one installation that asks for ten years holds only that
// installation's notices, and only for MaxWait: another installation's go
// out at once; the retry time stored is capped, and one stored uncapped by
// an earlier run is capped when a new loop reads it, so a restart does not
// wedge the PR's status lane.
func TestFarFutureLimitHoldsOnlyItsInstallationAndIsCappedAcrossRestarts(t *testing.T) {
	s := &sender{plan: map[string][]error{"s1": {errDown}}}
	st, l, c := setup(t, s)
	l.Parallel = 1
	pace := func() *outbox.Pace {
		return &outbox.Pace{Limits: []outbox.Limit{{N: 80, Per: time.Minute}, {N: 500, Per: time.Hour}}}
	}
	l.Pace = pace()
	s.retry = func(error, int, time.Time) outbox.Retry {
		return outbox.Retry{At: c.Now().Add(10 * 365 * 24 * time.Hour), Global: true}
	}
	enqueueInst(t, st, 1, "evil/r", 1, state.NoticeStatus, "s1")
	enqueueInst(t, st, 2, "good/r", 7, state.NoticeStatus, "g1")
	l.Drain(t.Context())
	if got := s.Sent(); !slices.Equal(got, []string{"g1"}) {
		t.Fatalf("sent %v, want installation 2's status while installation 1 waits", got)
	}
	if at := pendingNextAt(t, st, "s1"); at.Sub(c.Now()) > outbox.DefaultMaxWait {
		t.Fatalf("s1 stored to retry in %v, want at most %v", at.Sub(c.Now()), outbox.DefaultMaxWait)
	}
	enqueueInst(t, st, 2, "good/r", 7, state.NoticeStatus, "g2")
	l.Drain(t.Context())
	if got := s.Sent(); !slices.Equal(got, []string{"g1", "g2"}) {
		t.Fatalf("sent %v, want installation 2 to keep sending", got)
	}

	// An earlier run stored a retry ten years away; a new loop caps it.
	id := enqueueInst(t, st, 1, "evil/r", 2, state.NoticeStatus, "s2")
	if err := st.NoticeRetry(id, c.Now().Add(10*365*24*time.Hour), "403 secondary rate limit"); err != nil {
		t.Fatal(err)
	}
	l2 := &outbox.Loop{Store: st, Channel: state.ChannelGitHub, Sender: s, Now: c.Now, Pace: pace(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	l2.Drain(t.Context())
	if at := pendingNextAt(t, st, "s2"); at.Sub(c.Now()) > outbox.DefaultMaxWait {
		t.Fatalf("the stored retry of s2 is %v away after a restart, want at most %v", at.Sub(c.Now()), outbox.DefaultMaxWait)
	}
	c.Add(outbox.DefaultMaxWait)
	drainNow(t, l2, c)
	if got := s.Sent(); !slices.Contains(got, "s1") || !slices.Contains(got, "s2") {
		t.Fatalf("an hour later sent %v, want installation 1's statuses asked again", got)
	}
}

// A channel-wide pause (Wide: a bad token) holds every scope.
func TestWidePauseHoldsEveryScope(t *testing.T) {
	s := &sender{plan: map[string][]error{"s1": {errDown}}}
	st, l, c := setup(t, s)
	l.Parallel = 1
	l.Pace = &outbox.Pace{Limits: []outbox.Limit{{N: 80, Per: time.Minute}}}
	s.retry = func(error, int, time.Time) outbox.Retry {
		return outbox.Retry{At: c.Now().Add(5 * time.Minute), Global: true, Wide: true}
	}
	enqueueInst(t, st, 1, "a/r", 1, state.NoticeStatus, "s1")
	enqueueInst(t, st, 2, "b/r", 7, state.NoticeStatus, "g1")
	if next := l.Drain(t.Context()); !next.Equal(c.Now().Add(5 * time.Minute)) {
		t.Fatalf("next pass at %v, want the end of the channel's pause", next)
	}
	if got := s.Sent(); len(got) != 0 {
		t.Fatalf("sent %v during a channel-wide pause", got)
	}
}

// With more PRs ready than a window allows, every PR gets its turn within
// minutes: the round robin resumes after the last lane given a send, not
// one lane after where the last pass started.
func TestPaceServesLateSortingLanesWithinMinutes(t *testing.T) {
	s := &sender{}
	st, l, c := setup(t, s)
	l.Pace = &outbox.Pace{Limits: []outbox.Limit{{N: 80, Per: time.Minute}, {N: 500, Per: time.Hour}}}
	if err := st.Update(func(tx *state.Tx) error {
		for pr := 100; pr < 200; pr++ {
			for i := range 20 {
				if err := tx.Enqueue(&state.Notice{Channel: state.ChannelGitHub, Kind: state.NoticeComment, Repo: "o/r", PR: pr,
					Body: fmt.Sprintf("c%d-%d", pr, i)}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start := c.Now()
	enqueue(t, st, 99, "skip comment") // "o/r#99" sorts after "o/r#199"
	for c.Now().Sub(start) < 3*time.Hour && !slices.Contains(s.Sent(), "skip comment") {
		drainNow(t, l, c)
		c.Add(time.Minute)
	}
	if took := c.Now().Sub(start); took > 5*time.Minute {
		t.Fatalf("PR 99's comment went out after %v (send %d of %d), want within minutes: 101 PRs, 64 sends a minute",
			took, slices.Index(s.Sent(), "skip comment")+1, len(s.Sent()))
	}
}

// A flood of reactions on a PR does not hold back its decision comment
// (reactions have a lane of their own, still in order among themselves),
// and a backlog deeper than MaxReactions loses its oldest reactions, kept
// among the failed notices and audited.
func TestReactionFloodNeitherDelaysTheCommentNorGrowsWithoutBound(t *testing.T) {
	s := &sender{}
	st, l, c := setup(t, s)
	l.Pace = &outbox.Pace{Limits: []outbox.Limit{{N: 80, Per: time.Minute}, {N: 500, Per: time.Hour}}}
	if err := st.Update(func(tx *state.Tx) error {
		for i := range 1000 {
			if err := tx.Enqueue(&state.Notice{Channel: state.ChannelGitHub, Kind: state.NoticeReaction, Repo: "o/r", PR: 1,
				Body: fmt.Sprintf("r%03d", i), Reaction: "-1", TargetComment: int64(i + 1)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, st, 1, "skip comment")
	drainNow(t, l, c)
	if !slices.Contains(s.Sent(), "skip comment") {
		t.Fatalf("the skip comment waited behind the reactions: sent %v", s.Sent())
	}
	failed, err := st.FailedNotices()
	if err != nil || len(failed) != 1000-outbox.DefaultMaxReactions {
		t.Fatalf("%d reactions dropped (%v), want %d", len(failed), err, 1000-outbox.DefaultMaxReactions)
	}
	if !strings.HasPrefix(failed[0].LastError, "dropped") || failed[0].Body != "r000" {
		t.Fatalf("first dropped = %+v, want the oldest reaction, with the reason", failed[0])
	}
	recs, _, err := st.Audit(state.AuditQuery{Repo: "o/r", PR: 1, Kind: "notice", Limit: 10000})
	if err != nil || len(recs) != 1000-outbox.DefaultMaxReactions || recs[0].Outcome != "dropped" {
		t.Fatalf("audit = %d records (%v), want one per dropped reaction", len(recs), err)
	}
	for range 10 {
		c.Add(time.Minute)
		drainNow(t, l, c)
	}
	var reactions []string
	for _, b := range s.Sent() {
		if strings.HasPrefix(b, "r") {
			reactions = append(reactions, b)
		}
	}
	if len(reactions) != outbox.DefaultMaxReactions || reactions[0] != "r950" || !slices.IsSorted(reactions) {
		t.Fatalf("reactions sent %v, want the newest %d in order", reactions, outbox.DefaultMaxReactions)
	}
}

// A wait for an earlier notice is forgotten when the waiting notice leaves
// the outbox another way (given up, dropped): the loop's memory does not grow.
func TestWaitsAreForgottenWhenTheNoticeGoes(t *testing.T) {
	s := &waiter{}
	st, l, c := setup(t, &s.sender)
	l.Sender = s
	enqueue(t, st, 1, "wait")
	l.Drain(t.Context())
	if n := l.Waiting(); n != 1 {
		t.Fatalf("%d waits held, want 1", n)
	}
	ns, _ := st.Outbox(state.ChannelGitHub)
	if err := st.NoticeFailed(ns[0].ID, "given up by hand"); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	l.Drain(t.Context())
	if n := l.Waiting(); n != 0 {
		t.Fatalf("%d waits held after the notice left the outbox, want 0", n)
	}
}
