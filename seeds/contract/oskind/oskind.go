// Package oskind names the operating system a seed is built for. Every package that
// branches on it (the blueprint schema, the stages, the seed manifest, the node agent and
// the reconfiguration hook) shares this one type, so a new target is added in one place.
package oskind

import (
	"fmt"
	"strings"
)

// Kind is what a seed carries: a single-node OpenShift cluster or a plain CoreOS-style OS.
type Kind string

const (
	// OpenShift is a single-node OpenShift cluster installed from a release image.
	OpenShift Kind = "openshift"
	// CoreOS is a CoreOS-style OS configured by Ignition: appliances, and the conformance
	// OS the demo and the tests run on.
	CoreOS Kind = "coreos"
)

// All lists every target, in the order help text shows them.
func All() []Kind { return []Kind{OpenShift, CoreOS} }

// Parse returns the target s names, or an error that lists the valid ones.
func Parse(s string) (Kind, error) {
	for _, t := range All() {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown target %q: use %s", s, Names())
}

// Names is the valid targets joined for messages and flag help, as "openshift|coreos".
func Names() string {
	names := make([]string, 0, len(All()))
	for _, t := range All() {
		names = append(names, string(t))
	}
	return strings.Join(names, "|")
}

// String returns the target's name.
func (t Kind) String() string { return string(t) }

// Set parses a command-line flag's value, so a *Kind is a flag.Value (and a pflag.Value).
func (t *Kind) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Type names the flag's value in help text.
func (*Kind) Type() string { return "target" }

// IsOpenShift reports whether t is the OpenShift target.
func (t Kind) IsOpenShift() bool { return t == OpenShift }
