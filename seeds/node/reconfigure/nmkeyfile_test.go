package reconfigure

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

var updateKeyfiles = flag.Bool("update-keyfiles", false, "rewrite testdata/nm-bond-vlan")

// TestNMKeyfilesBondVLAN compares the profiles for the bond-and-VLAN site with the
// reviewed keyfiles in testdata/nm-bond-vlan (one file per profile, as NetworkManager
// reads them).
func TestNMKeyfilesBondVLAN(t *testing.T) {
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "bond-vlan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kfs, err := NMKeyfiles(sc.Spec.Network)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "nm-bond-vlan")
	var names []string
	for _, k := range kfs {
		names = append(names, k.FileName())
		p := filepath.Join(dir, k.FileName())
		if *updateKeyfiles {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, k.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(k.Data) != string(want) {
			t.Errorf("%s:\n%s\nwant:\n%s", k.FileName(), k.Data, want)
		}
	}
	if got := strings.Join(names, " "); got != "eno1.nmconnection eno2.nmconnection bond0.nmconnection bond0.100.nmconnection bond0.200.nmconnection" {
		t.Errorf("profiles %s", got)
	}
}

// TestUUIDv5 checks the stable profile UUID against an independent implementation:
// Python's uuid.uuid5(uuid.NAMESPACE_URL, "http://python.org/").
func TestUUIDv5(t *testing.T) {
	if got, want := uuidV5URL("http://python.org/"), "4c565f0d-3f5a-5890-b41b-20cf47701c5e"; got != want {
		t.Errorf("uuidV5URL = %s, want %s", got, want)
	}
}
