package events

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// A click whose delivery is given up (the dead letters) still uses its
// button up, a check run's and a Slack one's: a captured copy sent again
// later finds it used. A button used already, or no offer, writes nothing.
func TestBuriedClickUsesItsButtonUp(t *testing.T) {
	cfg, err := config.Parse([]byte("github:\n  webhook_secret_env: S\nslack:\n  signing_secret_env: X\n  users:\n    U0MAINT: maintainer\n" +
		"repos:\n  - name: o/r\n    sweep_workflow: .github/workflows/run-sweep.yml\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Cfg: config.NewLive(cfg), Commands: commandstest.Registry()}
	st, err := state.Open(filepath.Join(t.TempDir(), "b.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var check, slack record.Offer
	if err := st.Update(func(tx *state.Tx) error {
		check = record.Offer{Repo: "o/r", PR: 7, Head: "abc", Surface: record.OfferCheckRun, Actions: []string{"reuse"}}
		slack = record.Offer{Repo: "o/r", PR: 7, Head: "abc", Surface: record.OfferSlack, Actions: []string{"merge"}}
		if err := tx.OfferButtons(&check); err != nil {
			return err
		}
		return tx.OfferButtons(&slack)
	}); err != nil {
		t.Fatal(err)
	}
	body := func(v any) []byte {
		raw, _ := json.Marshal(v)
		return raw
	}
	clickOn := &state.Delivery{ID: "d-check", Event: EventCheckRun, Action: "requested_action", Repo: "o/r", PR: 7,
		Body: body(map[string]any{"action": "requested_action", "check_run": map[string]any{"external_id": fmt.Sprintf("7:42:%s", check.Nonce)},
			"requested_action": map[string]any{"identifier": "reuse"}, "sender": map[string]any{"login": "maintainer", "id": 1}})}
	slackClick := &state.Delivery{ID: "slack-1", Event: EventClick, Repo: "o/r", PR: 7,
		Body: body(Click{Repository: Repository{FullName: "o/r"}, Number: 7, Click: &ClickInfo{Action: "merge", Nonce: slack.Nonce, SlackUser: "U0MAINT"}})}
	for _, d := range []*state.Delivery{clickOn, slackClick, clickOn} { // the third: used already, writes nothing
		w := h.Buried(d)
		if w == nil {
			t.Fatalf("%s given up writes nothing", d.ID)
		}
		if err := st.Update(w); err != nil {
			t.Fatalf("%s: %v", d.ID, err)
		}
	}
	for _, c := range []struct {
		nonce, action, by string
	}{{check.Nonce, "reuse", "maintainer"}, {slack.Nonce, "merge", "maintainer"}} {
		o, err := st.ButtonOffer("o/r", c.nonce)
		if err != nil || o == nil || o.Used(c.action) == nil || o.Used(c.action).Outcome != "errored" || o.Used(c.action).By != c.by {
			t.Fatalf("the offer after the bury: %+v, %v", o, err)
		}
	}
	if w := h.Buried(&state.Delivery{ID: "d-2", Event: EventPull, Action: "synchronize", Repo: "o/r", PR: 7, Body: []byte(`{}`)}); w != nil {
		t.Fatal("a push given up writes something")
	}
}
