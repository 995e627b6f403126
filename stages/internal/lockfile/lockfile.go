package lockfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/snofactory/snofactory/pipeline"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/pipeline/strictjson"

	"github.com/snofactory/snofactory/seeds/checks/smallfile"
)

// SchemaVersion is bumped whenever the lock file's meaning changes.
const SchemaVersion = 1

// File is the name of the lock inside the resolve stage's output.
const File = "lock.json"

// Image sources recorded in Lock.Images.
const (
	SourceRelease  = "release"
	SourceOperator = "operator"
	SourceExtra    = "extra"
)

// Lock pins every input of a build. It holds no timestamps, so resolving the same inputs
// twice gives byte-identical files.
type Lock struct {
	SchemaVersion int    `json:"schemaVersion"`
	Arch          string `json:"arch"`
	// Release is zero for targets without an OpenShift release (CoreOS-style).
	Release   LockedRelease `json:"release,omitzero"`
	Images    []LockedImage `json:"images"`
	ISO       *LockedISO    `json:"iso,omitempty"`
	Installer *LockedTool   `json:"installer,omitempty"`
}

// LockedRelease is the release image as the blueprint named it and as it resolved.
type LockedRelease struct {
	Ref     string `json:"ref"`
	Digest  string `json:"digest"`
	Version string `json:"version,omitempty"`
}

// LockedImage is one image the node needs, pinned by digest. Ref always carries the digest
// (repo@sha256:...), so it can be pulled as is.
type LockedImage struct {
	Name   string `json:"name"`
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Source says why the image is in the lock: "release", "operator:<bundle>" (an operator
	// named by its bundle image), "operator:<package>" (an operator named by package in a
	// catalog) or "extra".
	Source string `json:"source"`
}

// LockedISO is the live ISO: the release's RHCOS ISO, or the one the blueprint names.
type LockedISO struct {
	// URL is where the ISO is fetched from, or for an ISO shipped inside a component image
	// image://<repo@digest>#<absolute path in the image> (see ImageURL).
	URL string `json:"url,omitempty"`
	// Path is a local ISO as the blueprint names it (relative to the blueprint), so a lock
	// made in one checkout holds in another; for an image:// ISO, the extracted file
	// relative to the resolve stage's output ("" when not extracted).
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// From is where the ISO location came from: "coreos-bootimages", "machine-os-images" or
	// "blueprint".
	From string `json:"from"`
}

// imageScheme prefixes the URL of an ISO shipped inside a container image.
const imageScheme = "image://"

// ImageURL names the file at name (absolute) inside the image ref (repo@digest).
func ImageURL(ref, name string) string { return imageScheme + ref + "#" + name }

// ParseImageURL splits an ImageURL into its image reference and file path; ok is false for
// any other URL.
func ParseImageURL(u string) (ref, name string, ok bool) {
	rest, found := strings.CutPrefix(u, imageScheme)
	if !found {
		return "", "", false
	}
	ref, name, found = strings.Cut(rest, "#")
	if !found || ref == "" || !strings.HasPrefix(name, "/") {
		return "", "", false
	}
	return ref, name, true
}

// InImage reports whether the ISO ships inside a container image (an image:// URL).
func (i *LockedISO) InImage() bool { return strings.HasPrefix(i.URL, imageScheme) }

// LockedTool is a binary extracted from a component image.
type LockedTool struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Path is the extracted file relative to the stage output ("" when not extracted).
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// Normalize sorts images so the file does not depend on map or network order.
func (l *Lock) Normalize() {
	sort.SliceStable(l.Images, func(i, j int) bool {
		a, b := l.Images[i], l.Images[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Ref < b.Ref
	})
}

// Marshal returns the canonical encoding of the lock.
func (l *Lock) Marshal() ([]byte, error) {
	l.Normalize()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLock writes the lock to path atomically.
func WriteLock(path string, l *Lock) error {
	b, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("encoding lock: %w", err)
	}
	if err := pipeline.WriteFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("writing lock %s: %w", path, err)
	}
	return nil
}

// WriteOutput writes the lock to path, a file a user named (snofactory lock -o), through
// the output rules: refused (output.IsRefused) where it is one of inputs, a directory, a
// device, a FIFO, a read-only file; otherwise written beside itself and renamed into place.
func WriteOutput(path string, l *Lock, inputs ...string) error {
	b, err := l.Marshal()
	if err != nil {
		return fmt.Errorf("encoding lock: %w", err)
	}
	return output.Write(path, 0o644, func(f *os.File) error {
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("writing lock %s: %w", path, err)
		}
		return nil
	}, inputs...)
}

// MaxLockFile bounds a lock file: digests of a release's images, a few hundred KiB.
const MaxLockFile = 16 << 20

