// Package ghsend delivers opsbot's GitHub notices from the outbox:
// comments (found again by their marker on a retry), edits, reactions,
// commit statuses and repository dispatches, through ghclient; it decides
// what a failure means for the notice (retry, wait for a rate limit's reset
// with the whole channel, or give up).
package ghsend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/ghclient"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Clients gives the GitHub client for a notice's installation (0: the
// token's); *ghclient.Factory has it.
type Clients interface {
	For(installationID int64) (*ghclient.Client, error)
}

// Sender delivers GitHub notices for the outbox loop: comments (never
// twice: an attempt after the first looks for the comment's hidden marker
// before posting), edits, reactions, statuses and dispatches.
type Sender struct {
	Clients Clients
	// SentRef resolves the comment an earlier comment notice posted.
	SentRef func(id uint64) (state.SentRef, bool, error)
	// Status says where an edit's target is when it has no sent record:
	// still waiting to be sent, refused for good, or gone.
	Status func(id uint64) (state.NoticeState, error)
	// MaxAttempts for a notice GitHub refuses (4xx other than 400 and 422,
	// which are given up at once); network errors, 5xx and rate limits retry
	// without end. Default 5.
	MaxAttempts int
}

// DryRun reports whether the clients only log their writes (a dry run):
// the outbox counts what this sender delivers as logged (outbox.DryRunner).
func (s *Sender) DryRun() bool {
	d, ok := s.Clients.(interface{ DryRun() bool })
	return ok && d.DryRun()
}

var (
	_ outbox.Sender   = (*Sender)(nil)
	_ outbox.Preparer = (*Sender)(nil)
)

// Retry backs off (outbox.RetryDelay), waits for a rate limit's reset (the
// primary limit's, at most ghclient.MaxPrimaryWait; or a secondary
// limit's retry-after or x-ratelimit-reset, at most
// ghclient.MaxSecondaryWait) with every notice of the same installation,
// and gives up on what GitHub refuses for good: 400 and 422 at once, a reaction to a comment that is gone at once,
// and other client errors (a 403 that is no rate limit: a locked
// conversation, an archived repository, a missing permission) after
// MaxAttempts.
func (s *Sender) Retry(err error, attempt int, now time.Time) outbox.Retry {
	tries := s.MaxAttempts
	if tries == 0 {
		tries = 5
	}
	if wait, ok := secondaryLimit(err, now); ok {
		return outbox.Retry{At: now.Add(min(max(wait, time.Second), ghclient.MaxSecondaryWait)), Global: true}
	}
	if invalid(err) || errors.Is(err, errTargetGone) || refused(err) && attempt >= tries {
		return outbox.Retry{GiveUp: true}
	}
	at := now.Add(outbox.RetryDelay(attempt))
	if reset, ok := primaryReset(err); ok && reset.After(at) {
		at = reset.Add(time.Second)
		if limit := now.Add(ghclient.MaxPrimaryWait); at.After(limit) {
			at = limit
		}
		return outbox.Retry{At: at, Global: true}
	}
	return outbox.Retry{At: at}
}

// errTargetGone marks a reaction whose comment GitHub no longer has (its
// author deleted it): it does not come back, so the reaction is given up at once.
var errTargetGone = errors.New("the comment to react to is gone")

// primaryReset reports when GitHub's primary rate limit resets, when err is one.
func primaryReset(err error) (time.Time, bool) {
	var rl *ghclient.RateLimitError
	if errors.As(err, &rl) {
		return rl.Reset, true
	}
	var grl *github.RateLimitError
	if errors.As(err, &grl) {
		return grl.Rate.Reset.Time, true
	}
	return time.Time{}, false
}

// secondaryLimit reports whether GitHub refused a request under a secondary
// rate limit (a 429; or a 403 whose message or documentation URL names a
// secondary limit, or that carries retry-after), and how long it asked to
// wait: retry-after, else until x-ratelimit-reset, else a minute (GitHub's
// advice). Any other 403 is a refusal (see refused).
func secondaryLimit(err error, now time.Time) (time.Duration, bool) {
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		if abuse.RetryAfter != nil {
			return *abuse.RetryAfter, true
		}
		return waitFrom(abuse.Response, now), true
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusTooManyRequests:
			return waitFrom(er.Response, now), true
		case http.StatusForbidden:
			if er.Response.Header.Get("Retry-After") != "" ||
				strings.Contains(strings.ToLower(er.Message), "secondary rate limit") ||
				strings.Contains(strings.ToLower(er.Message), "abuse detection") ||
				strings.HasSuffix(er.DocumentationURL, "secondary-rate-limits") ||
				strings.HasSuffix(er.DocumentationURL, "#abuse-rate-limits") {
				return waitFrom(er.Response, now), true
			}
		}
	}
	return 0, false
}

