package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
)

// site-config validate --seed and seed write --site refuse a site the seed cannot serve
// with exit 2, every problem naming both values and the fix, and seed write refuses it
// before a byte of the target changes; a site that fits validates and is written.
func TestSiteFitCommands(t *testing.T) {
	withFit := func(rec *seedfit.Record) string {
		dir := filepath.Join(t.TempDir(), "seed")
		m := seedtest.Write(t, dir, seedtest.Options{Formats: []string{seed.FormatRaw}})
		m.SiteFit = rec
		if err := seed.WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	v4 := withFit(&seedfit.Record{Version: 1, IPFamilies: []string{seedfit.IPv4}})
	misfit := withFit(&seedfit.Record{Version: 1, IPFamilies: []string{seedfit.IPv4, seedfit.IPv6}, FIPS: true})
	site := "../../blueprints/demo/site.yaml" // static IPv4, no FIPS
	problems := []string{
		"spec.network: the site network is single-stack IPv4 but the seed was built dual-stack (IPv4+IPv6)",
		"give the site IPv4 and IPv6 addresses, or build the seed with a single-stack IPv4 machine network",
		"spec.fips: the site does not ask for FIPS mode but the seed was built in it",
		"cannot serve site demo-site",
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		want  []string // on stderr
		write bool     // the target holds the seed afterwards
	}{
		{"validate: fits", []string{"site-config", "validate", site, "--seed", v4}, exitOK, nil, false},
		{"validate: misfit", []string{"site-config", "validate", site, "--seed", misfit}, exitBadInput, problems, false},
		{"validate: no seed there", []string{"site-config", "validate", site, "--seed", "./no-such-seed"}, exitBadInput, []string{"no such seed directory"}, false},
		{"write: misfit", []string{"seed", "write", "--image", misfit, "--site", site}, exitBadInput, problems, false},
		{"write: an invalid site", []string{"seed", "write", "--image", v4, "--site", "../../seeds/site/siteconfig/testdata/pull-secret.json"}, exitBadInput, []string{"is invalid"}, false},
		{"write: fits", []string{"seed", "write", "--image", v4, "--site", site}, exitOK, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			target := filepath.Join(t.TempDir(), "disk.img")
			old := []byte("the disk as it was")
			if args[0] == "seed" {
				if err := os.WriteFile(target, old, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--device", target)
			}
			code, stdout, stderr := runMain(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if args[0] != "seed" {
				return
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if changed := !bytes.Equal(got, old); changed != tc.write {
				t.Errorf("target changed: %v, want %v", changed, tc.write)
			}
		})
	}
}
