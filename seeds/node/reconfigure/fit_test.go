package reconfigure

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/fit"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// A site the seed cannot serve is refused before the first step: no command runs, no file
// changes, and the console and the reports name both values and the fix. A seed sealed
// before the record, or a site that matches it, is applied.
func TestMisfitSiteRefused(t *testing.T) {
	v4 := []string{seedfit.IPv4}
	for _, tc := range []struct {
		name    string
		rec     *seedfit.Record
		edit    func(*siteconfig.SiteConfig)
		refusal []string
	}{
		{"no record", nil, func(sc *siteconfig.SiteConfig) { sc.Spec.FIPS = true }, nil},
		{"fits", &seedfit.Record{Version: 1, IPFamilies: v4}, nil, nil},
		{"IPv6 seed, IPv4 site", &seedfit.Record{Version: 1, IPFamilies: []string{seedfit.IPv6}}, nil,
			[]string{"the site network is single-stack IPv4 but the seed was built single-stack IPv6"}},
		{"FIPS site, seed without", &seedfit.Record{Version: 1, IPFamilies: v4}, func(sc *siteconfig.SiteConfig) { sc.Spec.FIPS = true },
			[]string{"spec.fips: the site asks for FIPS mode", "spec.openshift.fips: true"}},
		{"both, and another seed version", &seedfit.Record{Version: 1, IPFamilies: []string{seedfit.IPv4, seedfit.IPv6}, FIPS: true, ReleaseVersion: "4.18.3"},
			func(sc *siteconfig.SiteConfig) { sc.Spec.SeedVersion = "4.18.5" },
			[]string{"spec.network: ", "spec.fips: the site does not ask for FIPS mode", "expects seed version 4.18.5 but the seed carries 4.18.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
			o := h.options(oskind.CoreOS, medium(t, "dhcp.yaml", tc.edit))
			o.Fit = tc.rec
			o.MediumTimeout = 10 * time.Second
			before := tree(t, h.root)
			res, err := Run(context.Background(), o)
			if tc.refusal == nil {
				if err != nil {
					t.Fatalf("%v\n%s", err, h.console.String())
				}
				if h.read(t, "/etc/hostname") != "edge-dhcp\n" {
					t.Error("the site config was not applied")
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", res)
			}
			if !errors.Is(err, siteconfig.ErrRefused) || !errors.Is(err, fit.ErrMisfit) {
				t.Errorf("error %v does not wrap ErrRefused and ErrMisfit", err)
			}
			for what, got := range map[string]string{"error": err.Error(), "console": h.console.String(), "final report": h.rep.final().Details[wire.DetailError]} {
				for _, w := range tc.refusal {
					if !strings.Contains(got, w) {
						t.Errorf("%s lacks %q:\n%s", what, w, got)
					}
				}
			}
			if !strings.Contains(h.console.String(), "waiting for a site-config medium for a site this seed can serve") {
				t.Errorf("the hook did not wait for another medium:\n%s", h.console.String())
			}
			for _, m := range h.rep.msgs {
				if m.Phase == wire.PhaseReconfigureStep && m.Details["step"] != StepMedium {
					t.Errorf("step %s ran: %+v", m.Details["step"], m)
				}
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

// The hook takes the seed's record from the sealed request the seal left on the node.
func TestFitFromSealedRequest(t *testing.T) {
	root := t.TempDir()
	rec := &seedfit.Record{Version: 1, IPFamilies: []string{seedfit.IPv4}, FIPS: true, ReleaseVersion: "4.18.3"}
	b, err := json.Marshal(wire.SealRequest{Version: wire.SealRequestVersion, Target: oskind.OpenShift, Seed: "du", Fit: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, wire.SealedFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, wire.SealedFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Root: root}
	if err := o.FromSealedRequest(false); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o.Fit, rec) {
		t.Errorf("Fit = %+v, want %+v", o.Fit, rec)
	}
}
