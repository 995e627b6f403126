package blueprints

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/agent"
	"github.com/snofactory/snofactory/seeds/node/reconfigure"
	"github.com/snofactory/snofactory/seeds/node/steps"
)

//go:generate go test -run TestNodeChangesUpToDate . -args -update

// TestNodeChangesUpToDate keeps nodechanges.json equal to the node paths of the plans an
// OpenShift seed goes through (the seal, and the site hook for a site config with every
// field), so that validate refuses exactly what those plans change.
func TestNodeChangesUpToDate(t *testing.T) {
	nc := nodeChanges{}
	add := func(plan string, ss []steps.Step) {
		for _, s := range ss {
			var paths []string
			for _, c := range s.Changes {
				if strings.HasPrefix(c, "/") {
					paths = append(paths, c)
				}
			}
			if len(paths) > 0 {
				nc.Steps = append(nc.Steps, plannedStep{Plan: plan, Step: s.Name, Paths: paths})
			}
		}
	}
	add("seal", agent.Sealer{Request: wire.SealRequest{Version: 1, Target: oskind.OpenShift}}.Plan())
	site, err := reconfigure.Plan(reconfigure.Options{Target: oskind.OpenShift, Root: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	add("site", site)
	for _, r := range reconfigure.MachineConfigRewrites() {
		nc.Rewrites = append(nc.Rewrites, rewrite{Path: r.Path, Steps: r.Steps})
	}
	want, err := json.MarshalIndent(nc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile("nodechanges.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, err := os.ReadFile("nodechanges.json"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("nodechanges.json is out of date (%v): run go generate ./blueprints", err)
	}
	if !bytes.Equal(nodeChangesJSON, want) {
		t.Fatal("the embedded nodechanges.json differs from the file: rebuild")
	}
}
