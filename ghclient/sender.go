package ghclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/go-github/v62/github"

	"opsbot/outbox"
	"opsbot/state"
)

// Sender delivers GitHub notices for the outbox loop: comments (never
// twice: an attempt after the first looks for the comment's hidden marker
// before posting), edits, reactions, statuses and dispatches.
type Sender struct {
	Clients *Factory
	// SentRef resolves the comment an earlier comment notice posted.
	SentRef func(id uint64) (state.SentRef, bool, error)
	// MaxAttempts for a notice GitHub refuses (4xx other than 400 and 422,
	// which are given up at once); network errors, 5xx and rate limits retry
	// without end. Default 5.
	MaxAttempts int
}

var _ outbox.Sender = (*Sender)(nil)

// Retry backs off exponentially (capped at 5 minutes), waits for a rate
// limit's reset, and gives up on what GitHub refuses for good.
func (s *Sender) Retry(err error, attempt int, now time.Time) outbox.Retry {
	max := s.MaxAttempts
	if max == 0 {
		max = 5
	}
	if invalid(err) || refused(err) && attempt >= max {
		return outbox.Retry{GiveUp: true}
	}
	at := now.Add(retryDelay(attempt))
	var rl *RateLimitError
	if errors.As(err, &rl) && rl.Reset.After(at) {
		return outbox.Retry{At: rl.Reset.Add(time.Second), Global: true}
	}
	return outbox.Retry{At: at}
}

// Send delivers one notice.
func (s *Sender) Send(ctx context.Context, n *state.Notice, attempt int) (state.SentRef, error) {
	c, err := s.Clients.For(n.Installation)
	if err != nil {
		return state.SentRef{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	switch n.Kind {
	case state.NoticeComment:
		marker := n.Marker()
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
			ref, ok, err := s.SentRef(n.EditOf)
			if err != nil {
				return state.SentRef{}, err
			}
			if !ok {
				return state.SentRef{}, outbox.ErrWaiting
			}
			target, marker = ref.CommentID, "\n\n"+ref.Marker
			if ref.Marker == "" { // sent before markers had nonces
				marker = "\n\n" + state.Marker(n.EditOf, "")
			}
		}
		if target == 0 {
			return state.SentRef{}, nil // the comment was only logged (dry run)
		}
		return state.SentRef{CommentID: target}, c.EditComment(ctx, n.Repo, target, n.Body+marker)
	case state.NoticeReaction:
		return state.SentRef{}, c.React(ctx, n.Repo, n.TargetComment, n.Reaction)
	case state.NoticeStatus:
		if attempt > 1 {
			if done, err := c.HasStatus(ctx, n.Repo, n.SHA, n.Context, n.State, n.Description); err != nil || done {
				return state.SentRef{}, err
			}
		}
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

// invalid reports whether GitHub found the request itself wrong (400, 422:
// a validation failure); the same request is refused again, so it is not
// retried. Other client errors (a 404 while a new comment replicates, a 409)
// are retried up to MaxAttempts.
func invalid(err error) bool {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		code := er.Response.StatusCode
		return code == http.StatusBadRequest || code == http.StatusUnprocessableEntity
	}
	return false
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
