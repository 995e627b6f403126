package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// PhaseFacts is the phase of the one message that carries a Facts document (status info,
// details {"facts": "<json>"}).
const PhaseFacts = "facts"

// FactsDetailKey is the details key holding the Facts JSON.
const FactsDetailKey = "facts"

// FactsVersion is the Facts document's format version.
const FactsVersion = 1

// Facts is what the guest observes about the installed system, for the host's validation
// checks. It carries hashes and metadata, never file bodies or keys, so it fits one message.
type Facts struct {
	Version int `json:"v"`
	// Time is the guest clock when gathering ended; the host compares it to its own.
	Time time.Time `json:"time"`
	// Root is the installed system's root directory as the guest saw it.
	Root  string     `json:"root"`
	Boot  BootFacts  `json:"boot"`
	Files []FileFact `json:"files,omitempty"`
	Units []UnitFact `json:"units,omitempty"`
	Users []UserFact `json:"users,omitempty"`
	// Images is nil when no containers-storage was inspected.
	Images *ImageFacts `json:"images,omitempty"`
	// Leftovers is every bootstrap leftover path looked for (see BootstrapLeftovers).
	Leftovers []PathFact `json:"leftovers"`
	Disk      DiskFacts  `json:"disk"`
	Clock     ClockFacts `json:"clock"`
	Certs     []CertFact `json:"certs,omitempty"`
	// DNS are the cluster's names resolved on an OpenShift node (see DNSRecordsFile).
	DNS []DNSFact `json:"dns,omitempty"`
	// Inventory is the node's software for the seed's SBOM (its fields sit at the top level).
	Inventory
	// Truncated maps a list dropped in part to keep the message under MaxLineBytes to the
	// number of entries it had.
	Truncated map[string]int `json:"truncated,omitempty"`
	// Errors are problems gathering facts that did not stop the gathering.
	Errors []string `json:"errors,omitempty"`
}

// BootFacts says what the system booted from.
type BootFacts struct {
	Cmdline string `json:"cmdline"`
	// RootLabel is the root=LABEL= (or snofactory.root=LABEL=) of the command line.
	RootLabel string `json:"rootLabel,omitempty"`
	// MountPoint, Source and FSType describe the mount that holds Root.
	MountPoint string `json:"mountPoint"`
	Source     string `json:"source"`
	FSType     string `json:"fsType"`
	// Live is true when Root lives on the live system (initramfs, ISO, loop or RAM
	// device) rather than on an installed disk; LiveReason says why.
	Live       bool   `json:"live"`
	LiveReason string `json:"liveReason,omitempty"`
}

// Node kinds of FileFact.
const (
	KindFile      = "file"
	KindDirectory = "directory"
	KindLink      = "link"
	KindOther     = "other"
)

// FileFact is one file, directory or link an Ignition config declares.
type FileFact struct {
	Path string `json:"path"`
	// Declared is the kind the config declares; Kind is what is there ("" if missing).
	Declared string `json:"declared"`
	Exists   bool   `json:"exists"`
	Kind     string `json:"kind,omitempty"`
	// Mode holds the permission bits and setuid/setgid/sticky as in chmod (e.g. 0o4755).
	Mode  uint32 `json:"mode"`
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
	// SHA256 and Size of a regular file's content; Target of a symbolic link.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Target string `json:"target,omitempty"`
	Error  string `json:"error,omitempty"`
}

// UnitFact is one systemd unit an Ignition config declares.
type UnitFact struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	SHA256  string `json:"sha256,omitempty"`
	// Enabled: a preset line enables it or a .wants directory links it; EnabledBy says which.
	Enabled   bool   `json:"enabled"`
	EnabledBy string `json:"enabledBy,omitempty"`
	// Disabled: a preset line disables it.
	Disabled bool         `json:"disabled,omitempty"`
	Masked   bool         `json:"masked,omitempty"`
	Dropins  []DropinFact `json:"dropins,omitempty"`
}

// DropinFact is one drop-in of a unit.
type DropinFact struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	SHA256  string `json:"sha256,omitempty"`
}

// UserFact is one user an Ignition config declares.
type UserFact struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	UID     int    `json:"uid,omitempty"`
	Home    string `json:"home,omitempty"`
	// AuthorizedKeys are SSHKeyHash of each key in ~/.ssh/authorized_keys and
	// ~/.ssh/authorized_keys.d/*.
	AuthorizedKeys []string `json:"authorizedKeys,omitempty"`
}

