package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/SemiAnalysisAI/opsbot/app"
	"github.com/SemiAnalysisAI/opsbot/internal/flagdoc"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitCode ends the program with that status and no further message: the
// subcommand already said what went wrong.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

type env struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// deps, set by tests only, adjusts what serve builds the server with
	// (a clock they move, how often sequences are woken).
	deps func(*app.Deps)
}

type subcommand struct {
	summary string
	run     func(e *env, args []string) error
}

func subcommands() map[string]subcommand {
	return map[string]subcommand{
		"serve":       {"run the server: webhooks in, decisions and notices out", runServe},
		"demo":        {"see opsbot work: the everyday story against a fake GitHub on this machine", runDemo},
		"parse":       {"print the commands a comment on stdin holds, as JSON", runParse},
		"gate":        {"ask the server whether this push may skip the sweep (a workflow step)", runGate},
		"audit":       {"list the audit: commands, pins, decisions (table, JSON, CSV)", runAudit},
		"backup":      {"copy the database, hot through a server or from a file", runBackup},
		"send":        {"sign and send a webhook payload, to test a deployment", runSend},
		"reconcile":   {"recover lost webhooks: unseen command comments, pins of closed PRs", runReconcile},
		"config":      {"check a configuration file (config check --config FILE)", runConfig},
		"healthcheck": {"ask a running server's /healthz (for container health checks)", runHealthcheck},
		"github":      {"create opsbot's GitHub App (github app-create), print its manifest (github app-manifest) or its events (github events)", runGitHub},
		"slack":       {"print a Slack app manifest with the scopes opsbot needs (slack app-manifest)", runSlack},
		"version":     {"print the version (also: opsbot --version)", runVersion},
	}
}

func runVersion(e *env, args []string) error {
	fs := newFlags(e, "version", "", "opsbot version", "opsbot --version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, versionLine())
	return nil
}

// run is the whole program: main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return runEnv(&env{ctx: ctx, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}, args)
}

// runEnv is run in env e.
func runEnv(e *env, args []string) error {
	app.RegisterSections() // before any configuration is read
	if len(args) == 0 {
		usage(e.stderr)
		return exitCode(2)
	}
	name := args[0]
	switch name {
	case "--version", "-version", "-v", "-V":
		fmt.Fprintln(e.stdout, versionLine())
		return nil
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			sc, ok := subcommands()[args[1]]
			if !ok {
				fmt.Fprintf(e.stderr, "opsbot help: unknown command %q\n\n", args[1])
				usage(e.stderr)
				return exitCode(2)
			}
			if err := sc.run(e, []string{"--help"}); err != nil && !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
		usage(e.stdout)
		return nil
	}
	sc, ok := subcommands()[name]
	if !ok {
		fmt.Fprintf(e.stderr, "opsbot: unknown command %q\n\n", name)
		usage(e.stderr)
		return exitCode(2)
	}
	err := sc.run(e, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "opsbot: the chat-ops bot of a benchmark repository's pull requests.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: opsbot COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	cmds := subcommands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'opsbot help COMMAND' (or 'opsbot COMMAND --help') for a command's flags and examples;")
	fmt.Fprintln(w, "'opsbot --version' for the version.")
}

// newFlags makes a FlagSet whose usage, with examples, goes to stdout when
// asked for (--help) and to stderr after a mistake, and which returns errors
// instead of exiting.
func newFlags(e *env, name, synopsis string, examples ...string) *flag.FlagSet {
	fs := flag.NewFlagSet("opsbot "+name, flag.ContinueOnError)
	out := &usageOutput{stdout: e.stdout, stderr: e.stderr}
	fs.SetOutput(out)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, strings.TrimSpace("Usage: opsbot "+name+" "+synopsis))
		any := false
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprint(w, "\nFlags:\n")
			flagdoc.PrintDefaults(w, fs)
		}
		if len(examples) > 0 {
			fmt.Fprintf(w, "\nExamples:\n  %s\n", strings.Join(examples, "\n  "))
		}
	}
	return fs
}

// usageOutput is a FlagSet's output: stderr, or stdout while help that was
// asked for is printed, or nothing while the flag package would print.
type usageOutput struct {
	stdout, stderr io.Writer
	mode           int // 0 stderr, 1 stdout, 2 discard
}

func (o *usageOutput) Write(p []byte) (int, error) {
	switch o.mode {
	case 1:
		return o.stdout.Write(p)
	case 2:
		return len(p), nil
	}
	return o.stderr.Write(p)
}

// parseFlags parses. --help prints the usage on stdout and returns
// flag.ErrHelp (exit 0); a flag error prints it and the usage on stderr and
// returns exit status 2.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out, _ := fs.Output().(*usageOutput)
	if out != nil {
		out.mode = 2 // the flag package's own printing is replaced below
	}
	err := fs.Parse(args)
	if out != nil {
		out.mode = 0
	}
	if errors.Is(err, flag.ErrHelp) {
		if out != nil {
			out.mode = 1
			fs.Usage()
			out.mode = 0
		}
		return err
	}
	if err != nil {
		if out != nil {
			fmt.Fprintf(out, "%s: %v\n", fs.Name(), err)
			fs.Usage()
		}
		return exitCode(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitCode(2)
	}
	return nil
}
