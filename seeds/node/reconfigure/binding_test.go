package reconfigure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// A medium bound to a seed and a machine is applied there and refused anywhere else, with
// the reason on the console and in the reports, and the node left as it was: a signed
// medium made for one site cannot be replayed at another.
func TestBoundMedia(t *testing.T) {
	bound := func(seed, serial string) func(*siteconfig.SiteConfig) {
		return func(sc *siteconfig.SiteConfig) {
			sc.Spec.Binding = &siteconfig.Binding{Seed: seed, MachineSerial: serial}
		}
	}
	for _, tc := range []struct {
		name         string
		edit         func(*siteconfig.SiteConfig)
		seed, serial string // the node's; serial "-" is a machine that reports none
		refusal      string
	}{
		{"bound here", bound("du-edge", "CZ2345"), "du-edge", "CZ2345\n", ""},
		{"bound to the seed only", bound("du-edge", ""), "du-edge", "-", ""},
		{"not bound", nil, "du-edge", "CZ2345", ""},
		{"another seed", bound("du-core", "CZ2345"), "du-edge", "CZ2345", `it was made for seed "du-core", and this is seed "du-edge"`},
		{"a seed that records no name", bound("du-edge", ""), "", "CZ2345", "this seed records no name"},
		{"another machine", bound("du-edge", "CZ2345"), "du-edge", "CZ9999", `made for the machine with serial number "CZ2345", and this machine's is "CZ9999"`},
		{"a machine without a serial", bound("", "CZ2345"), "du-edge", "-", "this machine reports none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
			o := h.options(oskind.CoreOS, medium(t, "dhcp.yaml", tc.edit))
			o.SeedName = tc.seed
			o.MachineSerialFile = filepath.Join(t.TempDir(), "product_serial")
			if tc.serial != "-" {
				os.WriteFile(o.MachineSerialFile, []byte(tc.serial), 0o444)
			}
			o.MediumTimeout = 10 * time.Second
			before := tree(t, h.root)
			res, err := Run(context.Background(), o)
			if tc.refusal == "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, h.console.String())
				}
				if h.read(t, "/etc/hostname") != "edge-dhcp\n" {
					t.Error("the bound site config was not applied")
				}
				m, _ := h.rep.step(StepMedium, wire.StatusOK)
				if tc.edit != nil && m.Details["boundToSeed"] != "du-edge" {
					t.Errorf("medium step details %v", m.Details)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			if !errors.Is(err, siteconfig.ErrRefused) || !errors.Is(err, siteconfig.ErrBoundElsewhere) {
				t.Errorf("error %v does not wrap ErrRefused and ErrBoundElsewhere", err)
			}
			for what, got := range map[string]string{"error": err.Error(), "console": h.console.String(), "final report": h.rep.final().Details[wire.DetailError]} {
				if !strings.Contains(got, tc.refusal) || !strings.Contains(got, "--for-serial") {
					t.Errorf("%s lacks %q and the remedy:\n%s", what, tc.refusal, got)
				}
			}
			if !strings.Contains(h.console.String(), "waiting for a site-config medium made for this seed and this machine") {
				t.Errorf("the hook did not wait for another medium:\n%s", h.console.String())
			}
			if len(h.cmds.lines) > 0 {
				t.Errorf("commands ran on the node: %q", h.cmds.lines)
			}
			if after := tree(t, h.root); len(after) != len(before) {
				t.Errorf("the node changed: %d files before, %d after", len(before), len(after))
			}
		})
	}
}
