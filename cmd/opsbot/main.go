// Command opsbot is the chat-ops bot of a benchmark repository's pull
// requests: `opsbot serve` runs the server, `opsbot gate` is the step a
// workflow runs, and the other subcommands are the operator's tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if code, ok := err.(exitCode); ok {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "opsbot:", err)
		os.Exit(1)
	}
}
