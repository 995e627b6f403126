package seed

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
)

// ManifestFile is the seed manifest's name inside a seed directory.
const ManifestFile = "seed.json"

// SchemaVersion is the manifest version this package writes. Version 2 added the chunked
// disk format; version 1 manifests (qcow2 and raw disks only) are still read.
const SchemaVersion = 2

// SchemaVersionV1 is the first manifest version, still read.
const SchemaVersionV1 = 1

// Media types of the seed as an OCI artifact: the manifest is the artifact's config.
const (
	MediaTypeManifest = "application/vnd.snofactory.seed.manifest.v1+json"
	ArtifactType      = "application/vnd.snofactory.seed.v1"
)

// Firmware a seed can boot with.
const (
	FirmwareBIOS = "bios"
	FirmwareUEFI = "uefi"
)

// Disk formats and the compression each is stored with.
const (
	FormatQCOW2 = "qcow2"
	FormatRaw   = "raw"
	// FormatChunked is the raw disk as content-defined chunks, each compressed with zstd
	// (seeds/artifact/diskpack): a pack file and its index. It moves as a delta.
	FormatChunked   = "chunked"
	CompressionZstd = "zstd"
)

// Manifest describes a sealed seed: where it came from, what it holds and the digests that
// let anyone check it.
type Manifest struct {
	// SchemaVersion of this manifest; readers refuse versions they do not know.
	SchemaVersion int `json:"schemaVersion" jsonschema:"required,enum=1,enum=2"`
	// Name is the blueprint's metadata.name.
	Name string `json:"name" jsonschema:"required,minLength=1,maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Target is the installed system: coreos (the conformance OS) or openshift.
	Target oskind.Kind `json:"target" jsonschema:"required,enum=coreos,enum=openshift"`
	// ReleaseVersion is the OpenShift release installed (required for openshift).
	ReleaseVersion string `json:"releaseVersion,omitempty"`
	// Firmware the seed boots with: bios or uefi.
	Firmware string `json:"firmware" jsonschema:"required,enum=bios,enum=uefi"`
	// BlueprintDigest is the digest of the blueprint the seed was built from.
	BlueprintDigest digest.Digest `json:"blueprintDigest" jsonschema:"required"`
	// LockDigest is the digest of the lock file that pinned every input.
	LockDigest digest.Digest `json:"lockDigest" jsonschema:"required"`
	// ReconfigurationAPIVersion is the site-config apiVersion the seed's reconfiguration hook reads.
	ReconfigurationAPIVersion string `json:"reconfigurationAPIVersion" jsonschema:"required,minLength=1"`
	// Created is when the seed was sealed (the writer honours SOURCE_DATE_EPOCH).
	Created time.Time `json:"created" jsonschema:"required"`
	// Tools maps each tool that made the seed (snofactory, qemu-img, ...) to its version.
	Tools map[string]string `json:"tools" jsonschema:"required"`
	// Images precached in the seed, each pinned by digest.
	Images []Image `json:"images" jsonschema:"required"`
	// Validation is the summary of the validation gate the seed passed.
	Validation Validation `json:"validation" jsonschema:"required"`
	// Disks are the forms the sealed disk is stored in.
	Disks []Disk `json:"disks" jsonschema:"required,minItems=1"`
	// Credentials is the age-encrypted credentials bundle shipped beside the disk, if any.
	Credentials *Credentials `json:"credentials,omitempty"`
	// SBOM is the seed's software bill of materials beside the disk, if any (seeds older
	// than it have none).
	SBOM *SBOM `json:"sbom,omitempty"`
	// SiteFit is what a site must match for this seed to serve it (its own version inside;
	// seeds sealed before it have none, and every site fits them).
	SiteFit *seedfit.Record `json:"siteFit,omitempty"`
}

// Image is one image the seed carries.
type Image struct {
	// Name the blueprint or release gives the image (e.g. a release component).
	Name string `json:"name" jsonschema:"required,minLength=1"`
	// Ref is the pull spec the node uses.
	Ref string `json:"ref" jsonschema:"required,minLength=1"`
	// Digest of the image manifest.
	Digest digest.Digest `json:"digest" jsonschema:"required"`
}

// Validation summarises the validation report of the installed node.
type Validation struct {
	// Passed is the number of checks that passed.
	Passed int `json:"passed" jsonschema:"required,minimum=0"`
	// Failed is the number of checks that failed: always 0, only a node that passed is sealed.
	Failed int `json:"failed" jsonschema:"required,minimum=0,maximum=0"`
	// Skipped is the number of checks the blueprint skipped.
	Skipped int `json:"skipped" jsonschema:"required,minimum=0"`
	// Warnings is the number of checks that passed with a warning.
	Warnings int `json:"warnings" jsonschema:"required,minimum=0"`
}

// Disk is one stored form of the sealed disk.
type Disk struct {
	// Format of the disk image: qcow2, raw or chunked (schemaVersion 2).
	Format string `json:"format" jsonschema:"required,enum=qcow2,enum=raw,enum=chunked"`
	// File is the disk's name inside the seed directory: for chunked, the pack.
	File string `json:"file" jsonschema:"required,minLength=1"`
	// Compression of the file: empty for qcow2 (compressed inside), zstd for raw and for
	// each chunk of a chunked disk.
	Compression string `json:"compression,omitempty" jsonschema:"enum=,enum=zstd"`
	// Index is the chunk index of a chunked disk: where each chunk of the pack lies on the
	// raw disk, and its digests.
	Index *DiskIndex `json:"index,omitempty"`
	// Size of the file as stored, in bytes.
	Size int64 `json:"size" jsonschema:"required,minimum=1"`
	// Digest of the file as stored.
	Digest digest.Digest `json:"digest" jsonschema:"required"`
	// VirtualSize is the size of the raw disk, in bytes, at most 64 TiB (MaxVirtualSize).
	VirtualSize int64 `json:"virtualSize" jsonschema:"required,minimum=1,maximum=70368744177664"`
	// RawDigest is the digest of the raw disk bytes, what a writer puts on a device.
	RawDigest digest.Digest `json:"rawDigest" jsonschema:"required"`
}

// DiskIndex is the file holding a chunked disk's chunk index (seeds/artifact/diskpack).
type DiskIndex struct {
	// File is the index's name inside the seed directory.
	File string `json:"file" jsonschema:"required,minLength=1"`
	// Size of the file in bytes.
	Size int64 `json:"size" jsonschema:"required,minimum=1"`
	// Digest of the file.
	Digest digest.Digest `json:"digest" jsonschema:"required"`
}

// Credentials is the age-encrypted bundle (kubeconfig, kubeadmin password) beside the disk.
type Credentials struct {
	// File is the bundle's name inside the seed directory.
	File string `json:"file" jsonschema:"required,minLength=1"`
	// Recipients the bundle is encrypted to (age or SSH public keys).
	Recipients []string `json:"recipients" jsonschema:"required,minItems=1"`
	// Size of the file in bytes.
	Size int64 `json:"size" jsonschema:"required,minimum=1"`
	// Digest of the file.
	Digest digest.Digest `json:"digest" jsonschema:"required"`
}

// SBOM is the SPDX 2.3 JSON document (seeds/artifact/sbom) listing what the seed carries: its
// images, the installed OS packages and the snofactory binaries on the node.
type SBOM struct {
	// File is the document's name inside the seed directory.
	File string `json:"file" jsonschema:"required,minLength=1"`
	// Size of the file in bytes.
	Size int64 `json:"size" jsonschema:"required,minimum=1,maximum=33554432"`
	// Digest of the file.
	Digest digest.Digest `json:"digest" jsonschema:"required"`
}

// MaxVirtualSize bounds every disk's declared raw size (virtualSize), whatever its format.
const MaxVirtualSize = diskpack.MaxDiskSize

// MaxSBOMSize bounds a seed's SBOM file: thousands of packages take a few MiB.
const MaxSBOMSize = 32 << 20

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Validate reports every problem of m at once, each prefixed with the JSON path of its field.
func (m *Manifest) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if m.SchemaVersion != SchemaVersion && m.SchemaVersion != SchemaVersionV1 {
		bad("schemaVersion", "%d is not %d or %d", m.SchemaVersion, SchemaVersionV1, SchemaVersion)
	}
	if len(m.Name) > 63 || !dns1123Label.MatchString(m.Name) {
		bad("name", "%q is not a DNS-1123 label", m.Name)
	}
	switch m.Target {
	case oskind.CoreOS:
	case oskind.OpenShift:
		if m.ReleaseVersion == "" {
			bad("releaseVersion", "required for target %s", oskind.OpenShift)
		}
	default:
		bad("target", "%q is not %s or %s", m.Target, oskind.CoreOS, oskind.OpenShift)
	}
	if m.Firmware != FirmwareBIOS && m.Firmware != FirmwareUEFI {
		bad("firmware", "%q is not %s or %s", m.Firmware, FirmwareBIOS, FirmwareUEFI)
	}
	checkDigest(bad, "blueprintDigest", m.BlueprintDigest)
	checkDigest(bad, "lockDigest", m.LockDigest)
	if m.ReconfigurationAPIVersion == "" {
		bad("reconfigurationAPIVersion", "required")
	}
	if m.Created.IsZero() {
		bad("created", "required")
	}
	for k, v := range m.Tools {
		if k == "" || v == "" {
			bad("tools", "tool %q has version %q: both must be set", k, v)
		}
	}
	for i, img := range m.Images {
		f := fmt.Sprintf("images[%d]", i)
		if img.Name == "" {
			bad(f+".name", "required")
		}
		if img.Ref == "" {
			bad(f+".ref", "required")
		}
		checkDigest(bad, f+".digest", img.Digest)
	}
	v := m.Validation
	if v.Passed < 0 || v.Skipped < 0 || v.Warnings < 0 || v.Failed < 0 {
		bad("validation", "negative count in %+v", v)
	}
	if v.Failed > 0 {
		// Only a node that passed the gate is sealed.
		bad("validation.failed", "%d checks failed", v.Failed)
	}
	m.validateFiles(bad)
	if m.SiteFit != nil {
		if err := m.SiteFit.Validate(); err != nil {
			bad("siteFit", "%v", err)
		}
	}
	return errors.Join(errs...)
}

// validateFiles checks the disks, the credentials bundle and the SBOM, and that no two
// name the same file.
func (m *Manifest) validateFiles(bad func(field, format string, args ...any)) {
	seen := map[string]string{ManifestFile: "the manifest"}
	file := func(field, name string) {
		if name == "" || name != path.Base(name) || name == "." || name == ".." || containsSep(name) {
			bad(field, "%q is not a plain file name", name)
			return
		}
		if other, ok := seen[name]; ok {
			bad(field, "%q is also %s", name, other)
		}
		seen[name] = field
	}
	if len(m.Disks) == 0 {
		bad("disks", "at least one disk is required")
	}
	for i, d := range m.Disks {
		f := fmt.Sprintf("disks[%d]", i)
		file(f+".file", d.File)
		switch {
		case d.Format == FormatQCOW2 && d.Compression != "":
			bad(f+".compression", "%q: qcow2 is compressed internally, compression must be empty", d.Compression)
		case d.Format == FormatRaw && d.Compression != CompressionZstd:
			bad(f+".compression", "%q: a raw disk is stored with %s", d.Compression, CompressionZstd)
		case d.Format == FormatChunked && m.SchemaVersion < SchemaVersion:
			bad(f+".format", "%s needs schemaVersion %d", FormatChunked, SchemaVersion)
		case d.Format == FormatChunked && d.Compression != CompressionZstd:
			bad(f+".compression", "%q: a chunked disk's chunks are stored with %s", d.Compression, CompressionZstd)
		case !declaredFormat(d.Format):
			bad(f+".format", "%q is not %s, %s or %s", d.Format, FormatQCOW2, FormatRaw, FormatChunked)
		}
		switch x := d.Index; {
		case d.Format == FormatChunked && x == nil:
			bad(f+".index", "required for a chunked disk")
		case d.Format != FormatChunked && x != nil:
			bad(f+".index", "only a chunked disk has one")
		case x != nil:
			file(f+".index.file", x.File)
			if x.Size <= 0 || x.Size > diskpack.MaxIndexSize {
				bad(f+".index.size", "%d is not within 1..%d", x.Size, diskpack.MaxIndexSize)
			}
			checkDigest(bad, f+".index.digest", x.Digest)
		}
		if d.Size <= 0 {
			bad(f+".size", "%d is not positive", d.Size)
		}
		checkVirtualSize(bad, f, d)
		checkDigest(bad, f+".digest", d.Digest)
		checkDigest(bad, f+".rawDigest", d.RawDigest)
	}
	if c := m.Credentials; c != nil {
		file("credentials.file", c.File)
		if len(c.Recipients) == 0 {
			bad("credentials.recipients", "at least one recipient is required")
		}
		for i, r := range c.Recipients {
			if r == "" {
				bad(fmt.Sprintf("credentials.recipients[%d]", i), "empty")
			}
		}
		if c.Size <= 0 {
			bad("credentials.size", "%d is not positive", c.Size)
		}
		checkDigest(bad, "credentials.digest", c.Digest)
	}
	if x := m.SBOM; x != nil {
		file("sbom.file", x.File)
		if x.Size <= 0 || x.Size > MaxSBOMSize {
			bad("sbom.size", "%d is not within 1..%d", x.Size, MaxSBOMSize)
		}
		checkDigest(bad, "sbom.digest", x.Digest)
	}
}

// checkVirtualSize refuses a declared raw size that no stored disk could expand to, before
// anything reads or hashes that many bytes: more than MaxVirtualSize, or, for a raw disk,
// more than its zstd frames can hold.
func checkVirtualSize(bad func(field, format string, args ...any), f string, d Disk) {
	switch v := d.VirtualSize; {
	case v <= 0:
		bad(f+".virtualSize", "%d is not positive", v)
	case v > MaxVirtualSize:
		bad(f+".virtualSize", "%d bytes is more than the %d (64 TiB) a seed disk may have", v, int64(MaxVirtualSize))
	case d.Format == FormatRaw && d.Size > 0 && v/maxZstdRatio > d.Size:
		bad(f+".virtualSize", "%d bytes is more than the %d stored bytes of %s can expand to (zstd expands at most %d times)",
			v, d.Size, d.File, maxZstdRatio)
	}
}

// maxZstdRatio bounds how far zstd expands: every block (at most 128 KiB of output) takes
// at least a 3-byte header and one byte of content (RFC 8878, section 3.1.1.2).
const maxZstdRatio = (128 << 10) / 4

func containsSep(name string) bool {
	for _, r := range name {
		if r == '/' || r == '\\' || r == 0 {
			return true
		}
	}
	return false
}

// checkDigest accepts only sha256 digests, the algorithm every writer here uses.
func checkDigest(bad func(field, format string, args ...any), field string, d digest.Digest) {
	if d == "" {
		bad(field, "required")
		return
	}
	if err := d.Validate(); err != nil || d.Algorithm() != digest.SHA256 {
		bad(field, "%q is not a sha256 digest", d)
	}
}
