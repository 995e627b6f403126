package blueprints

import (
	"strings"
	"testing"

	"github.com/snofactory/snofactory/blueprints/v1alpha1"
)

// withPartition is an openshift blueprint with spec.disk.containerStorage set to body (its
// lines indented under containerStorage) and an optional spec.vm.diskSize.
func withPartition(body, diskSize string) string {
	doc := openshift("") + "  disk:\n    containerStorage:" + body
	if diskSize != "" {
		doc += "  vm:\n    diskSize: " + diskSize + "\n"
	}
	return doc
}

// TestContainerStoragePartitionRefused: each rule on the partition names its field, at a
// position in the file, with a hint.
func TestContainerStoragePartitionRefused(t *testing.T) {
	dir := fixtureDir(t)
	tests := []struct {
		name, doc, path, msg string
		line                 int
	}{
		{"coreos target, root too small", coreos("  disk:\n    containerStorage: {start: 200M}\n"), "spec.disk.containerStorage.start", "the conformance OS's root needs at least 201MiB", 11},
		{"bare number is sectors", withPartition("\n      start: \"-40\"\n", ""), "spec.disk.containerStorage.start", "not a partition start", 14},
		{"unknown unit", withPartition("\n      start: -40GB\n", ""), "spec.disk.containerStorage.start", "not a partition start", 14},
		{"relative to default start", withPartition("\n      start: +40G\n", ""), "spec.disk.containerStorage.start", "not a partition start", 14},
		{"zero", withPartition("\n      start: 0G\n", ""), "spec.disk.containerStorage.start", "not a partition start", 14},
		{"bigger than the disk", withPartition("\n      start: -200G\n", ""), "spec.disk.containerStorage.start", "falls outside the 120GiB factory disk", 14},
		{"offset past the disk", withPartition("\n      start: 120G\n", ""), "spec.disk.containerStorage.start", "falls outside", 14},
		{"root too small", withPartition("\n      start: -40G\n", "60GiB"), "spec.disk.containerStorage.start", "RHCOS's root needs at least 25000MiB", 14},
		{"root too small, offset", withPartition("\n      start: 20G\n", ""), "spec.disk.containerStorage.start", "leaves the root 20GiB", 14},
		{"label too long", withPartition("\n      label: "+strings.Repeat("c", 37)+"\n", ""), "spec.disk.containerStorage.label", "has 37 characters; a GPT partition name has at most 36", 14},
		{"label with a slash", withPartition("\n      label: var/lib\n", ""), "spec.disk.containerStorage.label", "not a partition label", 14},
		{"label of RHCOS's root", withPartition("\n      label: root\n", ""), "spec.disk.containerStorage.label", "one of RHCOS's own partitions", 14},
		{"number over 128", withPartition("\n      number: 129\n", ""), "spec.disk.containerStorage.number", "between 1 and 128", 14},
		{"number of RHCOS's root", withPartition("\n      number: 4\n", ""), "spec.disk.containerStorage.number", "RHCOS's root partition", 14},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIn(t, dir, tc.doc)
			if err == nil {
				t.Fatalf("no error for\n%s", tc.doc)
			}
			var got []string
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line != tc.line || p.Col < 1 || p.Hint == "" {
						t.Errorf("at %d:%d with hint %q, want line %d and a hint", p.Line, p.Col, p.Hint, tc.line)
					}
					return
				}
				got = append(got, p.Path+": "+p.Message)
			}
			t.Errorf("want %s: ...%s..., got\n%s", tc.path, tc.msg, strings.Join(got, "\n"))
		})
	}
}

// TestContainerStoragePartitionDefaults: an empty block takes the image-based installer's
// defaults, and set fields are kept; the start is placed on the factory disk as
// lifecycle-agent places it, rounded down to a MiB.
func TestContainerStoragePartitionDefaults(t *testing.T) {
	dir := fixtureDir(t)
	tests := []struct {
		name, doc string
		want      v1alpha1.ContainerStorage
		startAt   v1alpha1.Size
	}{
		{"defaults", withPartition(" {}\n", ""), v1alpha1.ContainerStorage{Start: "-40G", Label: "var-lib-containers", Number: 5}, 80 * v1alpha1.GiB},
		{"set", withPartition("\n      start: 100G\n      label: varlibcontainers\n      number: 7\n", ""), v1alpha1.ContainerStorage{Start: "100G", Label: "varlibcontainers", Number: 7}, 100 * v1alpha1.GiB},
		{"lowercase unit, odd size", withPartition("\n      start: -1000001k\n", ""), v1alpha1.ContainerStorage{Start: "-1000001k", Label: "var-lib-containers", Number: 5}, 120*v1alpha1.GiB - 977*v1alpha1.MiB},
		{"label of 36", withPartition("\n      label: "+strings.Repeat("c", 36)+"\n", ""), v1alpha1.ContainerStorage{Start: "-40G", Label: strings.Repeat("c", 36), Number: 5}, 80 * v1alpha1.GiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bp, err := parseIn(t, dir, tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			cs := bp.Spec.Disk.ContainerStorage
			if cs == nil || *cs != tc.want {
				t.Fatalf("containerStorage = %+v, want %+v", cs, tc.want)
			}
			if at, ok := cs.StartBytes(bp.Spec.VM.DiskSize); !ok || at != tc.startAt {
				t.Errorf("starts at %s (%v), want %s", at, ok, tc.startAt)
			}
		})
	}
	bp, err := parseIn(t, dir, openshift(""))
	if err != nil {
		t.Fatal(err)
	}
	if bp.Spec.Disk.ContainerStorage != nil {
		t.Errorf("a blueprint without the block gets a partition: %+v", bp.Spec.Disk.ContainerStorage)
	}
}

// The conformance OS takes the partition too (its installer makes the disk GPT): a small
// start from the end of its small disk is valid, and defaults fill label and number.
func TestContainerStorageOnTheConformanceOS(t *testing.T) {
	bp, err := parseIn(t, fixtureDir(t), coreos("  disk:\n    containerStorage: {start: -64M}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cs := bp.Spec.Disk.ContainerStorage
	if cs == nil || cs.Label != "var-lib-containers" || cs.Number != 5 || cs.Start != "-64M" {
		t.Errorf("containerStorage %+v, want -64M, var-lib-containers, 5", cs)
	}
}
