package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"github.com/SemiAnalysisAI/opsbot/events"
)

// maxSlackBody bounds a Slack interaction's body (Slack's are a few KB).
const maxSlackBody = 64 << 10

// slackPayload is the part of a Slack block_actions interaction opsbot
// reads.
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
		ActionTS string `json:"action_ts"`
	} `json:"actions"`
}

// handleSlack takes a click on one of opsbot's Slack buttons: Slack's
// signature (v0, over "v0:timestamp:body", at most 5 minutes old) is
// checked before anything is read; then the click is stored in the inbox
// as opsbot's own delivery (events.EventClick), whose worker checks who the
// clicker is and runs the command, and Slack gets its 200 within its 3
// seconds. A click opsbot cannot use is answered 200 and dropped (Slack
// shows an error for anything else); a bad signature gets 401.
func (s *Server) handleSlack(w http.ResponseWriter, r *http.Request) {
	if s.slackSecret == "" {
		http.Error(w, "Slack interactions are not configured (slack.signing_secret_env)", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSlackBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, s.slackSecret.Reveal())
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		s.refusals.refused(causeSignature, "", "slack_interaction", r.RemoteAddr, err.Error())
		http.Error(w, "bad or stale Slack signature", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, "not a form", http.StatusBadRequest)
		return
	}
	var p slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &p); err != nil {
		http.Error(w, "no interaction payload", http.StatusBadRequest)
		return
	}
	if p.Type != "block_actions" || len(p.Actions) != 1 || p.User.ID == "" {
		w.WriteHeader(http.StatusOK) // not a click on one of opsbot's buttons
		return
	}
	if s.slackUserKnown != nil && !s.slackUserKnown(p.User.ID) {
		// Someone slack.users does not map is told so, within a budget:
		// three clicks at once, then one a minute each.
		if ok, _ := s.slackUnknown.Take(p.User.ID); !ok {
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	a := p.Actions[0]
	var v events.ClickValue
	if err := json.Unmarshal([]byte(a.Value), &v); err != nil || v.Repo == "" || v.PR <= 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	repo, ok := s.repoName(v.Repo)
	if !ok {
		w.WriteHeader(http.StatusOK)
		return
	}
	click := events.Click{Repository: events.Repository{FullName: repo}, Number: v.PR}
	click.Click = &events.ClickInfo{Action: a.ActionID, RunID: v.RunID, Head: v.Head, Nonce: v.Nonce, Attempt: v.Attempt, SlackUser: p.User.ID, SlackTeam: p.Team.ID,
		ResponseURL: p.ResponseURL, ActionTS: a.ActionTS}
	stored, err := json.Marshal(click)
	if err != nil {
		http.Error(w, "could not record the click", http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%s", p.Team.ID, p.User.ID, a.ActionTS, a.ActionID, a.Value))
	id := events.ClickIDPrefix + hex.EncodeToString(sum[:16])
	if _, err := s.intake.Take(r.Context(), events.EventClick, id, stored, [32]byte{}); err != nil {
		s.log.Error("storing a Slack click failed; Slack shows the click failed and the user may click again", "err", err)
		http.Error(w, "could not store the click", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// repoName is the configured name of a served repository.
func (s *Server) repoName(name string) (string, bool) {
	if s.repoOf == nil {
		return "", false
	}
	n, ok := s.repoOf(strings.TrimSpace(name))
	return n, ok
}
