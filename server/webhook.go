package server

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/SemiAnalysisAI/opsbot/auth"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/reconcile"
	"github.com/SemiAnalysisAI/opsbot/seq"
	"github.com/SemiAnalysisAI/opsbot/state"
)

// formContentType is GitHub's default webhook content type: the JSON payload
// in a form field named payload.
const formContentType = "application/x-www-form-urlencoded"

type webhookReply struct {
	Status   string `json:"status"`
	Delivery string `json:"delivery,omitempty"`
	Error    string `json:"error,omitempty"`
	// Reason says why a delivery was ignored (shown in the webhook's
	// Recent Deliveries on GitHub).
	Reason string `json:"reason,omitempty"`
}

func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	label := s.m.EventLabel(event)
	answer := func(code int, outcome string, rep webhookReply) {
		s.m.Webhooks.WithLabelValues(label, outcome).Inc()
		rep.Delivery = id
		writeJSON(w, code, rep)
	}
	refused := func(cause, detail string) { s.refusals.refused(cause, id, event, r.RemoteAddr, detail) }
	if r.ContentLength > s.maxBody {
		refused(causeTooLarge, "")
		answer(http.StatusRequestEntityTooLarge, "too_large", webhookReply{Status: "rejected", Error: "body larger than the limit"})
		return
	}
	if event == "" || id == "" || len(id) > 128 {
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "X-GitHub-Event and X-GitHub-Delivery headers are required"})
		return
	}
	if strings.HasPrefix(strings.ToLower(id), reconcile.IDPrefix) {
		// Recovery's own deliveries use these ids: one taken by a webhook
		// would make recovery's delivery a duplicate.
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "X-GitHub-Delivery ids starting with " + reconcile.IDPrefix + " are opsbot's own; send GitHub's delivery id"})
		return
	}
	if strings.HasPrefix(strings.ToLower(id), events.ClickIDPrefix) || event == events.EventClick {
		// Clicks come from Slack, signed with Slack's secret, at /slack/interactions.
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "X-GitHub-Delivery ids starting with " + events.ClickIDPrefix + " and the event " + events.EventClick + " are opsbot's own; send GitHub's"})
		return
	}
	if strings.HasPrefix(strings.ToLower(id), seq.IDPrefix) || event == seq.Event {
		// Wake-ups are opsbot's own deliveries, made by its ticker only.
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "X-GitHub-Delivery ids starting with " + seq.IDPrefix + " and the event " + seq.Event + " are opsbot's own; send GitHub's"})
		return
	}
	// GitHub sends JSON, or (its default) a form whose payload field holds
	// the JSON; the signature is over the raw body either way.
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != formContentType) {
		refused(causeContentType, "Content-Type "+strconv.Quote(clip(r.Header.Get("Content-Type"), 64)))
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
			Error: "content type must be application/json or application/x-www-form-urlencoded (set it in the webhook's settings on GitHub)"})
		return
	}
	parts, release, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			refused(causeTooLarge, "")
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
		s.refusals.refused(causeSignature, id, label, r.RemoteAddr, err.Error())
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
			refused(causeFormPayload, "")
			answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected",
				Error: "a form-encoded delivery needs a payload field holding the JSON"})
			return
		}
		body = []byte(form.Get("payload"))
	}
	// The verified signature is GitHub's keyed sum of the body: it
	// identifies a resent copy without hashing the body again. Stored in
	// the inbox on the server's context: once GitHub's request has reached
	// this point, a client hang-up must not cancel the write.
	sum, _ := auth.SignatureSum(event, r.Header.Get("X-Hub-Signature-256"))
	taken, err := s.intake.Take(s.ctx, event, id, body, sum)
	switch {
	case errors.Is(err, events.ErrBadBody):
		refused(causeBadJSON, err.Error())
		answer(http.StatusBadRequest, "bad_request", webhookReply{Status: "rejected", Error: "body is not valid JSON"})
		return
	case err != nil:
		s.log.Error("storing a delivery failed", "delivery", id, "err", err)
		w.Header().Set("Retry-After", "5")
		answer(http.StatusServiceUnavailable, "error", webhookReply{Status: "error", Error: "could not store the delivery; retry"})
		return
	case taken.Delivery == nil:
		if strings.HasPrefix(taken.Ignored, events.IgnoredRepo) && s.unserved.first(taken.Ignored, s.now()) {
			// A repository opsbot does not serve: a typo in repos[].name
			// looks like a working setup unless the log says it.
			s.log.Info("webhook ignored: its repository is not served (check repos[].name)", "delivery", id, "event", label,
				"reason", taken.Ignored)
		} else {
			s.log.Debug("webhook ignored", "delivery", id, "event", label, "reason", taken.Ignored)
		}
		answer(http.StatusAccepted, "ignored", webhookReply{Status: "ignored", Reason: taken.Ignored})
		return
	case taken.Result == state.Duplicate:
		answer(http.StatusOK, "duplicate", webhookReply{Status: "duplicate"})
		return
	case taken.Done != "":
		s.m.ObserveProcessed(event, taken.Done, 0)
	}
	answer(http.StatusAccepted, "stored", webhookReply{Status: "stored"})
}

// onceEvery says whether a key was not seen for a while: the log of
// deliveries for repositories opsbot does not serve says each repository
// once every refusalLogEvery, not once per delivery. It keeps at most
// maxRefusalKeys keys.
type onceEvery struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (o *onceEvery) first(key string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if last, ok := o.seen[key]; ok && now.Sub(last) < refusalLogEvery {
		return false
	}
	if o.seen == nil || len(o.seen) >= maxRefusalKeys {
		o.seen = map[string]time.Time{}
	}
	o.seen[key] = now
	return true
}
