package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// lockFile is the resolve stage's lock in its output directory.
const lockFile = lockfile.File

var (
	sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// versionPrefix is an OpenShift version at the start of a tag or a lock's version:
	// x.y[.z], then nothing or a separator (4.16.12-x86_64, 4.16.0-rc.1, 4.16.3+build).
	versionPrefix = regexp.MustCompile(`^(\d+\.\d+(?:\.\d+)?)(?:[-_.+].*)?$`)
)

// ReleaseVersion reads the OpenShift version x.y[.z] from a release image reference whose
// tag starts with it, such as quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64. It
// fails for references pinned by digest and tags that do not start with a version: then the
// version comes from the release resolve locks.
func ReleaseVersion(ref string) (string, error) {
	if _, tag, digest := splitRef(ref); digest == "" {
		if v := leadingVersion(tag); v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("release image %s: cannot tell the OpenShift version from the reference; use a tag that starts with it (e.g. :4.16.12-x86_64)", ref)
}

// leadingVersion is the x.y[.z] that s starts with, or "".
func leadingVersion(s string) string {
	if m := versionPrefix.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// ReleaseReport is the release the installer was told to install and where that came from.
type ReleaseReport struct {
	// Image is OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE ("" when the installer's own release).
	Image string `json:"image,omitempty"`
	// Version is the x.y[.z] that picked the Butane openshift variant.
	Version string `json:"version"`
	// From is "lock" when Image is pinned from the upstream stage's lock.json, else "options".
	From string `json:"from"`
}

// pinRelease returns the cluster with the release the installer must install: with the
// resolve stage's lock, the release image pinned by digest (the blueprint's reference is
// usually a tag, which can move between resolve and render) and, when Options leave it
// empty, the version from the lock. Without a lock the Options' values stand.
func pinRelease(env *runEnv, c *OpenShift) (*OpenShift, *ReleaseReport, error) {
	out := *c
	rep := &ReleaseReport{Image: c.ReleaseImage, Version: c.Version, From: "options"}
	if env.resolved == nil {
		if out.Version == "" {
			return nil, nil, errors.New("openshift.version is empty and there is no resolve stage output whose lock could supply it (snofactory render without the pipeline needs the version)")
		}
		return &out, rep, nil
	}
	in := env.resolved
	stage := in.Stage
	if in.Out.Lock == "" {
		return nil, nil, fmt.Errorf("the %s stage recorded no lock: an openshift render pins its release from it", stage)
	}
	lock, err := lockfile.ReadLock(in.Path(in.Out.Lock))
	if err != nil {
		return nil, nil, fmt.Errorf("the %s stage's %s: %w", stage, lockFile, err)
	}
	r := lock.Release
	if r.Ref == "" || !sha256Digest.MatchString(r.Digest) {
		return nil, nil, fmt.Errorf("the %s stage's %s pins no release (ref %q, digest %q): an openshift render needs one", stage, lockFile, r.Ref, r.Digest)
	}
	lockVersion := leadingVersion(r.Version)
	switch {
	case out.Version == "" && lockVersion == "":
		return nil, nil, fmt.Errorf("openshift.version is empty and the %s stage's %s has no x.y[.z] release version (%q)", stage, lockFile, r.Version)
	case out.Version == "":
		out.Version = lockVersion
	case lockVersion != "" && minor(lockVersion) != minor(out.Version):
		// The version picks the MachineConfigs' Ignition spec: it must be the release's.
		return nil, nil, fmt.Errorf("openshift.version %s does not match the locked release %s (version %s)", out.Version, r.Ref, r.Version)
	}
	repo, _, _ := splitRef(r.Ref)
	out.ReleaseImage = repo + "@" + r.Digest
	return &out, &ReleaseReport{Image: out.ReleaseImage, Version: out.Version, From: "lock"}, nil
}

// splitRef splits an image reference into its repository, tag and digest ("" when absent).
func splitRef(ref string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(ref, "@")
	// A colon after the last slash starts a tag; one before it is a registry port.
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// minor is the x.y of an x.y[.z] version.
func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
