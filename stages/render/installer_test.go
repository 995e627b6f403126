package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What `openshift-install version` prints, in the forms installer
// cmd/openshift-install/version.go runVersionCmd gives: os.Args[0] as the installer was run,
// then the optional commit line, the release image and, from a later installer (version.go
// at de45fedd, not at 1679af70), the release architecture (plus the default architecture
// when that is multi or unknown).
func TestParseInstallerVersion(t *testing.T) {
	const (
		injected = "built from commit 37c9f6e0a5b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5\n" +
			"release image quay.io/openshift-release-dev/ocp-release@sha256:" + "ab" + "cd" + "ef" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab\n" +
			"release architecture amd64\n"
		fromImage = "built from commit 37c9f6e\nrelease image registry.ci.openshift.org/origin/release:4.16\n" +
			"release architecture unknown\ndefault architecture amd64\n"
	)
	for _, tc := range []struct {
		name, argv0, out string
		version, release string
		err              string
	}{
		{"absolute path, injected by oc", "/usr/local/bin/openshift-install", "/usr/local/bin/openshift-install 4.16.3\n" + injected,
			"4.16.3", "quay.io/openshift-release-dev/ocp-release@sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab", ""},
		{"relative path, from the installer image", "./bin/openshift-install", "./bin/openshift-install 4.16.0-202406111407.p0.g37c9f6e.assembly.stream.el9\n" + fromImage,
			"4.16.0-202406111407.p0.g37c9f6e.assembly.stream.el9", "registry.ci.openshift.org/origin/release:4.16", ""},
		{"path with spaces", "/srv/my tools/openshift-install", "/srv/my tools/openshift-install 4.16.3\r\n" + injected, "4.16.3", "", ""},
		{"wrapper run under another name", "/opt/wrap/openshift-install", "/tmp/x/openshift-install 4.16.3\n", "4.16.3", "", ""},
		{"no commit line", "oi", "oi 4.16.3\nrelease image q/r@sha256:00\nrelease architecture amd64\n", "4.16.3", "q/r@sha256:00", ""},
		{"not built correctly", "/bin/oi", "/bin/oi was not built correctly\n", "", "", `printed "/bin/oi was not built correctly"`},
		{"nothing", "/bin/oi", "", "", "", "expected the program path and a version"},
		{"path only", "/bin/oi", "/bin/oi\n", "", "", "expected the program path and a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := parseInstallerVersion(tc.out, tc.argv0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || info.version != tc.version || (tc.release != "" && info.release != tc.release) {
				t.Fatalf("got %+v, %v; want version %q release %q", info, err, tc.version, tc.release)
			}
		})
	}
}

// An installer oc injected with another release's digest is refused, naming both; one
// injected with the pinned digest under a mirror's name, or one straight from the installer
// image (the CI default, by tag), is not.
func TestCheckInstallerRelease(t *testing.T) {
	d := func(b string) string { return "sha256:" + strings.Repeat(b, 64) }
	pinned := "mirror.example:5000/ocp/release@" + d("a")
	for _, tc := range []struct {
		own  string
		fail bool
	}{
		{"quay.io/openshift-release-dev/ocp-release@" + d("a"), false},
		{"registry.ci.openshift.org/origin/release:4.16", false},
		{"quay.io/openshift-release-dev/ocp-release@" + d("b"), true},
	} {
		err := checkInstallerRelease("/bin/oi", installerInfo{version: "4.16.3", release: tc.own}, pinned)
		if (err != nil) != tc.fail {
			t.Fatalf("%s: error %v, want failure %v", tc.own, err, tc.fail)
		}
		if err != nil && (!strings.Contains(err.Error(), tc.own) || !strings.Contains(err.Error(), pinned)) {
			t.Errorf("error %q does not name both releases", err)
		}
	}
	if err := checkInstallerRelease("/bin/oi", installerInfo{release: "q/r@" + d("b")}, ""); err != nil {
		t.Errorf("no pinned release: %v", err)
	}
}

// Render runs the installer by whatever path it is given; the stand-in prints that path
// first, as the real installer does, and render still reads its version.
func TestRenderRunsInstallerByAnyPath(t *testing.T) {
	abs := standIn(t)
	rel, err := filepath.Rel(mustGetwd(t), abs)
	if err != nil {
		t.Fatal(err)
	}
	spaced := filepath.Join(t.TempDir(), "my tools", "openshift-install-standin")
	if err := os.MkdirAll(filepath.Dir(spaced), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-R", filepath.Dir(abs), spaced).CombinedOutput(); err != nil {
		t.Fatalf("copying the stand-in: %v %s", err, out)
	}
	for name, p := range map[string]string{"absolute": abs, "relative": rel, "with spaces": filepath.Join(spaced, "openshift-install")} {
		t.Run(name, func(t *testing.T) {
			// The stand-in answers as the path it was run by.
			v, err := exec.Command(p, "version").Output()
			if err != nil || !strings.HasPrefix(string(v), p+" ") {
				t.Fatalf("%s version printed %q (%v), want it to start with its own path", p, v, err)
			}
			o := clusterOptions(t)
			o.InstallerPath = p
			out := renderTo(t, o)
			var rep Report
			if err := json.Unmarshal(mustRead(t, filepath.Join(out, "render.json")), &rep); err != nil {
				t.Fatal(err)
			}
			if got := rep.Tools["openshift-install"]; got != standInVersion {
				t.Errorf("openshift-install version %q, want %q", got, standInVersion)
			}
		})
	}
}

// An installer extracted (by oc) for another release than the one being installed stops
// render before it writes anything.
func TestRenderRefusesAnotherReleasesInstaller(t *testing.T) {
	o := clusterOptions(t)
	o.OpenShift.ReleaseImage = "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64)
	other := "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("b", 64)
	injected := filepath.Join(t.TempDir(), "openshift-install")
	// version.go runVersionCmd for a binary oc injected with the other release.
	script := "#!/bin/sh\nif [ \"$1\" = version ]; then printf '%s 4.16.3\\nbuilt from commit 37c9f6e\\nrelease image " + other +
		"\\nrelease architecture amd64\\n' \"$0\"; exit 0; fi\nexec '" + o.InstallerPath + "' \"$@\"\n"
	if err := os.WriteFile(injected, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o.InstallerPath = injected
	err := Render(context.Background(), o, testSecrets(t), t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), o.OpenShift.ReleaseImage) {
		t.Fatalf("error %v, want one naming %s and %s", err, other, o.OpenShift.ReleaseImage)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
