package main

import (
	"github.com/SemiAnalysisAI/opsbot/commands"
	"github.com/SemiAnalysisAI/opsbot/commands/help"
	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/commands/reuse"
	"github.com/SemiAnalysisAI/opsbot/commands/stage"
	"github.com/SemiAnalysisAI/opsbot/config"
	"github.com/SemiAnalysisAI/opsbot/events"
	"github.com/SemiAnalysisAI/opsbot/seq"
)

// The commands' own configuration sections, registered before any
// configuration is read.
func init() {
	config.RegisterSection(merge.ConfigSection)
}

// commandSet is the handlers of the commands opsbot runs: the server and
// the tests (and `opsbot parse`) share this one list. A new command is a
// package under commands/, a field here and a line in specs (and in kinds
// when it steps a sequence).
type commandSet struct {
	pins   *reuse.Handler
	stager *stage.Handler
	merger *merge.Handler
}

// specs are the commands, in the order /opsbot help lists them.
func (c commandSet) specs() []commands.Spec {
	return []commands.Spec{
		reuse.Spec(c.pins),
		merge.Spec(c.merger),
		stage.Spec(c.stager),
		help.Spec(),
	}
}

// kinds are the kinds of sequence the commands step, each declared by its
// command's package.
func (c commandSet) kinds() []seq.Kind {
	return []seq.Kind{stage.Kind(c.stager), merge.Kind(c.merger)}
}

// inert is the set with handlers that reach nothing: what the commands
// are, not what they do.
func inert() commandSet {
	return commandSet{pins: &reuse.Handler{}, stager: &stage.Handler{}, merger: &merge.Handler{}}
}

// grammar is the registry for reading comments only (opsbot parse).
func grammar() *commands.Registry { return commands.MustRegistry(inert().specs()...) }

// usedEvents are the webhook events opsbot uses with its commands: the
// App subscribes to them, and the metrics count them.
func usedEvents() []string { return events.Used(inert().kinds()...) }