// ImageFacts is the content of a containers-storage.
type ImageFacts struct {
	GraphRoot string      `json:"graphRoot"`
	Driver    string      `json:"driver"`
	Images    []ImageFact `json:"images,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// ImageFact is one image in containers-storage.
type ImageFact struct {
	ID    string   `json:"id"`
	Names []string `json:"names,omitempty"`
	// Digest is the manifest digest; Digests every manifest digest the image is known by.
	Digest  string   `json:"digest,omitempty"`
	Digests []string `json:"digests,omitempty"`
}

// PathFact says whether one path exists.
type PathFact struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	// What the path is, for the report, e.g. "bootstrap-in-place secrets".
	What string `json:"what,omitempty"`
}

// DiskFacts is the disk layout under Root and its free space.
type DiskFacts struct {
	// Device is the block device holding Root, Disk the whole disk it is on.
	Device     string          `json:"device,omitempty"`
	Disk       string          `json:"disk,omitempty"`
	DiskBytes  int64           `json:"diskBytes,omitempty"`
	Partitions []PartitionFact `json:"partitions,omitempty"`
	// Mounts are the mounts at or below Root's mount.
	Mounts     []MountFact `json:"mounts,omitempty"`
	TotalBytes uint64      `json:"totalBytes"`
	FreeBytes  uint64      `json:"freeBytes"`
}

// PartitionFact is one partition of Disk.
type PartitionFact struct {
	Name   string `json:"name"`
	Number int    `json:"number"`
	Bytes  int64  `json:"bytes"`
}

// MountFact is one mount.
type MountFact struct {
	MountPoint string `json:"mountPoint"`
	Source     string `json:"source"`
	FSType     string `json:"fsType"`
}

// ClockFacts is about time keeping on the node.
type ClockFacts struct {
	// SyncConfigs are the NTP/chrony/timesyncd configuration files found under Root.
	SyncConfigs []string `json:"syncConfigs,omitempty"`
}

// CertFact describes one certificate file of the node: the leaf's metadata only.
type CertFact struct {
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	Subject   string    `json:"subject,omitempty"`
	Issuer    string    `json:"issuer,omitempty"`
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	Error     string    `json:"error,omitempty"`
}

// Kubelet certificates the facts describe, by name.
const (
	CertKubeletClient  = "kubelet-client"
	CertKubeletServing = "kubelet-serving"
)

// DNSRecordsFile is where the single-node dnsmasq configuration writes the cluster's
// records (render's DNS MachineConfig, address=/NAME/IP lines).
const DNSRecordsFile = "/etc/dnsmasq.d/single-node.conf"

// DNSFact is one cluster name resolved on the node, against the address its record names.
type DNSFact struct {
	Name      string   `json:"name"`
	Want      string   `json:"want"`
	Addresses []string `json:"addresses,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// factsBudget is how much of a message the Facts JSON may take, escaped, leaving room for
// the envelope.
const factsBudget = MaxLineBytes - 8<<10

// FactsDetails encodes f for a message's details, dropping the tail of its longest lists
// (recorded in Truncated) until it fits one message.
func FactsDetails(f *Facts) (map[string]string, error) {
	g := *f
	for {
		b, err := json.Marshal(&g)
		if err != nil {
			return nil, fmt.Errorf("encoding facts: %w", err)
		}
		esc, err := json.Marshal(string(b))
		if err != nil {
			return nil, fmt.Errorf("encoding facts: %w", err)
		}
		if len(esc) <= factsBudget {
			return map[string]string{FactsDetailKey: string(b)}, nil
		}
		if !g.shrink() {
			return nil, fmt.Errorf("facts take %d bytes, more than one message carries (%d) even with every list cut", len(esc), factsBudget)
		}
	}
}

// shrink halves the longest list, recording its original length; false when nothing is
// left to cut.
func (f *Facts) shrink() bool {
	lens := map[string]int{"files": len(f.Files), "units": len(f.Units), "users": len(f.Users)}
	if f.Images != nil {
		lens["images"] = len(f.Images.Images)
	}
	if f.Packages != nil {
		lens["packages"] = len(f.Packages.Packages)
	}
	longest, n := "", 0
	for _, k := range []string{"files", "images", "packages", "units", "users"} {
		if lens[k] > n {
			longest, n = k, lens[k]
		}
	}
	if n == 0 {
		return false
	}
	tr := map[string]int{}
	for k, v := range f.Truncated {
		tr[k] = v
	}
	if _, ok := tr[longest]; !ok {
		tr[longest] = n
	}
	f.Truncated = tr
	switch longest {
	case "files":
		f.Files = f.Files[:n/2]
	case "units":
		f.Units = f.Units[:n/2]
	case "users":
		f.Users = f.Users[:n/2]
	case "images":
		img := *f.Images
		img.Images = img.Images[:n/2]
		f.Images = &img
	case "packages":
		// Total still counts them all, so the SBOM says the list is incomplete.
		pk := *f.Packages
		pk.Packages = pk.Packages[:n/2]
		pk.Reason = fmt.Sprintf("the agent's report carries %d of the %d packages: the rest did not fit one message", n/2, pk.Total)
		f.Packages = &pk
	}
	return true
}

// DecodeFacts reads the Facts a PhaseFacts message carries.
func DecodeFacts(m Message) (*Facts, error) {
	if m.Phase != PhaseFacts {
		return nil, fmt.Errorf("agent message phase %q carries no facts (want %q)", m.Phase, PhaseFacts)
	}
	raw, ok := m.Details[FactsDetailKey]
	if !ok {
		return nil, fmt.Errorf("agent facts message (seq %d) has no %q detail", m.Seq, FactsDetailKey)
	}
	var f Facts
	if err := strictjson.DecodeOpen([]byte(raw), &f); err != nil {
		return nil, fmt.Errorf("agent facts (seq %d): %w", m.Seq, err)
	}
	if f.Version != FactsVersion {
		return nil, fmt.Errorf("agent facts version %d, want %d", f.Version, FactsVersion)
	}
	return &f, nil
}

// SSHKeyHash identifies an authorized_keys line by the sha256 of its key type and key
// (options and comment ignored), so host and guest compare keys without shipping them.
// It returns "" for blank or comment lines.
func SSHKeyHash(line string) string {
	fields := strings.Fields(line)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		return ""
	}
	// type base64 [comment], possibly after options: the type is the field before the
	// longest base64 blob; types always start with ssh- or ecdsa- or sk-.
	for i := 0; i+1 < len(fields); i++ {
		t := fields[i]
		if strings.HasPrefix(t, "ssh-") || strings.HasPrefix(t, "ecdsa-") || strings.HasPrefix(t, "sk-") {
			sum := sha256.Sum256([]byte(t + " " + fields[i+1]))
			return hex.EncodeToString(sum[:])
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(fields, " ")))
	return hex.EncodeToString(sum[:])
}
