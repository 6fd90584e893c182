package events

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands"
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
	h := &Handler{Cfg: config.NewLive(cfg), Commands: commandstest.Registry()}
	s := NewSchema(config.NewLive(cfg), commandstest.Registry(), nil)
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
		if d.NoCommands != w.NoCommands || d.CommentID != w.CommentID || (len(d.Parsed) == 0) != (len(w.Parsed) == 0) {
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

// A pending comment delivery whose stored parse is of another parser
// version (an older build's, or a newer one's before a rollback) is read
// again by the upgrade at start, and by the worker if it was not; one of
// the running version is left as it is.
func TestUpgradeInboxReadsAgainAParseOfAnotherVersion(t *testing.T) {
	cfg, err := config.Parse([]byte("github:\n  webhook_secret_env: S\nrepos:\n  - name: Codertocat/Hello-World\n" +
		"    sweep_workflow: .github/workflows/run-sweep.yml\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := commandstest.Registry()
	h := &Handler{Cfg: config.NewLive(cfg), Commands: reg}
	s := NewSchema(config.NewLive(cfg), reg, nil)
	st, err := state.Open(filepath.Join(t.TempDir(), "u.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// What an older parser read in "/reuse-sweep-run 12": a cancel.
	stale := []storedCommand{{Line: 1, Name: "reuse-sweep-run", Cancel: true, Verb: "/reuse-sweep-run", Text: "/reuse-sweep-run 12"}}
	for i, version := range []int{0, commands.ParserVersion + 1, commands.ParserVersion} {
		d, _, err := s.Classify("issue_comment", fmt.Sprintf("v%d", i), onPR(t, "created", fmt.Sprintf("/reuse-sweep-run 12\n\ncomment %d", i)))
		if err != nil || d == nil {
			t.Fatalf("Classify = %v, %v", d, err)
		}
		var in ingested
		if err := json.Unmarshal(d.Parsed, &in); err != nil {
			t.Fatal(err)
		}
		in.Comment.Parser, in.Comment.Commands = version, stale
		if d.Parsed, err = json.Marshal(in); err != nil {
			t.Fatal(err)
		}
		if r, err := st.Append(t.Context(), d); err != nil || r != state.Stored {
			t.Fatalf("Append = %v, %v", r, err)
		}
		// The worker, before any upgrade: a parse of another version is
		// read again from the body.
		c, err := h.commentOf(d)
		if err != nil {
			t.Fatal(err)
		}
		wantCancel := version == commands.ParserVersion // the running version's parse is trusted as stored
		if len(c.Commands) != 1 || c.Commands[0].Cancel != wantCancel || c.Parser != commands.ParserVersion {
			t.Fatalf("version %d: the worker read %+v", version, c)
		}
	}
	n, err := UpgradeInbox(st, s, slog.New(slog.DiscardHandler))
	if err != nil || n != 2 {
		t.Fatalf("UpgradeInbox = %d, %v; want the 2 deliveries of other versions", n, err)
	}
	pending, err := st.Pending()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		d, err := st.Delivery(p.Seq)
		if err != nil {
			t.Fatal(err)
		}
		var in ingested
		if err := json.Unmarshal(d.Parsed, &in); err != nil {
			t.Fatal(err)
		}
		c := in.Comment
		wantCancel := d.ID == "v2"
		if c.Parser != commands.ParserVersion || len(c.Commands) != 1 || c.Commands[0].Cancel != wantCancel ||
			(!wantCancel && c.Commands[0].RunID != 12) {
			t.Fatalf("%s after the upgrade: %+v", d.ID, c)
		}
	}
}
