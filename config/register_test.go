package config_test

import (
	"os"
	"testing"

	"github.com/SemiAnalysisAI/opsbot/app"
)

// TestMain registers the commands' own sections, as the program does
// before it reads a configuration: the example configuration and the
// reference show them.
func TestMain(m *testing.M) {
	app.RegisterSections()
	os.Exit(m.Run())
}
