package drift

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// finding is a step that touches what a MachineConfig owns.
type finding struct {
	Plan, Step, Change, Path string
	Owners                   []owner
	Detail                   string // for a unit: the state the step leaves and the one the MC wants
	Allowed                  string // why the MCD does not see it, when an exception holds
}

func (f finding) String() string {
	var mcs []string
	for _, o := range f.Owners {
		mcs = append(mcs, fmt.Sprintf("MachineConfig %s (%s, %s)", o.MachineConfig, o.Kind, o.Source))
	}
	s := fmt.Sprintf("%s plan, step %s: changes %s, and %s is owned by %s", f.Plan, f.Step, f.Change, f.Path, strings.Join(mcs, "; "))
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// check lists every finding of the plans against the owners, the seal's first: drift (no
// exception holds) and allowed (an exception's condition holds, with its reason). An error
// is a Changes entry the check cannot place.
func check(o owners, p plans) (drift, allowed []finding, err error) {
	for _, name := range []string{planSeal, planSite} {
		for _, s := range p[name] {
			for _, entry := range s.Changes {
				c, err := classify(entry)
				if err != nil {
					return nil, nil, fmt.Errorf("%s plan, step %s: %w", name, s.Name, err)
				}
				for _, f := range stepFindings(o, name, s, entry, c) {
					if why, ok := excepted(f, p); ok {
						f.Allowed = why
						allowed = append(allowed, f)
					} else {
						drift = append(drift, f)
					}
				}
			}
		}
	}
	return drift, allowed, nil
}

// stepFindings are the owned paths one Changes entry reaches. A path (file, glob, cleared
// directory) reaches every MachineConfig path it covers: whatever the step writes or
// removes there, checkFileContentsAndMode compares exact contents and mode and fails on a
// missing file. A unit reaches the MachineConfig units of that name whose enabled state
// checkUnitEnabled checks, when the step leaves another state.
func stepFindings(o owners, plan string, s steps.Step, entry string, c change) []finding {
	var out []finding
	for _, changed := range c.Paths {
		for _, p := range sortedKeys(o) {
			if steps.Covers(changed, p) {
				out = append(out, finding{Plan: plan, Step: s.Name, Change: entry, Path: p, Owners: o[p]})
			}
		}
	}
	if c.Unit == "" {
		return out
	}
	p := systemdDir + c.Unit
	var wanting []owner
	for _, ow := range o[p] {
		if ow.Kind == "unit" && ow.Enabled != nil {
			wanting = append(wanting, ow)
		}
	}
	if len(wanting) == 0 {
		return out
	}
	verb, want := unitVerb(s, c.Unit), map[bool]string{true: "enable", false: "disable"}[*wanting[0].Enabled]
	if verb == want {
		return out
	}
	detail := fmt.Sprintf("the step runs %q, the MachineConfig wants the unit %sd (checkUnitEnabled)", strings.Join(s.Argv, " "), want)
	return append(out, finding{Plan: plan, Step: s.Name, Change: entry, Path: p, Owners: wanting, Detail: detail})
}

// exception is a finding the MCD does not see, and the condition that keeps it so: the
// condition reads the plans, so a change that breaks it turns the finding into drift.
type exception struct {
	plan, step string
	paths      []string // the MachineConfig paths it covers; none: every path the step reaches
	why        string   // the upstream behaviour that hides it from the MCD, cited
	holds      func(p plans) error
}

func excepted(f finding, p plans) (string, bool) {
	for _, e := range exceptions {
		if e.plan != f.Plan || e.step != f.Step || len(e.paths) > 0 && !slices.Contains(e.paths, f.Path) {
			continue
		}
		if err := e.holds(p); err != nil {
			return "", false
		}
		return e.why, true
	}
	return "", false
}

// report is the findings, one a line, sorted; allowed ones are grouped under the reason
// the MCD never sees them.
func report(fs []finding) string {
	byWhy := map[string][]string{}
	for _, f := range fs {
		byWhy[f.Allowed] = append(byWhy[f.Allowed], f.String())
	}
	var b strings.Builder
	for _, why := range sortedKeys(byWhy) {
		if why != "" {
			fmt.Fprintf(&b, "because %s:\n", why)
		}
		lines := byWhy[why]
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}
