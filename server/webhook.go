package server

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"opsbot/auth"
	"opsbot/commands"
	"opsbot/metrics"
	"opsbot/state"
)

// envelope is the part of any webhook payload ingest reads: enough to know
// whether opsbot uses the delivery and which PR orders it.
type envelope struct {
	Action     string `json:"action"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Number int `json:"number"`
	Issue  *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	Comment *struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
	} `json:"comment"`
	ClientPayload map[string]any `json:"client_payload"`
}

// decodeEnvelope reads the envelope with the JSON v2 decoder, one pass over
// the body where encoding/json makes two (validate, then decode): it was a
// third of the server's CPU under ingest (docs/BENCHMARKS.md). The options
// keep encoding/json's leniency: duplicate names, invalid UTF-8 in strings and
// names in any case are accepted as GitHub's payloads always were.
func decodeEnvelope(body []byte, env *envelope) error {
	return jsonv2.Unmarshal(body, env, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true),
		jsonv2.MatchCaseInsensitiveNames(true))
}

// formContentType is GitHub's default webhook content type: the JSON payload
// in a form field named payload.
const formContentType = "application/x-www-form-urlencoded"

// usedEvents are the events opsbot acts on; every other event is answered
// 202 and dropped once its signature is checked.
var usedEvents = map[string]bool{"issue_comment": true, "pull_request": true, "repository_dispatch": true}

type webhookReply struct {
	Status   string `json:"status"`
	Delivery string `json:"delivery,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	label := metrics.EventLabel(event)
	answer := func(code int, outcome string, rep webhookReply) {
		s.m.Webhooks.WithLabelValues(label, outcome).Inc()
		rep.Delivery = id
		writeJSON(w, code, rep)
	}
	if r.ContentLength > s.maxBody {
		answer(http.StatusRequestEntityTooLarge, "too_large", webhookReply{Status: "rejected", Error: "body larger than the limit"})
		return
	}
	if event == "" || id == "" || len(id) > 128 {
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "X-GitHub-Event and X-GitHub-Delivery headers are required"})
		return
	}
	// GitHub sends JSON, or (its default) a form whose payload field holds
	// the JSON; the signature is over the raw body either way.
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != formContentType) {
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "content type must be application/json or application/x-www-form-urlencoded (set it in the webhook's settings on GitHub)"})
		return
	}
	parts, release, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			w.Header().Set("Connection", "close")
			answer(http.StatusRequestEntityTooLarge, "too_large", webhookReply{Status: "rejected", Error: "body larger than the limit"})
		case errors.Is(err, errBusy), errors.Is(err, errGiveWay):
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			answer(http.StatusServiceUnavailable, "busy", webhookReply{Status: "rejected",
				Error: "too many request bodies being read at once; retry"})
		case errors.Is(err, errTooSlow):
			w.Header().Set("Connection", "close")
			answer(http.StatusRequestTimeout, "too_slow", webhookReply{Status: "rejected", Error: "body arrived too slowly"})
		default:
			answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected", Error: "reading the body failed"})
		}
		return
	}
	if err := auth.VerifySignatureParts(parts, r.Header.Get("X-Hub-Signature-256"), s.secrets); err != nil {
		release()
		s.log.Warn("webhook signature rejected", "delivery", id, "event", label, "err", err)
		answer(http.StatusUnauthorized, "bad_signature", webhookReply{Status: "rejected",
			Error: "missing or wrong X-Hub-Signature-256"})
		return
	}
	// Signed by GitHub: only now does the body get memory of its own.
	body := join(parts)
	release()
	if mt == formContentType {
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("payload") == "" {
			answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
				Error: "a form-encoded delivery needs a payload field holding the JSON"})
			return
		}
		body = []byte(form.Get("payload"))
	}
	var env envelope
	if err := decodeEnvelope(body, &env); err != nil {
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected", Error: "body is not valid JSON"})
		return
	}
	d, use := s.classify(event, id, &env)
	if !use {
		answer(http.StatusAccepted, "ignored", webhookReply{Status: "ignored"})
		return
	}
	d.Body = body
	// Stored in the inbox on the server's context: once GitHub's request
	// has reached this point, a client hang-up must not cancel the write.
	res, err := s.store.Append(s.ctx, d)
	if err != nil {
		s.log.Error("storing a delivery failed", "delivery", id, "err", err)
		w.Header().Set("Retry-After", "5")
		answer(http.StatusServiceUnavailable, "error", webhookReply{Status: "error", Error: "could not store the delivery; retry"})
		return
	}
	if res == state.Duplicate {
		answer(http.StatusOK, "duplicate", webhookReply{Status: "duplicate"})
		return
	}
	s.queue.Enqueue(d)
	answer(http.StatusAccepted, "stored", webhookReply{Status: "stored"})
}

// classify decides whether a verified delivery is one opsbot acts on.
func (s *Server) classify(event, id string, env *envelope) (*state.Delivery, bool) {
	if !usedEvents[event] || env.Repository == nil {
		return nil, false
	}
	repo, ok := s.repoName(env.Repository.FullName)
	if !ok {
		return nil, false
	}
	d := &state.Delivery{ID: id, Event: event, Action: env.Action, Repo: repo, ReceivedAt: s.now()}
	switch event {
	case "issue_comment":
		// Comments on issues that are not pull requests carry no commands.
		if env.Issue == nil || len(env.Issue.PullRequest) == 0 || string(env.Issue.PullRequest) == "null" {
			return nil, false
		}
		d.PR = env.Issue.Number
		// A new comment that holds no command line (most comments) is
		// completed by the worker without decoding the payload again. Any
		// line that could be a command, even a malformed one, goes through.
		d.NoCommands = env.Action == "created" && env.Comment != nil && len(commands.Parse(env.Comment.Body, commands.Options{})) == 0
		if env.Comment != nil {
			d.CommentID = env.Comment.ID
		}
	case "pull_request":
		d.PR = env.Number
		if d.PR == 0 && env.PullRequest != nil {
			d.PR = env.PullRequest.Number
		}
		if d.PR == 0 {
			return nil, false
		}
	case "repository_dispatch":
		if !strings.HasPrefix(env.Action, "stage-results-") {
			return nil, false
		}
		switch n := env.ClientPayload["pr-number"].(type) {
		case float64:
			if n > 0 && n < 1<<31 {
				d.PR = int(n)
			}
		case string:
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				d.PR = v
			}
		}
	}
	return d, true
}
