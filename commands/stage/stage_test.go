package stage

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// The staging URL is the repository's template filled with the request.
func TestStageURL(t *testing.T) {
	rc := &config.Repo{Name: "o/r"}
	rc.Stage.URLTemplate = "https://staging.example.com/inference?i_dates={{.RunDate}}~r{{.RunID}}&pr={{.PR}}&repo={{.Repo}}"
	r := &record.StageRequest{RunID: 31147925932, RunDate: "2026-12-01", PR: 2512, Repo: "o/r"}
	got, err := StageURL(rc, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://staging.example.com/inference?i_dates=2026-12-01~r31147925932&pr=2512&repo=o/r"; got != want {
		t.Fatalf("url = %q, want %q", got, want)
	}
	rc.Stage.URLTemplate = ""
	if got, err := StageURL(rc, r); err != nil || got != "(no url_template configured)" {
		t.Fatalf("without a template: %q, %v", got, err)
	}
}

// The staging side may send ids as strings, numbers or booleans; all are
// read as the strings a request is matched on, and a payload that is not an
// object matches nothing.
func TestPayloadOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want map[string]string
	}{
		{`{"comment-id":"12","run-id":31147925932,"stage-succeeded":true,"pr-number":2512.0,"extra":{"a":1}}`,
			map[string]string{"comment-id": "12", "run-id": "31147925932", "stage-succeeded": "true", "pr-number": "2512"}},
		{`["not", "an", "object"]`, map[string]string{}},
		{``, map[string]string{}},
	} {
		ev := &github.RepositoryDispatchEvent{ClientPayload: json.RawMessage(c.raw)}
		if got := payloadOf(ev); !maps.Equal(got, c.want) {
			t.Errorf("payloadOf(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}
