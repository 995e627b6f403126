package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// Disk is the installed node's disk beyond the OS's own partitions.
type Disk struct {
	// A separate partition for /var/lib/containers, as the image-based installer makes
	// (its extraPartitionStart, extraPartitionLabel and extraPartitionNumber): the precached
	// images live on it, apart from the OS, and a node made from the seed can later take an
	// image-based upgrade, which needs one. Present, even empty ({}), turns it on; each field
	// left out takes the image-based installer's default. On a coreos target the conformance
	// OS's installer makes the disk GPT for it, with ext4 on the partition.
	ContainerStorage *ContainerStorage `json:"containerStorage,omitempty" yaml:"containerStorage,omitempty"`
}

// ContainerStorage is the /var/lib/containers partition.
type ContainerStorage struct {
	// Where the partition starts, as sgdisk reads a start: a negative size counts back from
	// the end of the disk (-40G: the disk's last 40 GiB), a positive one is an offset from
	// its start (the partition then runs to the end). Units K, M, G, T, P (powers of 1024).
	// The root file system grows up to it. Default: -40G.
	Start string `json:"start,omitempty" yaml:"start,omitempty" jsonschema:"pattern=^-?[1-9][0-9]*[KMGTPkmgtp]$"`
	// GPT partition name; the mount unit mounts /dev/disk/by-partlabel/LABEL, which the seed
	// records and a site's image-based upgrade compares. At most 36 letters, digits, '.',
	// '_' or '-'. Default: var-lib-containers.
	Label string `json:"label,omitempty" yaml:"label,omitempty" jsonschema:"maxLength=36"`
	// GPT partition number: 5 to 128 (RHCOS's own partitions are 1 to 4). Default: 5.
	Number int `json:"number,omitempty" yaml:"number,omitempty"`
}

// The image-based installer's defaults for its extra partition (lifecycle-agent
// api/ibiconfig/ibiconfig.go IBIPrepareConfig.SetDefaultValues, which lca-cli ibi applies).
const (
	DefaultContainerStorageStart  = "-40G"
	DefaultContainerStorageLabel  = "var-lib-containers"
	DefaultContainerStorageNumber = 5
)

// Limits of the partition's settings.
const (
	// maxPartLabel: a GPT partition name is 36 UTF-16 code units (UEFI spec, GPT
	// partition entry), and only ASCII is accepted here.
	maxPartLabel = 36
	// maxPartNumber: a GPT's partition array holds 128 entries as sgdisk writes it.
	maxPartNumber = 128
	// minRootSize: the space an RHCOS root must keep before the partition, as OpenShift's
	// own documentation asks of a separate partition's start (at least 25000 MiB).
	minRootSize = 25000 * MiB
	// minConformanceRoot: the conformance OS's ESP and root end at 201 MiB
	// (test/conformance MinDiskMiB); its installer lays the partition out after them.
	minConformanceRoot = 201 * MiB
)

// rhcosPartitions are RHCOS's own partitions, by number and name: BIOS-BOOT, EFI-SYSTEM,
// boot, root (lifecycle-agent lca-cli/ops/ops.go growRootPartitionCommands grows
// partition 4, mounting /dev/disk/by-partlabel/root and boot).
var rhcosPartitions = []string{"BIOS-BOOT", "EFI-SYSTEM", "boot", "root"}

var (
	partStart = regexp.MustCompile(`^(-?)([1-9][0-9]*)([KMGTPkmgtp])$`)
	partLabel = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// defaultDisk fills the partition's unset fields with the image-based installer's defaults.
func (d *Disk) defaultDisk() {
	cs := d.ContainerStorage
	if cs == nil {
		return
	}
	if cs.Start == "" {
		cs.Start = DefaultContainerStorageStart
	}
	if cs.Label == "" {
		cs.Label = DefaultContainerStorageLabel
	}
	if cs.Number == 0 {
		cs.Number = DefaultContainerStorageNumber
	}
}

// StartBytes is where the partition starts on a disk of size disk, rounded down to a MiB
// as lifecycle-agent does (lca-cli/ops/ops.go calculateStartFromNegative); false when start
// is not a valid sgdisk start or falls outside the disk.
func (cs ContainerStorage) StartBytes(disk Size) (Size, bool) {
	m := partStart.FindStringSubmatch(cs.Start)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]Size{"K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": 1024 * TiB}[strings.ToUpper(m[3])]
	if n > int64(disk/unit) {
		return 0, false
	}
	at := Size(n) * unit
	if m[1] == "-" {
		at = disk - at
	}
	at -= at % MiB
	return at, at > 0 && at < disk
}

