package blueprints

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/node/steps"
)

// nodeChangesJSON is the node paths the seal and the site hook change, step by step, and
// the MachineConfig-owned files the site rewrites without drift. It is generated from the
// plans themselves (agent.Sealer.Plan, reconfigure.Plan, reconfigure.MachineConfigRewrites)
// by TestNodeChangesUpToDate, so the list is not kept twice; the node packages are not
// imported here because they pull the whole container stack into every blueprint reader.
//
//go:embed nodechanges.json
var nodeChangesJSON []byte

// nodeChanges is nodeChangesJSON decoded.
type nodeChanges struct {
	Steps    []plannedStep `json:"steps"`
	Rewrites []rewrite     `json:"rewrites"`
}

// plannedStep is one step of a plan ("seal" or "site") with the node paths it changes.
type plannedStep struct {
	Plan  string   `json:"plan"`
	Step  string   `json:"step"`
	Paths []string `json:"paths"`
}

// rewrite is a MachineConfig-owned path the named site steps write while recert rewrites
// the MachineConfig copies alike, so the machine-config daemon sees no difference.
type rewrite struct {
	Path  string   `json:"path"`
	Steps []string `json:"steps"`
}

// stepHints say, for a step that changes a node file, where that file comes from instead.
var stepHints = map[string]string{
	"network":       "the site config sets the node's network (spec.network)",
	"dns":           "the site config sets the node's DNS (spec.dns)",
	"hostname":      "the site config sets the hostname (spec.hostname)",
	"ntp":           "the site config sets the time servers (spec.ntp)",
	"dnsmasq":       "the site hook points the node's dnsmasq at the renamed cluster",
	"ssh-host-keys": "recert replaces the SSH host keys at the site",
	"factory-etc":   "the seal leaves the factory's copy out of the seed, as lifecycle-agent does",
	"machine-id":    "the seal empties it so that the site's boot makes a new one",
}

// owners are the seal and site steps that change the node path p and would make the
// machine-config daemon find a MachineConfig's file missing or different.
func (nc nodeChanges) owners(p string) []plannedStep {
	var out []plannedStep
	for _, s := range nc.Steps {
		if !slices.ContainsFunc(s.Paths, func(c string) bool { return steps.Covers(c, p) }) {
			continue
		}
		if slices.ContainsFunc(nc.Rewrites, func(r rewrite) bool { return steps.Covers(r.Path, p) && slices.Contains(r.Steps, s.Step) }) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// ownedProblem says what is wrong with a MachineConfig (named mc) owning p, which the
// steps change, and what to do.
func ownedProblem(mc, p string, by []plannedStep) (msg, hint string) {
	var names []string
	for _, s := range by {
		names = append(names, fmt.Sprintf("the %s's %s step", s.Plan, s.Step))
	}
	names = slices.Compact(names)
	verb := "changes"
	if len(names) > 1 {
		verb = "change"
		names = append(names[:len(names)-2], names[len(names)-2]+" and "+names[len(names)-1])
	}
	msg = fmt.Sprintf("MachineConfig %s owns %s, which %s %s: the machine-config daemon would find it differing from the MachineConfig and degrade the pool at the site (machine-config-operator pkg/daemon/on_disk_validation.go checkV3Files)",
		mc, p, strings.Join(names, ", "), verb)
	hint = "remove this file from the MachineConfig"
	// The site's reason first: it names where the value comes from instead.
	for _, plan := range []string{"site", "seal"} {
		for _, s := range by {
			if h, ok := stepHints[s.Step]; ok && s.Plan == plan {
				return msg, h + "; " + hint
			}
		}
	}
	return msg, hint
}

// ignitionPaths are the node paths an Ignition config (a MachineConfig's spec.config)
// owns that the machine-config daemon compares with the disk: files, and the units and
// drop-ins it writes under /etc/systemd/system.
func ignitionPaths(cfg []byte) ([]string, error) {
	var ign struct {
		Storage struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		} `json:"storage"`
		Systemd struct {
			Units []struct {
				Name    string `json:"name"`
				Dropins []struct {
					Name string `json:"name"`
				} `json:"dropins"`
			} `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(cfg, &ign); err != nil {
		return nil, fmt.Errorf("reading the Ignition config: %w", err)
	}
	var out []string
	for _, f := range ign.Storage.Files {
		out = append(out, f.Path)
	}
	for _, u := range ign.Systemd.Units {
		out = append(out, "/etc/systemd/system/"+u.Name)
		for _, d := range u.Dropins {
			out = append(out, "/etc/systemd/system/"+u.Name+".d/"+d.Name)
		}
	}
	return out, nil
}

// loadNodeChanges decodes the embedded plans' node paths.
func loadNodeChanges() (nodeChanges, error) {
	var nc nodeChanges
	if err := json.Unmarshal(nodeChangesJSON, &nc); err != nil {
		return nc, fmt.Errorf("the embedded seal and site plans: %w", err)
	}
	return nc, nil
}
