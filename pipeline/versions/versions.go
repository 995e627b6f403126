// Package versions names the code a binary was built from: snofactory's own version (for
// provenance, signatures and `snofactory version`), the agent's on a node named the same
// way, and the versions of the Go libraries stages record as their tools. (Not buildinfo,
// which would shadow debug/buildinfo where the agent reads another binary's.)
package versions

import (
	"runtime/debug"
	"strings"
)

// Module is the version of a Go module compiled into this binary ("unknown" in test
// binaries and builds without module information), for stages that record the libraries
// they used (UseTool) beside external tools.
func Module(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// Self is this snofactory's version: the main module's version and, for a build
// from a checkout, its VCS revision (with "+dirty" for uncommitted changes).
func Self() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return Of(bi)
}

// Of is the version Self gives for the binary bi describes, so another
// binary (the agent on a node) is named the same way.
func Of(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	// Go 1.24+ stamps the revision into a pseudo-version already (and +dirty with it).
	if rev != "" && !strings.Contains(v, rev) {
		v += " " + rev + dirty
	}
	return v
}
