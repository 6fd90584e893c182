// Package slacksend posts opsbot's Slack notices from the outbox with
// slack-go: Block Kit messages with their links, each reply in its PR's
// thread once the thread's parent is posted, retries that honour
// Retry-After, and the health of the token and channel for /readyz.
package slacksend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/outbox"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// Slack is what the sender calls; *slack.Client has it.
type Slack interface {
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	AuthTestContext(ctx context.Context) (*slack.AuthTestResponse, error)
}

// NewClient makes a slack-go client for apiURL (Slack's, or a test server's).
func NewClient(token auth.Secret, apiURL string) *slack.Client {
	return slack.New(token.Reveal(), slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(&http.Client{Timeout: 30 * time.Second}))
}

// Sender posts Slack notices for the outbox loop. Without a client it only
// logs them (dry-run).
type Sender struct {
	Client Slack // nil: dry-run
	// APIURL is slack.api_url: a click's response_url on its host is
	// Slack's too (ResponseHostOK).
	APIURL string
	Log    *slog.Logger
	// PRInfo gives a PR's thread (the parent message's ts).
	PRInfo func(repo string, pr int) (*state.PRInfo, error)

	mu       sync.Mutex
	healthy  bool
	problem  string
	observed bool
}

var (
	_ outbox.Sender   = (*Sender)(nil)
	_ outbox.Preparer = (*Sender)(nil)
)

// Ready makes a thread reply wait, without an attempt, while the thread's
// parent message is still to be posted.
func (s *Sender) Ready(n *state.Notice) error {
	if n.Slack == nil || n.Slack.Parent {
		return nil
	}
	info, err := s.PRInfo(n.Repo, n.PR)
	if err != nil {
		return err
	}
	if info != nil && info.SlackTS == "" && info.SlackParentQueued {
		return outbox.ErrWaiting
	}
	return nil
}

// Check calls auth.test: a bad token is logged and shown on /readyz, and
// GitHub-side work goes on.
func (s *Sender) Check(ctx context.Context) error {
	if s.Client == nil {
		return nil
	}
	resp, err := s.Client.AuthTestContext(ctx)
	if err != nil {
		s.setHealth(false, "auth.test failed: "+err.Error())
		return fmt.Errorf("slack auth.test: %w", err)
	}
	s.setHealth(true, "")
	s.Log.Info("slack token works", "team", resp.Team, "user", resp.User)
	return nil
}

// Health reports whether Slack works, and if not, why.
func (s *Sender) Health() (ok bool, problem string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.observed {
		return true, ""
	}
	return s.healthy, s.problem
}

func (s *Sender) setHealth(ok bool, problem string) {
	s.mu.Lock()
	s.healthy, s.problem, s.observed = ok, problem, true
	s.mu.Unlock()
}

// Send posts one message: a thread parent, or a reply in the PR's thread.
func (s *Sender) Send(ctx context.Context, n *state.Notice, attempt int) (state.SentRef, error) {
	m := n.Slack
	if m == nil {
		return state.SentRef{}, errors.New("slack notice without a message")
	}
	var thread string
	if !m.Parent && m.ResponseURL == "" {
		info, err := s.PRInfo(n.Repo, n.PR)
		if err != nil {
			return state.SentRef{}, err
		}
		if info != nil {
			thread = info.SlackTS
		}
		if thread == "" && info != nil && info.SlackParentQueued {
			return state.SentRef{}, outbox.ErrWaiting
		}
	}
	if m.ResponseURL != "" {
		return state.SentRef{}, s.respond(ctx, m)
	}
	if s.Client == nil {
		s.Log.Info("slack dry-run: would post", "channel", m.Channel, "thread", thread, "text", m.Text, "links", m.Context)
		return state.SentRef{SlackTS: fmt.Sprintf("dry-run-%d", n.ID)}, nil
	}
	opts := []slack.MsgOption{slack.MsgOptionBlocks(Blocks(m)...), slack.MsgOptionText(fallback(m.Text), false),
		slack.MsgOptionDisableLinkUnfurl()}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
		if m.Broadcast {
			opts = append(opts, slack.MsgOptionBroadcast())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, ts, err := s.Client.PostMessageContext(ctx, m.Channel, opts...)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) || isConfigError(err) {
			s.setHealth(false, "posting to "+m.Channel+": "+err.Error())
		}
		return state.SentRef{}, err
	}
	s.setHealth(true, "")
	return state.SentRef{SlackTS: ts}, nil
}

