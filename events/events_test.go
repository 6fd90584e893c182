package events

import (
	"reflect"
	"testing"

	"opsbot/commands/commandstest"
	"opsbot/config"
)

// TestCommentOfOlderDeliveries: a comment delivery stored before ingest
// recorded its parse (Parsed empty) reads as the same record the worker
// gets from one classified now.
func TestCommentOfOlderDeliveries(t *testing.T) {
	cfg, err := config.Parse([]byte("github:\n  webhook_secret_env: S\nrepos:\n  - name: Codertocat/Hello-World\n" +
		"    sweep_workflow: .github/workflows/run-sweep.yml\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Cfg: config.NewLive(cfg), Commands: commandstest.Registry(nil, nil)}
	rc, _ := cfg.Repo("Codertocat/Hello-World")
	s := NewSchema(config.NewLive(cfg), commandstest.Registry(nil, nil), nil)
	for _, tc := range []struct{ action, body string }{
		{"created", "/reuse-sweep-run 12\n/opsbot help"},
		{"created", "no command here"},
		{"edited", "/reuse-sweep-run cancel"},
		{"deleted", "/use 5"},
	} {
		t.Run(tc.action+" "+tc.body, func(t *testing.T) {
			d, ignored, err := s.Classify("issue_comment", "d-1", onPR(t, tc.action, tc.body))
			if err != nil || d == nil {
				t.Fatalf("Classify = %v, %q, %v", d, ignored, err)
			}
			now, err := h.commentOf(rc, d)
			if err != nil {
				t.Fatal(err)
			}
			d.Parsed = nil
			older, err := h.commentOf(rc, d)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(now, older) {
				t.Fatalf("from the body = %+v\nfrom ingest    = %+v", older, now)
			}
		})
	}
}