// ReadLock reads and checks a lock file.
func ReadLock(path string) (*Lock, error) {
	b, err := smallfile.Read(path, MaxLockFile)
	if err != nil {
		return nil, fmt.Errorf("reading lock: %w", err)
	}
	var l Lock
	if err := strictjson.Decode(b, &l); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if l.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("lock %s: schema version %d, this snofactory reads version %d", path, l.SchemaVersion, SchemaVersion)
	}
	if l.Release.Ref != "" && l.Release.Digest == "" {
		return nil, fmt.Errorf("lock %s: release digest is missing", path)
	}
	for i, im := range l.Images {
		if im.Digest == "" || im.Ref == "" {
			return nil, fmt.Errorf("lock %s: images[%d] (%s) has no ref or digest", path, i, im.Name)
		}
	}
	if iso := l.ISO; iso != nil && iso.InImage() {
		if _, _, ok := ParseImageURL(iso.URL); !ok {
			return nil, fmt.Errorf("lock %s: iso url %q is not image://<ref>#/<path>", path, iso.URL)
		}
		// Readers join Path to the resolve output, so it must stay inside it.
		if iso.Path != "" && !filepath.IsLocal(filepath.FromSlash(iso.Path)) {
			return nil, fmt.Errorf("lock %s: iso path %q leaves the stage output", path, iso.Path)
		}
		if iso.Path != "" && iso.SHA256 == "" {
			return nil, fmt.Errorf("lock %s: extracted iso %s has no sha256", path, iso.Path)
		}
	}
	return &l, nil
}

// Verify compares a fresh resolution against a pinned lock and returns every difference,
// one human-readable line each; none means the build reads exactly what was pinned.
func Verify(locked, fresh *Lock) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	if locked.Arch != fresh.Arch {
		add("arch: locked %q, now %q", locked.Arch, fresh.Arch)
	}
	if locked.Release.Ref != fresh.Release.Ref {
		add("release ref: locked %s, now %s", locked.Release.Ref, fresh.Release.Ref)
	}
	if locked.Release.Digest != fresh.Release.Digest {
		add("release %s: locked digest %s, now %s", fresh.Release.Ref, locked.Release.Digest, fresh.Release.Digest)
	}
	if locked.Release.Version != fresh.Release.Version {
		add("release version: locked %q, now %q", locked.Release.Version, fresh.Release.Version)
	}
	key := func(im LockedImage) string { return im.Source + " " + im.Name }
	old := map[string]LockedImage{}
	for _, im := range locked.Images {
		old[key(im)] = im
	}
	seen := map[string]bool{}
	for _, im := range fresh.Images {
		k := key(im)
		seen[k] = true
		o, ok := old[k]
		switch {
		case !ok:
			add("image %s (%s): not in the lock, now %s", im.Name, im.Source, im.Digest)
		case o.Digest != im.Digest:
			add("image %s (%s): locked digest %s, now %s", im.Name, im.Source, o.Digest, im.Digest)
		case o.Ref != im.Ref:
			add("image %s (%s): locked ref %s, now %s", im.Name, im.Source, o.Ref, im.Ref)
		}
	}
	for _, im := range locked.Images {
		if !seen[key(im)] {
			add("image %s (%s): in the lock (%s), no longer resolved", im.Name, im.Source, im.Digest)
		}
	}
	switch {
	case locked.ISO == nil && fresh.ISO != nil:
		add("iso: not in the lock, now %s", fresh.ISO.location())
	case locked.ISO != nil && fresh.ISO == nil:
		add("iso: locked %s, no longer found", locked.ISO.location())
	case locked.ISO != nil && !sameISO(locked.ISO, fresh.ISO):
		add("iso: locked %s (sha256 %s), now %s (sha256 %s)", locked.ISO.location(), locked.ISO.SHA256, fresh.ISO.location(), fresh.ISO.SHA256)
	}
	switch {
	case locked.Installer == nil && fresh.Installer != nil:
		add("installer: not in the lock, now %s", fresh.Installer.Digest)
	case locked.Installer != nil && fresh.Installer == nil:
		add("installer: locked %s, no longer found", locked.Installer.Digest)
	case locked.Installer != nil:
		if locked.Installer.Digest != fresh.Installer.Digest {
			add("installer image: locked digest %s, now %s", locked.Installer.Digest, fresh.Installer.Digest)
		}
		// A lock made without extraction (release info) has no binary digest to compare.
		if locked.Installer.SHA256 != "" && fresh.Installer.SHA256 != "" && locked.Installer.SHA256 != fresh.Installer.SHA256 {
			add("openshift-install binary: locked sha256 %s, now %s", locked.Installer.SHA256, fresh.Installer.SHA256)
		}
	}
	return diffs
}

// sameISO compares two pinned ISOs. An image:// URL carries the image digest, so the ISO's
// content is pinned by the URL alone; a lock made without extraction (no sha256, no path)
// still matches one made with it.
func sameISO(a, b *LockedISO) bool {
	if *a == *b {
		return true
	}
	if !a.InImage() || a.URL != b.URL || a.From != b.From {
		return false
	}
	if a.SHA256 == "" || b.SHA256 == "" {
		return true
	}
	return a.SHA256 == b.SHA256
}

func (i *LockedISO) location() string {
	if i.URL != "" {
		return i.URL
	}
	return i.Path
}
