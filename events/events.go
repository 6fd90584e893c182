// Package events turns a stored webhook delivery into what it means for
// opsbot: commands from PR comments, gate decisions from pushes, pin
// expiry from closed PRs, and stage callbacks from repository dispatches.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/go-github/v62/github"

	"opsbot/config"
	"opsbot/state"
	"opsbot/worker"
)

// Handler routes deliveries. It implements worker.Handler.
type Handler struct {
	cfg *config.Config
	log *slog.Logger
}

// New makes a Handler.
func New(cfg *config.Config, log *slog.Logger) *Handler {
	return &Handler{cfg: cfg, log: log}
}

var _ worker.Handler = (*Handler)(nil)

// Handle decodes the delivery and hands it to the part of opsbot it concerns.
func (h *Handler) Handle(ctx context.Context, d *state.Delivery) (string, state.Write, error) {
	switch d.Event {
	case "issue_comment":
		var ev github.IssueCommentEvent
		if err := decode(d, &ev); err != nil {
			return "", nil, err
		}
		return "comment-" + ev.GetAction(), nil, nil
	case "pull_request":
		var ev github.PullRequestEvent
		if err := decode(d, &ev); err != nil {
			return "", nil, err
		}
		return "pull_request-" + ev.GetAction(), nil, nil
	case "repository_dispatch":
		var ev github.RepositoryDispatchEvent
		if err := decode(d, &ev); err != nil {
			return "", nil, err
		}
		return "dispatch-" + ev.GetAction(), nil, nil
	}
	return "ignored", nil, nil
}

func decode(d *state.Delivery, v any) error {
	if err := json.Unmarshal(d.Body, v); err != nil {
		return worker.Permanent(fmt.Errorf("decoding the %s payload: %w", d.Event, err))
	}
	return nil
}
