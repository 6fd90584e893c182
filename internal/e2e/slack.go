package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/SemiAnalysisAI/opsbot/internal/slacktest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
)

// SlackSecret is the Slack signing secret of SlackTop's worlds.
const SlackSecret = "slack-signing-secret-0123456789"

// SlackTop is the top-level configuration of a world with Slack at sl, its
// clicks taken (a signing secret, in TEST_SLACK_SIGNING with the token in
// TEST_SLACK_TOKEN: SlackEnv) and Slack user U0MAINT mapped to the
// maintainer.
func SlackTop(sl *slacktest.Fake) string {
	return "slack:\n  api_url: \"" + sl.URL + "\"\n  token_env: TEST_SLACK_TOKEN\n  channel: \"#sweep-ops\"\n" +
		"  signing_secret_env: TEST_SLACK_SIGNING\n  users:\n    U0MAINT: maintainer\n    U0READ: reader\n"
}

// SlackEnv is the environment SlackTop reads.
var SlackEnv = map[string]string{"TEST_SLACK_TOKEN": "xoxb-test", "TEST_SLACK_SIGNING": SlackSecret}

// SlackOffered waits for a message in Slack that offers the button action
// and returns its value (what a click carries back).
func (w *World) SlackOffered(sl *slacktest.Fake, action string) string {
	w.T.Helper()
	var value string
	testkit.Eventually(w.T, "a Slack message offering "+action, func() bool {
		for _, p := range sl.Posts() {
			if v := SlackValue(p.Blocks, action); v != "" {
				value = v
			}
		}
		return value != ""
	})
	return value
}

// SlackClick posts a click of Slack user user on the button action with
// value, as Slack does (a form, signed with SlackSecret), waits for the
// server to settle, and returns the answer's status.
func (w *World) SlackClick(sl *slacktest.Fake, user, action, value string) int {
	w.T.Helper()
	return w.SlackClickSigned(sl, user, action, value, time.Now(), SlackSecret)
}

// SlackClickSigned is SlackClick signed with secret at time at.
func (w *World) SlackClickSigned(sl *slacktest.Fake, user, action, value string, at time.Time, secret string) int {
	w.T.Helper()
	n := w.Next()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": user}, "team": map[string]any{"id": "T0TEAM"},
		"response_url": sl.ResponseURL(fmt.Sprint(n)),
		"actions":      []any{map[string]any{"action_id": action, "value": value, "action_ts": fmt.Sprintf("%d.%06d", at.Unix(), n)}}})
	body := url.Values{"payload": {string(payload)}}.Encode()
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":" + body))
	req, err := http.NewRequest(http.MethodPost, w.Srv.URL+"/slack/interactions", strings.NewReader(body))
	if err != nil {
		w.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	resp.Body.Close()
	w.Settle()
	return resp.StatusCode
}

// SlackAnswer waits for the answers to clicks to number more than before
// and returns the newest one's text.
func SlackAnswer(t testing.TB, sl *slacktest.Fake, before int) string {
	t.Helper()
	var r []slacktest.Response
	testkit.Eventually(t, "an answer to the click", func() bool { r = sl.Responses(); return len(r) > before })
	return r[len(r)-1].Text
}

// SlackValue is the value of the button action in a message's blocks ("":
// none).
func SlackValue(blocks, action string) string {
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(blocks), &bs) != nil {
		return ""
	}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.ActionID == action {
				return e.Value
			}
		}
	}
	return ""
}