func waitFrom(resp *http.Response, now time.Time) time.Duration {
	if resp != nil {
		if v, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && v >= 0 {
			return time.Duration(v) * time.Second
		}
		if v, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			if d := time.Unix(v, 0).Sub(now); d > 0 {
				return d
			}
		}
	}
	return time.Minute
}

// Ready makes an edit wait, without an attempt, while the comment it edits
// is still in the outbox.
func (s *Sender) Ready(n *state.Notice) error {
	if n.Kind != state.NoticeEdit || n.EditOf == 0 || s.Status == nil {
		return nil
	}
	st, err := s.Status(n.EditOf)
	if err != nil {
		return err
	}
	if st == state.NoticePending {
		return outbox.ErrWaiting
	}
	return nil
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
		return postOnce(ctx, c, n, attempt)
	case state.NoticeEdit:
		target, marker := n.TargetComment, ""
		if n.EditOf != 0 {
			ref, ok, err := s.SentRef(n.EditOf)
			if err != nil {
				return state.SentRef{}, err
			}
			if !ok {
				return s.editFallback(ctx, c, n, attempt)
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
		err := c.React(ctx, n.Repo, n.TargetComment, n.Reaction)
		if errors.Is(err, ghclient.ErrNotFound) {
			err = fmt.Errorf("%w: %w", errTargetGone, err)
		}
		return state.SentRef{}, err
	case state.NoticeStatus:
		if attempt > 1 {
			if done, err := c.HasStatus(ctx, n.Repo, n.SHA, n.Context, n.State, n.Description); err != nil || done {
				return state.SentRef{}, err
			}
		}
		return state.SentRef{}, c.SetStatus(ctx, n.Repo, n.SHA, n.State, n.Description, n.TargetURL, n.Context)
	case state.NoticeCheckRun:
		// A second check run of the name after a lost answer is harmless:
		// GitHub shows the newest.
		var actions []ghclient.CheckAction
		for _, a := range n.Actions {
			actions = append(actions, ghclient.CheckAction{Label: a.Label, Description: a.Description, Identifier: a.Identifier})
		}
		return state.SentRef{}, c.CreateCheckRun(ctx, n.Repo, n.SHA, n.Context, n.State, n.Description, n.Body, n.ExternalID, actions)
	case state.NoticeDispatch:
		// A dispatch cannot be looked for after a lost answer: it carries its
		// notice id, the same on every attempt, for the receiver to deduplicate.
		payload := make(map[string]any, len(n.Payload)+1)
		maps.Copy(payload, n.Payload)
		payload["notice-id"] = strconv.FormatUint(n.ID, 10)
		return state.SentRef{}, c.Dispatch(ctx, n.Repo, n.EventType, payload)
	}
	return state.SentRef{}, fmt.Errorf("unknown notice kind %q", n.Kind)
}

// editFallback handles an edit whose comment has no sent record: while
// that comment is still to be sent the edit waits; when it was refused for
// good (it never appeared) or its record is gone, the edit's text is posted
// as a new comment, so the news (a staged URL) still reaches the PR. The new
// comment carries the edit's own marker, so a retry finds it.
func (s *Sender) editFallback(ctx context.Context, c *ghclient.Client, n *state.Notice, attempt int) (state.SentRef, error) {
	if s.Status != nil {
		st, err := s.Status(n.EditOf)
		if err != nil {
			return state.SentRef{}, err
		}
		if st == state.NoticePending {
			return state.SentRef{}, outbox.ErrWaiting
		}
	}
	return postOnce(ctx, c, n, attempt)
}

// postOnce posts n as a new PR comment carrying its hidden marker; a retry
// (attempt > 1) first looks for the comment an earlier attempt may have
// posted, among opsbot's own, so a lost answer never posts it twice.
func postOnce(ctx context.Context, c *ghclient.Client, n *state.Notice, attempt int) (state.SentRef, error) {
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
}

// refused reports whether GitHub answered with a client error that retrying
// will not change (a deleted comment, a validation failure).
func refused(err error) bool {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		code := er.Response.StatusCode
		// A 403 that reaches here is no rate limit (Retry checks those first).
		return code >= 400 && code < 500 && code != http.StatusTooManyRequests && code != http.StatusUnauthorized
	}
	return errors.Is(err, ghclient.ErrNotFound)
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
