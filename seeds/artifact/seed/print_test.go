package seed_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
)

func TestManifestWriteFields(t *testing.T) {
	base := seed.Manifest{Name: "edge", Target: "openshift", ReleaseVersion: "4.18.1", Firmware: "uefi",
		BlueprintDigest: "sha256:b", LockDigest: "sha256:l", ReconfigurationAPIVersion: "v1",
		Created:    time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
		Validation: seed.Validation{Passed: 9, Skipped: 2, Warnings: 1},
		Images:     make([]seed.Image, 3),
		Disks:      []seed.Disk{{Format: "qcow2", File: "disk.qcow2", Size: 1 << 30, VirtualSize: 120 << 30, RawDigest: "sha256:r"}}}
	head := "Name:\tedge\nTarget:\topenshift 4.18.1\nFirmware:\tuefi\nCreated:\t2026-01-02T02:04:05Z\n" +
		"Blueprint:\tsha256:b\nLock:\tsha256:l\nReconfiguration API:\tv1\n" +
		"Validation:\t9 passed, 0 failed, 2 skipped, 1 warnings\nImages:\t3\n" +
		"Disk qcow2:\tdisk.qcow2, 1GiB stored, 120GiB raw, raw digest sha256:r\n"
	withCreds := base
	withCreds.Credentials = &seed.Credentials{File: "credentials.age", Recipients: []string{"age1a", "age1b"}}
	withFit := base
	withFit.SiteFit = &seedfit.Record{Version: 1, IPFamilies: []string{"ipv4", "ipv6"}, FIPS: true, ReleaseVersion: "4.18.1", ReleaseRegistry: "quay.io"}
	for _, tc := range []struct {
		name string
		m    seed.Manifest
		want string
	}{
		{"without credentials", base, head},
		{"with a site fit", withFit, strings.Replace(head, "Images:\t3\n", "Images:\t3\nSite fit:\tdual-stack (IPv4+IPv6), FIPS, no proxy, release 4.18.1 from quay.io\n", 1)},
		{"with credentials", withCreds, head + "Credentials:\tcredentials.age, for age1a, age1b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.m.WriteFields(&b)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
			if strings.Count(b.String(), "\t") != strings.Count(b.String(), "\n") {
				t.Errorf("every line is one Field:\\tvalue pair:\n%s", b.String())
			}
		})
	}
}

// seed.json is anyone's: a name, a file or a recipient holding an escape sequence or a
// newline is printed escaped, so it can neither drive the terminal nor forge a field.
func TestManifestWriteFieldsEscapes(t *testing.T) {
	m := seed.Manifest{Name: "edge\x1b[2J", Target: "openshift", ReleaseVersion: "4.18\nLock:\tforged",
		Disks:       []seed.Disk{{Format: "raw", File: "disk\r.raw"}},
		Credentials: &seed.Credentials{File: "c.age", Recipients: []string{"age1\a"}}}
	var b bytes.Buffer
	m.WriteFields(&b)
	out := b.String()
	for _, s := range []string{`Name:	"edge\x1b[2J"`, `"4.18\nLock:\tforged"`, `"disk\r.raw"`, `"age1\a"`} {
		if !strings.Contains(out, s) {
			t.Errorf("output does not hold %s:\n%s", s, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\r\a") || strings.Count(out, "\nLock:") != 1 {
		t.Errorf("a control character from seed.json reached the output:\n%q", out)
	}
}
