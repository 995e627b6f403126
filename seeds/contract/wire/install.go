package wire

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
)

// InstallDiskSerial is the serial of the small read-only disk the install stage attaches
// to a conformance OS install: an InstallRequest, which the installer (a busybox shell)
// reads before it makes the root file system. A disk, like the seal request, because the
// agent channel only goes from guest to host.
const InstallDiskSerial = "snofactory-install"

// InstallRequestSize is the install request disk's size: the request, NUL-padded.
const InstallRequestSize = 4096

// InstallRequest fixes what mkfs would otherwise pick at random or from the clock, so that
// two installs from one lock make the same file system.
type InstallRequest struct {
	// RootUUID is the root file system's UUID.
	RootUUID string
	// HashSeed is the root's directory hash seed (a UUID). Besides the order of hashed
	// directories, ext4 uses it to place each new top-level directory in a block group.
	HashSeed string
	// MkfsTime is the file system's creation time (and last check) in Unix seconds,
	// SOURCE_DATE_EPOCH; 0 leaves mkfs the clock.
	MkfsTime int64
	// ContainerStorage, when set, makes the disk GPT with a separate /var/lib/containers
	// partition (a blueprint's spec.disk.containerStorage), which the image import fills.
	ContainerStorage *InstallPartition
	// GPT fixes what sgdisk and mkfs would pick at random for a GPT install (one with
	// ContainerStorage): the disk's and the partitions' GUIDs and the container-storage
	// file system's UUID and hash seed. nil leaves them to the tools.
	GPT *GPTIdentity
}

// GPTIdentity is a GPT install's identities, as FSIdentity is the root file system's.
type GPTIdentity struct {
	// Disk is the GPT's disk GUID; ESP, Root and ContainerStorage the partitions' unique
	// GUIDs (PARTUUID).
	Disk, ESP, Root, ContainerStorage string
	// FSUUID and FSHashSeed are the container-storage file system's UUID and directory
	// hash seed.
	FSUUID, FSHashSeed string
}

// NewGPTIdentity derives a GPT install's identities from seed (the lock's digest): one lock
// installs one layout.
func NewGPTIdentity(seed string) *GPTIdentity {
	return &GPTIdentity{Disk: nameUUID("gpt-disk", seed), ESP: nameUUID("gpt-esp", seed), Root: nameUUID("gpt-root", seed),
		ContainerStorage: nameUUID("gpt-container-storage", seed), FSUUID: nameUUID("container-storage-uuid", seed),
		FSHashSeed: nameUUID("container-storage-hash-seed", seed)}
}

func (g *GPTIdentity) encode(b *strings.Builder) error {
	for _, u := range []struct{ key, v string }{{"gpt_disk_guid", g.Disk}, {"gpt_esp_guid", g.ESP}, {"gpt_root_guid", g.Root},
		{"cs_guid", g.ContainerStorage}, {"cs_uuid", g.FSUUID}, {"cs_hash_seed", g.FSHashSeed}} {
		if !uuidPattern.MatchString(u.v) {
			return fmt.Errorf("install request: %s %q is not a lower-case UUID", u.key, u.v)
		}
		fmt.Fprintf(b, "%s=%s\n", u.key, u.v)
	}
	return nil
}

// InstallPartition is a partition the installer adds after the root, to the disk's end.
type InstallPartition struct {
	// Number is the GPT partition number: the installer's own are 1 (ESP) and 2 (root).
	Number int
	// Label is the GPT partition name.
	Label string
	// StartMiB is where it starts, in MiB from the disk's start.
	StartMiB int64
}

// partLabel is what a partition name may hold here: it becomes a shell word in a
// key=value line and /dev/disk/by-partlabel/LABEL on an RHCOS node.
var partLabel = regexp.MustCompile(`^[A-Za-z0-9._-]{1,36}$`)

func (p *InstallPartition) check() error {
	switch {
	case p.Number < 3 || p.Number > 128:
		return fmt.Errorf("install request: partition number %d is not between 3 and 128 (1 and 2 are the ESP and the root)", p.Number)
	case !partLabel.MatchString(p.Label):
		return fmt.Errorf("install request: partition label %q is not 1 to 36 letters, digits, '.', '_' or '-'", p.Label)
	case p.StartMiB <= 0:
		return fmt.Errorf("install request: partition start %d MiB is not on the disk", p.StartMiB)
	}
	return nil
}

// FSIdentity derives a root file system's UUID and hash seed from seed (the lock's
// digest): the same lock installs the same identities, another lock other ones.
func FSIdentity(seed string) (rootUUID, hashSeed string) {
	return nameUUID("root-uuid", seed), nameUUID("hash-seed", seed)
}

// nameUUID is a UUID of RFC 9562's version 8 (custom) made of the SHA-256 of purpose and
// seed.
func nameUUID(purpose, seed string) string {
	b := sha256.Sum256([]byte("snofactory/" + purpose + "\n" + seed))
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// EncodeInstallRequest is the install request disk's content: key=value lines (root_uuid,
// hash_seed, mkfs_time when set, cs_number, cs_label and cs_start_mib with a container
// storage partition, and then the GPT identities when given) that a shell reads, NUL-padded to InstallRequestSize.
func EncodeInstallRequest(r InstallRequest) ([]byte, error) {
	for _, u := range []struct{ name, v string }{{"root UUID", r.RootUUID}, {"hash seed", r.HashSeed}} {
		if !uuidPattern.MatchString(u.v) {
			return nil, fmt.Errorf("install request: the %s %q is not a lower-case UUID", u.name, u.v)
		}
	}
	if r.MkfsTime < 0 {
		return nil, fmt.Errorf("install request: mkfs time %d is before 1970", r.MkfsTime)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root_uuid=%s\nhash_seed=%s\n", r.RootUUID, r.HashSeed)
	if r.MkfsTime > 0 {
		fmt.Fprintf(&b, "mkfs_time=%d\n", r.MkfsTime)
	}
	if p := r.ContainerStorage; p != nil {
		if err := p.check(); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "cs_number=%d\ncs_label=%s\ncs_start_mib=%d\n", p.Number, p.Label, p.StartMiB)
		if r.GPT != nil {
			if err := r.GPT.encode(&b); err != nil {
				return nil, err
			}
		}
	}
	out := make([]byte, InstallRequestSize)
	copy(out, b.String())
	return out, nil
}
