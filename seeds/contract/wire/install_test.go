package wire

import (
	"bytes"
	"strings"
	"testing"
)

// One seed gives one identity; another seed another; the UUID and the hash seed differ, and
// both are RFC 9562 version 8 UUIDs.
func TestFSIdentity(t *testing.T) {
	u1, h1 := FSIdentity("sha256:aa")
	u2, h2 := FSIdentity("sha256:aa")
	u3, h3 := FSIdentity("sha256:bb")
	if u1 != u2 || h1 != h2 {
		t.Errorf("one seed, two identities: %s %s, %s %s", u1, h1, u2, h2)
	}
	if u1 == u3 || h1 == h3 || u1 == h1 {
		t.Errorf("identities collide: %s %s, %s %s", u1, h1, u3, h3)
	}
	for _, u := range []string{u1, h1, u3, h3} {
		if !uuidPattern.MatchString(u) || u[14] != '8' || !strings.ContainsRune("89ab", rune(u[19])) {
			t.Errorf("%s is not a version 8 UUID", u)
		}
	}
}

// One lock gives one GPT layout, all its identities distinct; another lock other ones.
func TestGPTIdentity(t *testing.T) {
	a, b := NewGPTIdentity("sha256:aa"), NewGPTIdentity("sha256:bb")
	if *a != *NewGPTIdentity("sha256:aa") {
		t.Errorf("one lock, two layouts: %+v", a)
	}
	u, h := FSIdentity("sha256:aa")
	seen := map[string]bool{u: true, h: true}
	for _, v := range []string{a.Disk, a.ESP, a.Root, a.ContainerStorage, a.FSUUID, a.FSHashSeed, b.Disk, b.ESP, b.Root, b.ContainerStorage, b.FSUUID, b.FSHashSeed} {
		if seen[v] || !uuidPattern.MatchString(v) {
			t.Errorf("%s repeats or is no UUID", v)
		}
		seen[v] = true
	}
}

func TestEncodeInstallRequest(t *testing.T) {
	u, h := FSIdentity("sha256:aa")
	g := NewGPTIdentity("sha256:aa")
	for _, tc := range []struct {
		name string
		req  InstallRequest
		want string // the text before the padding; "" for a refused request
	}{
		{"with a time", InstallRequest{RootUUID: u, HashSeed: h, MkfsTime: 1700000000},
			"root_uuid=" + u + "\nhash_seed=" + h + "\nmkfs_time=1700000000\n"},
		{"the clock's time", InstallRequest{RootUUID: u, HashSeed: h}, "root_uuid=" + u + "\nhash_seed=" + h + "\n"},
		{"no hash seed", InstallRequest{RootUUID: u}, ""},
		{"an upper-case UUID", InstallRequest{RootUUID: strings.ToUpper(u), HashSeed: h}, ""},
		{"a line in the UUID", InstallRequest{RootUUID: u + "\nmkfs_time=1", HashSeed: h}, ""},
		{"a time before 1970", InstallRequest{RootUUID: u, HashSeed: h, MkfsTime: -1}, ""},
		{"container storage", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 5, Label: "var-lib-containers", StartMiB: 960}},
			"root_uuid=" + u + "\nhash_seed=" + h + "\ncs_number=5\ncs_label=var-lib-containers\ncs_start_mib=960\n"},
		{"container storage, one layout per lock", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 5, Label: "var-lib-containers", StartMiB: 960}, GPT: g},
			"root_uuid=" + u + "\nhash_seed=" + h + "\ncs_number=5\ncs_label=var-lib-containers\ncs_start_mib=960\ngpt_disk_guid=" + g.Disk + "\ngpt_esp_guid=" + g.ESP +
				"\ngpt_root_guid=" + g.Root + "\ncs_guid=" + g.ContainerStorage + "\ncs_uuid=" + g.FSUUID + "\ncs_hash_seed=" + g.FSHashSeed + "\n"},
		{"a GPT identity that is no UUID", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 5, Label: "x", StartMiB: 960}, GPT: &GPTIdentity{Disk: "x\nroot_uuid=y"}}, ""},
		{"container storage on the root's number", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 2, Label: "x", StartMiB: 960}}, ""},
		{"a line in the label", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 5, Label: "x\nroot_uuid=y", StartMiB: 960}}, ""},
		{"no start", InstallRequest{RootUUID: u, HashSeed: h, ContainerStorage: &InstallPartition{Number: 5, Label: "x"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeInstallRequest(tc.req)
			if tc.want == "" {
				if err == nil {
					t.Errorf("encoded %q", bytes.TrimRight(b, "\x00"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != InstallRequestSize || len(b)%512 != 0 {
				t.Errorf("the disk is %d bytes", len(b))
			}
			if text := string(bytes.TrimRight(b, "\x00")); text != tc.want {
				t.Errorf("request %q, want %q", text, tc.want)
			}
		})
	}
}