// Blocks are the Block Kit blocks of a message: the text, its links, then
// its buttons.
func Blocks(m *state.SlackMessage) []slack.Block {
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clip(m.Text, 2900), false, true), nil, nil)}
	if m.Context != "" {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, clip(m.Context, 2900), false, true)))
	}
	if len(m.Buttons) > 0 {
		var els []slack.BlockElement
		for _, b := range m.Buttons {
			btn := slack.NewButtonBlockElement(b.ActionID, b.Value, slack.NewTextBlockObject(slack.PlainTextType, clip(b.Text, 75), false, false))
			if b.Style != "" {
				btn.Style = slack.Style(b.Style)
			}
			els = append(els, btn)
		}
		blocks = append(blocks, slack.NewActionBlock("opsbot-actions", els...))
	}
	return blocks
}

// ResponseHostOK reports whether a click's response_url may be posted to:
// https on Slack's own hosts (slack.com and its subdomains), or the host
// of slack.api_url (a Slack-compatible server opsbot is configured for).
func ResponseHostOK(raw, apiURL string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if u.Scheme == "https" && (host == "slack.com" || strings.HasSuffix(host, ".slack.com")) {
		return true
	}
	api, err := url.Parse(apiURL)
	return err == nil && api.Host != "" && strings.EqualFold(api.Host, u.Host) && u.Scheme == api.Scheme
}

// respond posts an answer to a click to its response_url, shown only to
// the one who clicked.
func (s *Sender) respond(ctx context.Context, m *state.SlackMessage) error {
	if !ResponseHostOK(m.ResponseURL, s.APIURL) {
		return &answerError{fmt.Errorf("a click's response_url is not Slack's: %q", m.ResponseURL), true}
	}
	if s.Client == nil {
		s.Log.Info("slack dry-run: would answer a click", "text", m.Text)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := slack.PostWebhookCustomHTTPContext(ctx, m.ResponseURL, &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		&slack.WebhookMessage{Text: m.Text, ResponseType: "ephemeral"})
	if err != nil {
		return &answerError{err, false}
	}
	return nil
}

// answerError is a click's answer that failed: a response_url that is not
// Slack's is never tried, and one that keeps failing is given up after a
// few attempts (Slack keeps a response_url for 30 minutes only).
type answerError struct {
	error
	never bool
}

func (e *answerError) Unwrap() error { return e.error }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func fallback(s string) string { return clip(s, 300) }

// MaxRetryAfter caps the Retry-After Slack asks for: a longer one is waited
// to the cap, then the message is tried again.
const MaxRetryAfter = 15 * time.Minute

// Retry honours Slack's Retry-After (at most MaxRetryAfter) for the whole
// channel, backs off on 5xx and network errors, and keeps retrying (slowly)
// when the token or channel is wrong, so a fixed configuration delivers
// everything: a token error holds every message, a channel error (missing,
// archived, opsbot not in it) only that Slack channel's (Scope).
func (s *Sender) Retry(err error, attempt int, now time.Time) outbox.Retry {
	var ae *answerError
	if errors.As(err, &ae) {
		// A click's answer: its own, never the channel's (Slack keeps a
		// response_url for 30 minutes; a failure there says nothing of Slack).
		if ae.never || attempt >= 3 {
			return outbox.Retry{GiveUp: true}
		}
		return outbox.Retry{At: now.Add(outbox.RetryDelay(attempt))}
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return outbox.Retry{At: now.Add(min(max(rl.RetryAfter, time.Second), MaxRetryAfter)), Global: true, Wide: true}
	}
	if channelError(err) {
		s.Log.Error("slack refuses opsbot's messages to a channel: check slack.channel, repos[].slack_channel and that opsbot is in it", "err", err)
		return outbox.Retry{At: now.Add(5 * time.Minute), Global: true}
	}
	if isConfigError(err) {
		s.Log.Error("slack refuses opsbot's messages: check slack.token_env", "err", err)
		return outbox.Retry{At: now.Add(5 * time.Minute), Global: true, Wide: true}
	}
	s.setHealth(false, "slack unreachable: "+err.Error())
	return outbox.Retry{At: now.Add(outbox.RetryDelay(attempt))}
}

// DryRun reports whether the sender only logs (no Slack token): the
// outbox counts what it delivers as logged (outbox.DryRunner).
func (s *Sender) DryRun() bool { return s.Client == nil }

// Scope is the pause scope of a Slack notice (outbox.Loop.Scope): its
// channel, so a channel error holds only that channel's messages.
func Scope(n *state.Notice) string {
	if n.Slack == nil {
		return ""
	}
	return n.Slack.Channel
}

// channelError reports whether Slack refused a message for its channel.
func channelError(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "channel_not_found", "not_in_channel", "is_archived":
		return true
	}
	return false
}

func isConfigError(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "channel_not_found", "not_in_channel", "is_archived", "missing_scope":
		return true
	}
	return false
}
