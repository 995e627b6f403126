package render

import (
	"errors"
	"fmt"
	"regexp"
)

// ContainerStorage is a separate /var/lib/containers partition, as the image-based
// installer makes one (lifecycle-agent lca-cli/ops/ops.go CreateExtraPartition: a
// partition named Label after RHCOS's root, XFS, mounted from /dev/disk/by-partlabel/Label).
type ContainerStorage struct {
	// StartMiB is where the partition starts on the install disk, in MiB from the disk's
	// start; it runs to the end of the disk. The blueprint's start (-40G) is placed on the
	// factory disk before render, as lifecycle-agent places it on the disk it installs to
	// (ops.go calculateStartFromNegative).
	StartMiB int64 `json:"startMiB"`
	// Label is the GPT partition name.
	Label string `json:"label"`
	// Number is the GPT partition number (5 or more: RHCOS's own are 1 to 4).
	Number int `json:"number"`
}

// ContainerStorageReport is what render.json says of the partition, for the seal's record
// of what a site must match and for people.
type ContainerStorageReport struct {
	ContainerStorage
	// Device is the mount unit's What=, which lifecycle-agent records as the seed's
	// container_storage_mountpoint_target (ops.go GetContainerStorageTarget).
	Device string `json:"device"`
	// MountUnit is the systemd mount unit.
	MountUnit string `json:"mountUnit"`
	// MachineConfig names the MachineConfig that makes the partition.
	MachineConfig string `json:"machineConfig"`
}

// ContainerStorageMountUnit is the unit lifecycle-agent looks for: a seed is made only when
// it is active, and its What= is the seed's container storage target
// (lca-cli/ops/ops.go GetContainerStorageTarget; controllers/seedgen_controller.go).
const ContainerStorageMountUnit = "var-lib-containers.mount"

const containerStorageMC = "90-master-snofactory-var-lib-containers"

var partLabelRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,36}$`)

type butaneDisk struct {
	Device     string            `yaml:"device"`
	Partitions []butanePartition `yaml:"partitions"`
}

type butanePartition struct {
	Number   int    `yaml:"number"`
	Label    string `yaml:"label"`
	StartMiB int64  `yaml:"start_mib"`
	// SizeMiB 0: to the end of the disk.
	SizeMiB int64 `yaml:"size_mib"`
}

type butaneFilesystem struct {
	Device         string   `yaml:"device"`
	Path           string   `yaml:"path"`
	Format         string   `yaml:"format"`
	MountOptions   []string `yaml:"mount_options,omitempty"`
	WipeFilesystem bool     `yaml:"wipe_filesystem"`
	WithMountUnit  bool     `yaml:"with_mount_unit"`
}

// containerStorageManifest is the MachineConfig that makes the partition at the node's
// first boot from disk: Ignition's disks stage adds it after the root (RHCOS's root then
// grows only up to it), makes XFS on it, and Butane's with_mount_unit writes
// var-lib-containers.mount (What=/dev/disk/by-partlabel/LABEL, Where=/var/lib/containers,
// RequiredBy=local-fs.target), so CRI-O's storage is on it before CRI-O starts. The
// image-based installer gets the same by running sgdisk/sfdisk, mkfs.xfs and mount from
// lca-cli after coreos-installer; an installer-driven install has no such step, so
// Ignition does it, as OpenShift's documented separate-partition MachineConfig does.
func containerStorageManifest(variant, disk string, cs ContainerStorage) (extraManifest, *ContainerStorageReport, error) {
	switch {
	case disk == "":
		return extraManifest{}, nil, errors.New("containerStorage: the install disk is not set")
	case !partLabelRE.MatchString(cs.Label):
		return extraManifest{}, nil, fmt.Errorf("containerStorage: label %q is not 1 to 36 letters, digits, '.', '_' or '-'", cs.Label)
	case cs.Number < 5 || cs.Number > 128:
		return extraManifest{}, nil, fmt.Errorf("containerStorage: partition number %d is not between 5 and 128", cs.Number)
	case cs.StartMiB <= 0:
		return extraManifest{}, nil, fmt.Errorf("containerStorage: start %d MiB is not on the disk", cs.StartMiB)
	}
	device := "/dev/disk/by-partlabel/" + cs.Label
	mc := masterMC(variant, containerStorageMC)
	mc.Storage = &butaneStorage{
		Disks: []butaneDisk{{Device: disk, Partitions: []butanePartition{
			{Number: cs.Number, Label: cs.Label, StartMiB: cs.StartMiB},
		}}},
		Filesystems: []butaneFilesystem{{
			Device: device, Path: "/var/lib/containers", Format: "xfs",
			// prjquota: CRI-O's overlay storage sets per-container quotas on XFS.
			MountOptions: []string{"defaults", "prjquota"}, WipeFilesystem: true, WithMountUnit: true,
		}},
	}
	doc, err := translateOwn(containerStorageMC, mc, false)
	if err != nil {
		return extraManifest{}, nil, err
	}
	m, err := machineConfigManifest(containerStorageMC, "container-storage", doc)
	if err != nil {
		return extraManifest{}, nil, err
	}
	rep := &ContainerStorageReport{ContainerStorage: cs, Device: device, MountUnit: ContainerStorageMountUnit, MachineConfig: containerStorageMC}
	return m, rep, nil
}
