package config_test

import (
	"os"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/commands/merge"
	"github.com/SemiAnalysisAI/opsbot/config"
)

// TestMain registers the commands' own sections, as the server's wiring
// does, before any configuration is read: the example configuration and
// the reference show them.
func TestMain(m *testing.M) {
	config.RegisterSection(merge.Section.Section())
	os.Exit(m.Run())
}
