package events

import (
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/commandstest"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/worker"
)

// A comment delivery stored before ingest recorded its parse (Parsed
// empty) is upgraded at start to the record the worker gets from one
// classified now; one left without a parse is refused, never read from its
// body.
func TestUpgradeInboxGivesOlderDeliveriesTheirParse(t *testing.T) {
	cfg, err := config.Parse([]byte("github:\n  webhook_secret_env: S\nrepos:\n  - name: Codertocat/Hello-World\n" +
		"    sweep_workflow: .github/workflows/run-sweep.yml\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Cfg: config.NewLive(cfg), Commands: commandstest.Registry(nil, nil)}
	s := NewSchema(config.NewLive(cfg), commandstest.Registry(nil, nil), nil)
	st, err := state.Open(filepath.Join(t.TempDir(), "u.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cases := []struct{ action, body string }{
		{"created", "/reuse-sweep-run 12\n/opsbot help"},
		{"created", "no command here"},
		{"edited", "/reuse-sweep-run cancel"},
		{"deleted", "/use 5"},
	}
	want := map[string]*state.Delivery{}
	for i, tc := range cases {
		id := string(rune('a' + i))
		d, ignored, err := s.Classify("issue_comment", id, onPR(t, tc.action, tc.body))
		if err != nil || d == nil {
			t.Fatalf("Classify = %v, %q, %v", d, ignored, err)
		}
		want[id] = d
		older := *d
		older.Parsed, older.NoCommands = nil, false // as a build before ingest recorded them stored it
		if _, err := st.Append(t.Context(), &older); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := st.Pending()
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.Delivery(pending[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.commentOf(d); !worker.IsPermanent(err) {
		t.Fatalf("a delivery without its parse: %v, want a permanent refusal", err)
	}
	n, err := UpgradeInbox(st, s, slog.New(slog.DiscardHandler))
	if err != nil || n != len(cases) {
		t.Fatalf("UpgradeInbox = %d, %v; want %d", n, err, len(cases))
	}
	if n, err := UpgradeInbox(st, s, slog.New(slog.DiscardHandler)); err != nil || n != 0 {
		t.Fatalf("a second UpgradeInbox = %d, %v; want nothing to do", n, err)
	}
	if pending, err = st.Pending(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		d, err := st.Delivery(p.Seq)
		if err != nil {
			t.Fatal(err)
		}
		w := want[d.ID]
		if d.NoCommands != w.NoCommands || d.CommentID != w.CommentID || string(d.Parsed) != string(w.Parsed) {
			t.Fatalf("%s upgraded to no_commands=%v comment=%d parsed=%s; want %v %d %s", d.ID, d.NoCommands, d.CommentID, d.Parsed,
				w.NoCommands, w.CommentID, w.Parsed)
		}
		if w.NoCommands {
			continue
		}
		got, err := h.commentOf(d)
		if err != nil {
			t.Fatal(err)
		}
		now, _ := h.commentOf(w)
		if !reflect.DeepEqual(got, now) {
			t.Fatalf("upgraded = %+v\nclassified now = %+v", got, now)
		}
	}
}
