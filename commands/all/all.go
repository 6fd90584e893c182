// Package all is the list of opsbot's commands: each one's module, built
// from what every command shares, in the order /opsbot help lists them.
// A new command is one line here. The server (app) and the tests
// (commands/commandstest) take this one list.
package all

import (
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/aftermerge"
	"github.com/SemiAnalysisAI/opsbot/commands/approve"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
)

// Modules are opsbot's commands, made from d.
func Modules(d commands.Deps) []commands.Module {
	return []commands.Module{
		reuse.Module(d),
		merge.Module(d),
		stage.Module(d),
		approve.Module(d),
		help.Module(d),
		aftermerge.Module(d),
		aftermerge.RecoverModule(d),
	}
}

// Check is the error a command's module would stop the server with beside
// opsbot's own (its buttons, with theirs, more than a check run holds; a
// verb or an identifier taken): a new command's own tests call it, so what
// would fail at the start fails there, naming the cause.
func Check(module func(commands.Deps) commands.Module) error {
	_, err := commands.RegistryOf(append(Modules(commands.Deps{}), module(commands.Deps{})))
	return err
}
