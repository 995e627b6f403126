package render

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestContainerStorageMachineConfig: the partition's MachineConfig, through Butane and the
// Ignition spec of each release, makes partition Number named Label from StartMiB to the
// disk's end, XFS on it, and the mount unit lifecycle-agent reads (What= the partlabel).
func TestContainerStorageMachineConfig(t *testing.T) {
	cs := ContainerStorage{StartMiB: 81920, Label: "var-lib-containers", Number: 5}
	for _, tc := range []struct{ variant, ign string }{{"4.14.0", "3.4.0"}, {"4.19.0", "3.5.0"}} {
		t.Run(tc.variant, func(t *testing.T) {
			m, rep, err := containerStorageManifest(tc.variant, "/dev/vda", cs)
			if err != nil {
				t.Fatal(err)
			}
			raw := assertMachineConfig(t, "container-storage", m.data, tc.ign)
			var ign struct {
				Storage struct {
					Disks []struct {
						Device     string
						Partitions []struct {
							Label    *string
							Number   int
							StartMiB *int64
							SizeMiB  *int64
						}
					}
					Filesystems []struct {
						Device, Format, Path string
						MountOptions         []string
						WipeFilesystem       *bool
					}
				}
				Systemd struct {
					Units []struct {
						Name     string
						Enabled  *bool
						Contents *string
					}
				}
			}
			if err := json.Unmarshal(raw, &ign); err != nil {
				t.Fatal(err)
			}
			d := ign.Storage.Disks
			if len(d) != 1 || d[0].Device != "/dev/vda" || len(d[0].Partitions) != 1 {
				t.Fatalf("disks %+v", d)
			}
			p := d[0].Partitions[0]
			if p.Number != 5 || p.Label == nil || *p.Label != "var-lib-containers" || p.StartMiB == nil || *p.StartMiB != 81920 || p.SizeMiB == nil || *p.SizeMiB != 0 {
				t.Errorf("partition %+v", p)
			}
			fs := ign.Storage.Filesystems
			if len(fs) != 1 || fs[0].Device != rep.Device || fs[0].Format != "xfs" || fs[0].Path != "/var/lib/containers" || !strings.Contains(strings.Join(fs[0].MountOptions, ","), "prjquota") {
				t.Errorf("filesystems %+v", fs)
			}
			var unit string
			for _, u := range ign.Systemd.Units {
				if u.Name == ContainerStorageMountUnit && u.Contents != nil && u.Enabled != nil && *u.Enabled {
					unit = *u.Contents
				}
			}
			for _, w := range []string{"What=/dev/disk/by-partlabel/var-lib-containers", "Where=/var/lib/containers", "Type=xfs", "RequiredBy=local-fs.target"} {
				if !strings.Contains(unit, w) {
					t.Errorf("%s lacks %q:\n%s", ContainerStorageMountUnit, w, unit)
				}
			}
			if rep.Device != "/dev/disk/by-partlabel/var-lib-containers" || rep.MachineConfig != m.info.Name || m.info.Concern != "container-storage" {
				t.Errorf("report %+v, manifest %+v", rep, m.info)
			}
		})
	}
}

func TestContainerStorageRefused(t *testing.T) {
	for _, tc := range []struct {
		name, disk string
		cs         ContainerStorage
		want       string
	}{
		{"no disk", "", ContainerStorage{StartMiB: 1, Label: "x", Number: 5}, "install disk"},
		{"label", "/dev/vda", ContainerStorage{StartMiB: 1, Label: "a b", Number: 5}, "label"},
		{"RHCOS's root", "/dev/vda", ContainerStorage{StartMiB: 1, Label: "x", Number: 4}, "partition number 4"},
		{"start", "/dev/vda", ContainerStorage{Label: "x", Number: 5}, "start 0 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := containerStorageManifest("4.16.0", tc.disk, tc.cs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ...%s...", err, tc.want)
			}
		})
	}
}

// The partition's label reaches the stage's output record, which the seal turns into the
// seed's record of what a site must match.
func TestContainerStorageRecord(t *testing.T) {
	rep := &Report{Target: "openshift", ContainerStorage: &ContainerStorageReport{ContainerStorage: ContainerStorage{Label: "varlibcontainers"}}}
	if got := record(rep).ContainerStorageLabel; got != "varlibcontainers" {
		t.Errorf("record label %q", got)
	}
	if got := record(&Report{Target: "openshift"}).ContainerStorageLabel; got != "" {
		t.Errorf("no partition, record label %q", got)
	}
}
