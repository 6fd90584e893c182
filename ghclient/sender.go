package ghclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/go-github/v62/github"

	"opsbot/metrics"
	"opsbot/state"
)

// Outbox is what the sender needs of the state.
type Outbox interface {
	Outbox(channel string) ([]state.Notice, error)
	BeginAttempt(id uint64) (int, error)
	NoticeSent(n *state.Notice, ref state.SentRef) error
	NoticeRetry(id uint64, next time.Time, lastErr string) error
	NoticeFailed(id uint64, reason string) error
	SentRef(id uint64) (state.SentRef, bool, error)
	Subscribe() <-chan struct{}
}

// Sender delivers the GitHub notices of the outbox: in order within a PR,
// with retries that back off, never posting a comment twice (an attempt
// after the first looks for the comment's hidden marker before posting).
type Sender struct {
	Store   Outbox
	Clients *Factory
	Log     *slog.Logger
	Metrics *metrics.Metrics
	Now     func() time.Time
	// MaxAttempts for a notice GitHub refuses (4xx); network errors, 5xx and
	// rate limits retry without end. Default 5.
	MaxAttempts int

	wake <-chan struct{}
}

// Run sends until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	if s.wake == nil {
		s.wake = s.Store.Subscribe()
	}
	for {
		next := s.Drain(ctx)
		wait := time.Minute
		if !next.IsZero() {
			wait = max(next.Sub(s.now()), 10*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func (s *Sender) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// Drain makes one pass over the outbox and returns when the earliest
// notice held back for a retry is due (zero when none is).
func (s *Sender) Drain(ctx context.Context) time.Time {
	notices, err := s.Store.Outbox(state.ChannelGitHub)
	if err != nil {
		s.Log.Error("reading the outbox", "err", err)
		return s.now().Add(5 * time.Second)
	}
	var next time.Time
	blocked := map[string]bool{}
	for i := range notices {
		n := &notices[i]
		if ctx.Err() != nil {
			return next
		}
		if blocked[n.Key()] {
			continue
		}
		if n.NextAt.After(s.now()) {
			blocked[n.Key()] = true
			if next.IsZero() || n.NextAt.Before(next) {
				next = n.NextAt
			}
			continue
		}
		if at, ok := s.sendOne(ctx, n); !ok {
			blocked[n.Key()] = true
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	return next
}

// sendOne sends a notice; ok false means it waits (at is when to retry).
func (s *Sender) sendOne(ctx context.Context, n *state.Notice) (time.Time, bool) {
	log := s.Log.With("notice", n.ID, "kind", n.Kind, "repo", n.Repo, "pr", n.PR)
	attempt, err := s.Store.BeginAttempt(n.ID)
	if err != nil {
		log.Error("recording a send attempt", "err", err)
		return s.now().Add(time.Second), false
	}
	ref, err := s.send(ctx, n, attempt)
	if err == nil {
		if err := s.Store.NoticeSent(n, ref); err != nil {
			log.Error("recording a sent notice", "err", err)
			return s.now().Add(time.Second), false
		}
		s.count("sent")
		return time.Time{}, true
	}
	if errors.Is(err, errWaiting) {
		return s.now().Add(100 * time.Millisecond), false
	}
	max := s.MaxAttempts
	if max == 0 {
		max = 5
	}
	if refused(err) && attempt >= max {
		log.Error("GitHub refused a notice; giving up on it", "err", err, "attempts", attempt)
		s.count("failed")
		if ferr := s.Store.NoticeFailed(n.ID, err.Error()); ferr != nil {
			log.Error("recording a failed notice", "err", ferr)
		}
		return time.Time{}, true
	}
	at := s.now().Add(retryDelay(attempt))
	var rl *RateLimitError
	if errors.As(err, &rl) && rl.Reset.After(at) {
		at = rl.Reset.Add(time.Second)
	}
	log.Warn("sending a notice failed; will retry", "err", err, "attempt", attempt, "at", at)
	s.count("retried")
	if rerr := s.Store.NoticeRetry(n.ID, at, err.Error()); rerr != nil {
		log.Error("recording a retry", "err", rerr)
	}
	return at, false
}

func (s *Sender) count(outcome string) {
	if s.Metrics != nil {
		s.Metrics.Notices.WithLabelValues("github", outcome).Inc()
	}
}

var errWaiting = errors.New("waiting for an earlier notice")

func (s *Sender) send(ctx context.Context, n *state.Notice, attempt int) (state.SentRef, error) {
	c, err := s.Clients.For(n.Installation)
	if err != nil {
		return state.SentRef{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	switch n.Kind {
	case state.NoticeComment:
		marker := state.Marker(n.ID)
		if attempt > 1 {
			if found, ok, err := c.FindComment(ctx, n.Repo, n.PR, marker); err != nil {
				return state.SentRef{}, err
			} else if ok {
				return state.SentRef{CommentID: found.ID, CommentURL: found.URL}, nil
			}
		}
		ref, err := c.CreateComment(ctx, n.Repo, n.PR, n.Body+"\n\n"+marker)
		return state.SentRef{CommentID: ref.ID, CommentURL: ref.URL}, err
	case state.NoticeEdit:
		target, marker := n.TargetComment, ""
		if n.EditOf != 0 {
			ref, ok, err := s.Store.SentRef(n.EditOf)
			if err != nil {
				return state.SentRef{}, err
			}
			if !ok {
				return state.SentRef{}, errWaiting
			}
			target, marker = ref.CommentID, "\n\n"+state.Marker(n.EditOf)
		}
		if target == 0 {
			return state.SentRef{}, nil // the comment was only logged (dry run)
		}
		return state.SentRef{CommentID: target}, c.EditComment(ctx, n.Repo, target, n.Body+marker)
	case state.NoticeReaction:
		return state.SentRef{}, c.React(ctx, n.Repo, n.TargetComment, n.Reaction)
	case state.NoticeStatus:
		return state.SentRef{}, c.SetStatus(ctx, n.Repo, n.SHA, n.State, n.Description, n.TargetURL, n.Context)
	case state.NoticeDispatch:
		return state.SentRef{}, c.Dispatch(ctx, n.Repo, n.EventType, n.Payload)
	}
	return state.SentRef{}, fmt.Errorf("unknown notice kind %q", n.Kind)
}

// refused reports whether GitHub answered with a client error that retrying
// will not change (a deleted comment, a validation failure).
func refused(err error) bool {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		code := er.Response.StatusCode
		return code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusUnauthorized &&
			code != http.StatusForbidden
	}
	return errors.Is(err, ErrNotFound)
}

// retryDelay is the wait before retry n: exponential from 1 s, capped at 5 minutes, with jitter.
func retryDelay(n int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Second
	b.MaxInterval = 5 * time.Minute
	d := b.NextBackOff()
	for i := 1; i < n && i < 30; i++ {
		d = b.NextBackOff()
	}
	return d
}
