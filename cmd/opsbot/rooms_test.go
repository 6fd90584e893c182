package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/internal/fixtures"
	"github.com/SemiAnalysisAI/opsbot/internal/githubtest"
	"github.com/SemiAnalysisAI/opsbot/internal/testkit"
	"github.com/SemiAnalysisAI/opsbot/mdtext"
	"github.com/SemiAnalysisAI/opsbot/state"
	"github.com/SemiAnalysisAI/opsbot/state/record"
)

// echo is a command only this test has: `/echo <word>` answers the word.
// Its spec is all a new command is: a verb with its argument reader, an
// access rule, its help, and a handler.
func echo() commands.Spec {
	return commands.Spec{
		Name: "echo",
		Verbs: []commands.Verb{{Word: "/echo", Usage: "usage: /echo <word>",
			Args: func(c *commands.Command, args []string, _ commands.Options) string {
				if len(args) != 1 {
					return "/echo takes one word"
				}
				c.Args = args
				return ""
			}}},
		Access: func(rc *config.Repo) config.Access { return rc.Reuse.Access },
		Help: func(*config.Repo) commands.Help {
			return commands.Help{Rows: []commands.HelpRow{{Command: "`/echo <word>`", What: "say the word back", Who: "anyone allowed to pin"}}}
		},
		Handler: echoHandler{},
	}
}

type echoHandler struct{}

func (echoHandler) Prepare(_ context.Context, _ commands.Env, in commands.Invocation, line commands.Line) commands.Result {
	word := line.Args[0]
	return commands.Result{Outcome: commands.Accepted, Reason: "echoed " + word,
		Reply: fmt.Sprintf("%s you said %s", mdtext.Mention(in.Actor.Login), commands.Code(word))}
}

// A command registered from outside opsbot's own set runs end to end
// through the real server: a signed comment in, the role checked, the
// reply and the reaction at GitHub, the audit naming the command and its
// origin, and /opsbot help listing it. A new command is one package and
// one line in newApp; nothing else in opsbot changes.
func TestARegisteredCommandRunsEndToEnd(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.AddRepo(theRepo, "run-sweep.yml", 77)
	gh.AddUser(maintLog, maintID, "User")
	gh.SetRole(theRepo, maintLog, "write")
	gh.AddUser("stranger", 99, "User")
	gh.SetRole(theRepo, "stranger", "read")
	gh.AddPR(theRepo, thePR, "author", "kimi-tune", sha("b0"), []string{sha("c1")}, []string{"benchmarks/kimi.sh"})
	dir := t.TempDir()
	path := filepath.Join(dir, "opsbot.yaml")
	yaml := fmt.Sprintf(`state_path: %q
github:
  api_url: %q
  token_env: "TEST_GITHUB_TOKEN"
  webhook_secret_env: "TEST_WEBHOOK_SECRET"
repos:
  - name: %q
    sweep_workflow: ".github/workflows/run-sweep.yml"
`, filepath.Join(dir, "opsbot.db"), gh.URL, theRepo)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := cfg.ResolveSecrets(testEnv(map[string]string{"TEST_GITHUB_TOKEN": "ghs_test"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, cfg, app.Deps{Log: slog.New(slog.DiscardHandler), Secrets: secrets, Modules: []func(commands.Deps) commands.Module{func(commands.Deps) commands.Module { return commands.Module{Spec: echo()} }}})
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	defer a.Close()
	if err := a.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Stop()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Serve(ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	url := "http://" + ln.Addr().String() + "/webhook"
	comment := func(id string, login string, uid int64, body string) githubtest.Comment {
		t.Helper()
		c := gh.AddComment(theRepo, thePR, login, body)
		p := payload(t, "issue_comment", "created")
		setPath(p, "repository.full_name", theRepo)
		setPath(p, "issue.number", thePR)
		setPath(p, "issue.pull_request", map[string]any{"url": "https://api.github.com/repos/" + theRepo + "/pulls/1"})
		setPath(p, "comment.id", c.ID)
		setPath(p, "comment.body", c.Body)
		setPath(p, "comment.user", user{Login: login, ID: uid}.JSON())
		p["sender"] = user{Login: login, ID: uid}.JSON()
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if code, rep := post(t, fixtures.SignedRequest(t, url, "issue_comment", id, raw, testSecret)); code != 202 {
			t.Fatalf("webhook: %d %v", code, rep)
		}
		return c
	}
	replyTo := func(want string) bool {
		for _, r := range gh.Comments(theRepo, thePR) {
			if strings.Contains(r.Body, want) {
				return true
			}
		}
		return false
	}

	c := comment("echo-1", maintLog, maintID, "/echo hello")
	testkit.Eventually(t, "opsbot answers /echo", func() bool { return replyTo("you said `hello`") })
	testkit.Eventually(t, "the comment gets +1", func() bool {
		for _, r := range gh.Reactions(c.ID) {
			if r == "+1" {
				return true
			}
		}
		return false
	})
	recs, _, err := a.Store().Audit(state.AuditQuery{Repo: theRepo, PR: thePR, Kind: "command"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Command != "echo" || recs[0].Outcome != "accepted" || recs[0].Reason != "echoed hello" ||
		recs[0].Origin() != (record.Origin{Kind: record.OriginComment, ID: c.ID, URL: recs[0].CommentURL}) || recs[0].ActorLogin != maintLog {
		t.Fatalf("audit = %+v, want one accepted echo from comment %d by %s", recs, c.ID, maintLog)
	}

	// Its access rule holds: a reader gets a reaction, no answer.
	s := comment("echo-2", "stranger", 99, "/echo again")
	testkit.Eventually(t, "the stranger's comment gets -1", func() bool {
		for _, r := range gh.Reactions(s.ID) {
			if r == "-1" {
				return true
			}
		}
		return false
	})
	if replyTo("you said `again`") {
		t.Fatal("a reader made opsbot echo")
	}

	// Its help is in /opsbot help, after opsbot's own commands.
	comment("echo-3", maintLog, maintID, "/opsbot help")
	testkit.Eventually(t, "/opsbot help lists /echo", func() bool { return replyTo("| `/echo <word>` | say the word back |") })
}
