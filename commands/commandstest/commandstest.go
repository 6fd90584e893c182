// Package commandstest gives tests a registry of opsbot's commands. It is
// linked into no binary (go list -deps ./cmd/opsbot shows it absent).
package commandstest

import (
	"opsbot/commands"
	"opsbot/commands/help"
	"opsbot/commands/reuse"
	"opsbot/commands/stage"
)

// Registry is a registry of opsbot's own commands in the server's order
// (cmd/opsbot's commandSpecs), run by pins and stager; nil handlers reach
// nothing, for tests that only read comments.
func Registry(pins *reuse.Handler, stager *stage.Handler) *commands.Registry {
	if pins == nil {
		pins = &reuse.Handler{}
	}
	if stager == nil {
		stager = &stage.Handler{}
	}
	return commands.MustRegistry(reuse.Spec(pins), stage.Spec(stager), help.Spec())
}