func (b *Blueprint) validateDisk(c *checker) {
	cs := b.Spec.Disk.ContainerStorage
	if cs == nil {
		return
	}
	const p = "spec.disk.containerStorage"
	b.validatePartStart(c, p+".start", *cs)
	switch {
	case len(cs.Label) > maxPartLabel:
		c.Add(p+".label", fmt.Sprintf("%q has %d characters; a GPT partition name has at most %d", suggest.Clip(cs.Label), len(cs.Label), maxPartLabel), "e.g. "+DefaultContainerStorageLabel)
	case !partLabel.MatchString(cs.Label):
		c.Add(p+".label", fmt.Sprintf("%q is not a partition label", suggest.Clip(cs.Label)), "letters, digits, '.', '_' and '-' only: it becomes /dev/disk/by-partlabel/LABEL, e.g. "+DefaultContainerStorageLabel)
	case slices.ContainsFunc(rhcosPartitions, func(l string) bool { return strings.EqualFold(l, cs.Label) }):
		c.Add(p+".label", fmt.Sprintf("%q names one of RHCOS's own partitions (%s)", cs.Label, strings.Join(rhcosPartitions, ", ")), "e.g. "+DefaultContainerStorageLabel)
	}
	switch {
	case cs.Number < 1 || cs.Number > maxPartNumber:
		c.Add(p+".number", fmt.Sprintf("must be between 1 and %d, got %d", maxPartNumber, cs.Number), "e.g. 5")
	case cs.Number <= len(rhcosPartitions):
		c.Add(p+".number", fmt.Sprintf("partition %d is RHCOS's %s partition", cs.Number, rhcosPartitions[cs.Number-1]), "the first free number is 5")
	}
}

// validatePartStart checks start as sgdisk reads it and against the factory disk: the
// partition must fit, and the root before it must keep RHCOS's minimum.
func (b *Blueprint) validatePartStart(c *checker, p string, cs ContainerStorage) {
	disk := b.Spec.VM.DiskSize
	if !partStart.MatchString(cs.Start) {
		hint := "a size with a unit, e.g. -40G (the disk's last 40 GiB) or 100G (from 100 GiB to the end)"
		if _, err := strconv.Atoi(cs.Start); err == nil {
			hint = "a bare number is a sector number to sgdisk: write a unit, e.g. -40G or 100G"
		}
		c.Add(p, fmt.Sprintf("%q is not a partition start", suggest.Clip(cs.Start)), hint)
		return
	}
	at, ok := cs.StartBytes(disk)
	if !ok {
		c.Add(p, fmt.Sprintf("%s falls outside the %s factory disk (spec.vm.diskSize)", cs.Start, disk), "a start within the disk, e.g. -40G, or a bigger spec.vm.diskSize")
		return
	}
	// The conformance OS's installer makes the disk GPT for the partition, its root smaller.
	minRoot, os := minRootSize, "RHCOS"
	if b.Spec.Target.Type != oskind.OpenShift {
		minRoot, os = minConformanceRoot, "the conformance OS"
	}
	if at < minRoot {
		c.Add(p, fmt.Sprintf("%s leaves the root %s of the %s factory disk; %s's root needs at least %s", cs.Start, at, disk, os, minRoot),
			fmt.Sprintf("start the partition at or after %s, or make spec.vm.diskSize bigger", minRoot))
	}
}
