package render

import (
	"strings"
	"testing"
)

func TestReleaseVersion(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		ref, want string
	}{
		{"quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64", "4.16.12"},
		{"registry.example:5000/ocp/release:4.18", "4.18"},
		{"127.0.0.1:5000/ocp/release:4.16.0-rc.1", "4.16.0"},
		{"quay.io/ocp/release:4.16.12.1", "4.16.12"},
		{"quay.io/ocp/release:4.16_x86_64", "4.16"},
		// Pinned by digest: the version comes from the lock, even with a tag beside it.
		{"quay.io/ocp/release" + digest, ""},
		{"quay.io/ocp/release:4.16.12-x86_64" + digest, ""},
		// Tags that do not start with a version, and no tag at all (the port is no tag).
		{"quay.io/ocp/release:latest", ""},
		{"quay.io/ocp/release:v4.16.12", ""},
		{"quay.io/ocp/release:4", ""},
		{"quay.io/ocp/release:4.16x", ""},
		{"registry.example:4.16/ocp/release", ""},
		{"quay.io/ocp/release", ""},
	} {
		got, err := ReleaseVersion(tc.ref)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("ReleaseVersion(%s) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), tc.ref) {
			t.Errorf("ReleaseVersion(%s): error %q does not name the reference", tc.ref, err)
		}
	}
}

func TestSplitRef(t *testing.T) {
	digest := "sha256:" + strings.Repeat("b", 64)
	for _, tc := range []struct {
		ref, repo, tag, digest string
	}{
		{"quay.io/ocp/release:4.16.3", "quay.io/ocp/release", "4.16.3", ""},
		{"127.0.0.1:5000/ocp/release:4.16.3-x86_64", "127.0.0.1:5000/ocp/release", "4.16.3-x86_64", ""},
		{"127.0.0.1:5000/ocp/release@" + digest, "127.0.0.1:5000/ocp/release", "", digest},
		{"quay.io/ocp/release:4.16@" + digest, "quay.io/ocp/release", "4.16", digest},
		{"localhost:5000/release", "localhost:5000/release", "", ""},
	} {
		repo, tag, digest := splitRef(tc.ref)
		if repo != tc.repo || tag != tc.tag || digest != tc.digest {
			t.Errorf("splitRef(%s) = %q, %q, %q; want %q, %q, %q", tc.ref, repo, tag, digest, tc.repo, tc.tag, tc.digest)
		}
	}
}
