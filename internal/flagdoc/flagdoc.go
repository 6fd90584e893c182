// Package flagdoc prints a flag.FlagSet's flags as a Go operator expects to
// type them, with two dashes (--config FILE), where the flag package prints
// one (-config string).
package flagdoc

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// PrintDefaults writes every flag of fs, sorted by name: "  --name TYPE",
// then the usage on the next line, with the default when it is not the
// zero value. A back-quoted word in the usage names the argument, as in
// the flag package ("the `FILE` to read" prints "--config FILE").
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		var b strings.Builder
		fmt.Fprintf(&b, "  --%s", f.Name)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZero(f.DefValue) {
			if name == "string" {
				fmt.Fprintf(&b, " (default %q)", f.DefValue)
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
}

func isZero(def string) bool {
	switch def {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
