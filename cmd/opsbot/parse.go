package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/commands"
)

func runParse(e *env, args []string) error {
	fs := newFlags(e, "parse", "--repo OWNER/REPO < comment.md",
		"opsbot parse --repo SemiAnalysisAI/InferenceX < comment.md",
		"echo '/reuse-sweep-run 31147925932' | opsbot parse --repo OWNER/REPO")
	repo := fs.String("repo", "", "the repository the comment belongs to (run URLs must name it)")
	host := fs.String("host", "github.com", "the web host of run URLs (GitHub Enterprise)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o, n, ok := strings.Cut(*repo, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
		fmt.Fprintf(e.stderr, "opsbot parse: --repo OWNER/REPO is required (got %q)\n", *repo)
		return exitCode(2)
	}
	body, err := io.ReadAll(io.LimitReader(e.stdin, 1<<20+1))
	if err != nil {
		return fmt.Errorf("reading the comment from stdin: %w", err)
	}
	if len(body) > 1<<20 {
		fmt.Fprintln(e.stderr, "opsbot parse: the comment is larger than 1 MiB; GitHub comments are at most 64 KiB")
		return exitCode(2)
	}
	cmds := app.Grammar().Parse(string(body), commands.Options{Repo: *repo, Host: *host})
	if cmds == nil {
		cmds = []commands.Command{}
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(cmds)
}
