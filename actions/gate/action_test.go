package gateaction

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// action.yml is a composite action with the documented inputs and the
// eight outputs, and its inputs reach the script only through env:.
func TestActionMetadata(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Inputs map[string]struct {
			Required bool    `yaml:"required"`
			Default  *string `yaml:"default"`
		} `yaml:"inputs"`
		Outputs map[string]struct {
			Value string `yaml:"value"`
		} `yaml:"outputs"`
		Runs struct {
			Using string `yaml:"using"`
			Steps []struct {
				Shell string            `yaml:"shell"`
				Run   string            `yaml:"run"`
				Uses  string            `yaml:"uses"`
				Env   map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"runs"`
	}
	if err := yaml.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" || len(a.Runs.Steps) != 1 || a.Runs.Steps[0].Uses != "" || a.Runs.Steps[0].Shell != "bash" {
		t.Fatalf("runs = %+v, want one composite bash step and no other action", a.Runs)
	}
	step := a.Runs.Steps[0]
	if strings.Contains(step.Run, "${{") {
		t.Errorf("run interpolates an expression: %q", step.Run)
	}
	for input, variable := range map[string]string{"server": "OPSBOT_SERVER", "token": "OPSBOT_TOKEN", "timeout": "OPSBOT_TIMEOUT",
		"audience": "OPSBOT_AUDIENCE", "strict": "OPSBOT_STRICT"} {
		if got := step.Env[variable]; got != "${{ inputs."+input+" }}" {
			t.Errorf("env %s = %q, want the %s input", variable, got, input)
		}
	}
	if !a.Inputs["server"].Required {
		t.Error("server is not required")
	}
	for input, want := range map[string]string{"token": "", "timeout": "60", "audience": "", "strict": "false"} {
		if d := a.Inputs[input].Default; d == nil || *d != want || a.Inputs[input].Required {
			t.Errorf("input %s: default %v, want optional with %q", input, d, want)
		}
	}
	var outs []string
	for name, o := range a.Outputs {
		outs = append(outs, name)
		if o.Value != "${{ steps.gate.outputs."+name+" }}" {
			t.Errorf("output %s = %q", name, o.Value)
		}
	}
	slices.Sort(outs)
	want := slices.Clone(outputNames)
	slices.Sort(want)
	if !slices.Equal(outs, want) {
		t.Errorf("outputs = %v, want %v", outs, want)
	}
}
