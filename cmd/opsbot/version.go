package main

import (
	"runtime"
	"runtime/debug"
)

// fullVersion is opsbot's version: the one set at build time with
// -ldflags "-X main.version=...", else the module version `go install`
// records, else "dev" with the commit the binary was built from.
func fullVersion() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v, dirty := version, false
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			v += "+" + s.Value[:12]
		case s.Key == "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		v += "-dirty"
	}
	return v
}

// commit is the commit opsbot was built from, set at build time with
// -ldflags "-X main.commit=..." (.ci/build-release, the image); else the
// one the Go toolchain records ("unknown" without).
var commit = ""

// fullCommit is the commit opsbot was built from.
func fullCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// versionLine is what `opsbot --version` prints.
func versionLine() string {
	return "opsbot " + fullVersion() + " (commit " + fullCommit() + ", " + runtime.Version() + ")"
}
