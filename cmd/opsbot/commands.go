package main

import (
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

// commandSpecs are the commands opsbot runs, in the order /opsbot help
// lists them. A new command is a package under commands/ and one line here.
func commandSpecs(pins *reuse.Handler, stager *stage.Handler) []commands.Spec {
	return []commands.Spec{
		reuse.Spec(pins),
		stage.Spec(stager),
		help.Spec(),
	}
}

// sequenceKinds are the kinds of sequence the commands step, each declared
// by its command's package.
func sequenceKinds(stager *stage.Handler) []seq.Kind {
	return []seq.Kind{stage.Kind(stager)}
}

// grammar is the registry for reading comments only (opsbot parse): the
// commands with handlers that reach nothing.
func grammar() *commands.Registry {
	return commands.MustRegistry(commandSpecs(&reuse.Handler{}, &stage.Handler{})...)
}
