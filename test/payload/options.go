package payload

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Size scales the payload.
type Size string

// Size presets. Bytes are uncompressed; layers are about half random, half
// text, so they compress to roughly 55%.
const (
	// Tiny is a few MB in all, for unit tests.
	Tiny Size = "tiny"
	// Small is the default: ~100 MB of blobs at 60 components.
	Small Size = "small"
	// Medium is ~4x Small (~400 MB), for benchmarks.
	Medium Size = "medium"
)

// layerSizes are the uncompressed sizes of each kind of layer.
type layerSizes struct {
	Base  []int64 // base layers, bottom first
	Mid   int64   // one per group
	Top   int64   // unique per component, on average (0.25x-1.75x)
	Extra int64   // a second unique layer some components have
	File  int64   // largest file in a layer
}

func (s Size) layers() (layerSizes, error) {
	const k, m = 1 << 10, 1 << 20
	switch s {
	case Tiny:
		return layerSizes{Base: []int64{96 * k, 48 * k, 24 * k}, Mid: 32 * k, Top: 32 * k, Extra: 16 * k, File: 32 * k}, nil
	case Small, "":
		return layerSizes{Base: []int64{8 * m, 4 * m, 2 * m}, Mid: 2 * m, Top: 2 * m, Extra: 1 * m, File: 2 * m}, nil
	case Medium:
		return layerSizes{Base: []int64{32 * m, 16 * m, 8 * m}, Mid: 8 * m, Top: 8 * m, Extra: 4 * m, File: 4 * m}, nil
	}
	return layerSizes{}, fmt.Errorf("payload: unknown size %q (want tiny, small or medium)", s)
}

// Format selects manifest media types.
type Format string

const (
	// Docker pushes every manifest as Docker schema2.
	Docker Format = "docker"
	// OCI pushes every manifest as OCI.
	OCI Format = "oci"
	// Mixed (the default) pushes the release image and two thirds of the
	// components as schema2 and the rest as OCI, so clients meet both.
	Mixed Format = "mixed"
)

// ISO is the live ISO the release's boot image metadata points at.
type ISO struct {
	// Location goes into the stream metadata as the ISO's location: a URL
	// or a local path. Empty: Path if set, else a placeholder URL.
	Location string
	// SHA256 is the ISO's hex sha256. Empty: computed from Path; without
	// Path, a placeholder digest.
	SHA256 string
	// Path is a local ISO file. When set, machine-os-images carries it at
	// /coreos/coreos-x86_64.iso, as newer real payloads do.
	Path string
	// Release is the CoreOS build id in the stream metadata.
	Release string
	// NoBootImages leaves the coreos-bootimages ConfigMap out of the
	// release, so machine-os-images is the only place the ISO is named.
	NoBootImages bool
	// ChecksumFile, when set, is the content of
	// /coreos/coreos-x86_64.iso.sha256 in machine-os-images instead of
	// "<sha256>  coreos-x86_64.iso\n" (a wrong one tests readers' checks).
	ChecksumFile []byte
}

// Options configure Generate. The zero value makes the default payload.
type Options struct {
	// Components is the number of component images, 8-150. Default 60
	// (40 with Size Tiny); real payloads have 150-200.
	Components int
	// Size scales the layers. Default Small.
	Size Size
	// Seed makes the content; the same Options give the same digests.
	Seed int64
	// Version is the release version. Default "4.18.0-synthetic".
	Version string
	// Previous are the versions release-metadata lists as update sources.
	Previous []string
	// ReleaseRepo and ComponentRepo are repository paths in the registry.
	// Defaults "openshift-release-dev/ocp-release" and
	// "openshift-release-dev/ocp-v4.0-art-dev", as on quay.io.
	ReleaseRepo   string
	ComponentRepo string
	// ReferenceRegistry is the registry host written into
	// image-references. Default: the registry pushed to, so the payload
	// pulls as is. Setting it (e.g. "quay.io") makes the release digest
	// independent of the test registry's port, as a mirrored payload is.
	ReferenceRegistry string
	// Format selects media types. Default Mixed.
	Format Format
	// MultiArch pushes the pod component as a two-platform index
	// (linux/amd64, linux/arm64), referenced by the index digest.
	MultiArch bool
	// ISO is the boot ISO for coreos-bootimages and machine-os-images.
	ISO ISO
	// InstallerScript, when set, is the executable the installer component
	// carries at /usr/bin/openshift-install instead of the default stand-in,
	// which only answers "version" (e.g. a stand-in replaying recorded
	// installer output, for tests that run render).
	InstallerScript []byte
	// Jobs is the number of parallel uploads. Default 4.
	Jobs int
	// Transport and Auth reach the registry (e.g. TLS or htpasswd fixtures).
	Transport http.RoundTripper
	Auth      authn.Authenticator
	// Logger receives progress. Nil discards.
	Logger *slog.Logger
}

// MaxComponents is how many distinct component names there are.
const MaxComponents = 150

func (o *Options) defaults() error {
	if o.Size == "" {
		o.Size = Small
	}
	if o.Components == 0 {
		o.Components = 60
		if o.Size == Tiny {
			o.Components = 40
		}
	}
	if o.Components < 8 || o.Components > MaxComponents {
		return fmt.Errorf("payload: %d components, want 8-%d", o.Components, MaxComponents)
	}
	if o.Version == "" {
		o.Version = "4.18.0-synthetic"
	}
	if strings.ContainsAny(o.Version, " /:@") {
		return fmt.Errorf("payload: version %q is not a tag", o.Version)
	}
	if o.Previous == nil {
		o.Previous = []string{"4.17.9", "4.18.0-rc.3"}
	}
	if o.ReleaseRepo == "" {
		o.ReleaseRepo = "openshift-release-dev/ocp-release"
	}
	if o.ComponentRepo == "" {
		o.ComponentRepo = "openshift-release-dev/ocp-v4.0-art-dev"
	}
	if o.Format == "" {
		o.Format = Mixed
	}
	switch o.Format {
	case Docker, OCI, Mixed:
	default:
		return fmt.Errorf("payload: unknown format %q (want docker, oci or mixed)", o.Format)
	}
	if o.Jobs <= 0 {
		o.Jobs = 4
	}
	if o.ISO.Release == "" {
		o.ISO.Release = "418.94.202501010000-0"
	}
	if _, err := o.Size.layers(); err != nil {
		return err
	}
	return nil
}
