package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
)

// damagedLayout pushes a chunked seed into an OCI layout and changes one byte of one of
// its chunks there, under the chunk's digest: a seed that fails verification. It returns
// the reference and the damaged chunk's digest (hex).
func damagedLayout(t *testing.T) (ref, chunk string) {
	t.Helper()
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: 7})
	layout := filepath.Join(t.TempDir(), "layout")
	ref = "oci:" + layout + ":v1"
	if _, err := ociseed.Push(context.Background(), src, ref); err != nil {
		t.Fatal(err)
	}
	_, idx, err := ociseed.DiskIndex(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	chunk = idx.Chunks[len(idx.Chunks)/2].Group.Encoded() // the blob that holds the chunk
	flipByte(t, filepath.Join(layout, "blobs", "sha256", chunk))
	return ref, chunk
}

var keptIn = regexp.MustCompile(`kept in (\S+):`)

// A seed that fails verification is the user's input (exit 2) from every command that reads
// it, and a message that says the fetched chunks are kept names a directory that exists:
// a write's staging (which the same write resumes from) and a pull's are kept, a verify's
// temporary directory is removed and not named.
func TestBadSeedExitsAndKeptChunks(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ref, chunk := damagedLayout(t)
	for _, tc := range []struct {
		name string
		args []string
		kept bool
	}{
		{"verify", []string{"seed", "verify", ref}, false},
		{"verify a device", []string{"seed", "verify", ref, "--device", filepath.Join(t.TempDir(), "d.img")}, false},
		{"pull", []string{"seed", "pull", ref, filepath.Join(t.TempDir(), "pulled")}, true},
		{"write", []string{"seed", "write", "--image", ref, "--device", filepath.Join(t.TempDir(), "d.img")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, tc.args...)
			if code != exitBadInput || !strings.Contains(stderr, chunk[:12]) {
				t.Fatalf("exit %d, want %d and a message naming chunk %s:\n%s", code, exitBadInput, chunk[:12], stderr)
			}
			m := keptIn.FindStringSubmatch(stderr)
			switch {
			case tc.kept && m == nil:
				t.Fatalf("the message does not say where the fetched chunks are kept:\n%s", stderr)
			case !tc.kept && m != nil:
				t.Fatalf("the message says chunks are kept in %s, a directory this command removes:\n%s", m[1], stderr)
			case tc.kept:
				if fi, err := os.Stat(m[1]); err != nil || !fi.IsDir() {
					t.Fatalf("the message says chunks are kept in %s, which is gone: %v", m[1], err)
				}
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "snofactory-seed-verify-*")); len(left) > 0 {
		t.Errorf("verify left %v behind", left)
	}
}

// Bad input is exit 2 before anything starts, with a message naming the input: a trust
// policy that is not one, a depot record no depot wrote, a depot glob that matches no
// blueprint, a count of 0 in a depot file, a site medium that is no ISO.
func TestBadInputIsExit2(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := hostileSeed(t, nil)
	layout := "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"
	if code, _, stderr := runMain(t, "seed", "push", good, layout); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	badPolicy := write("policy.json", `{"default": [{"type": "nope"}]}`)
	notJSON := write("notjson.json", "default: reject\n")
	status := write("depot/"+"depot.json", "{}")
	write("others/a.yaml", "kind: Site\n")
	depotZero := write("zero/depot.yaml", "apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: d\nspec:\n  blueprints: ['*.yaml']\n  parallelBuilds: 0\n")
	depotNone := write("none/depot.yaml", "apiVersion: snofactory.io/v1alpha1\nkind: Depot\nmetadata:\n  name: d\nspec:\n  blueprints: ['../others/*.yaml']\n")
	out := filepath.Join(t.TempDir(), "out") // must never be made: nothing starts
	notISO := write("site.iso", strings.Repeat("not an ISO 9660 image\n", 4096))
	// No qemu on the child's PATH: the refusal must come before any VM or disk tool is
	// needed. The child's alone: the test still needs prlimit to start it.
	noTools := "PATH=" + t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"policy of an unknown requirement", []string{"seed", "pull", "--policy", badPolicy, layout, t.TempDir()}, []string{badPolicy}},
		{"policy that is not JSON", []string{"seed", "verify", "--policy", notJSON, layout}, []string{notJSON}},
		{"policy that does not exist", []string{"seed", "write", "--policy", filepath.Join(dir, "absent.json"), "--image", layout, "--device", filepath.Join(dir, "d.img")}, []string{"absent.json"}},
		{"depot status of {}", []string{"depot", "status", filepath.Dir(status)}, []string{status, "not a depot record"}},
		{"depot glob of no blueprint", []string{"depot", "run", filepath.Join(dir, "others", "*.yaml"), "--output-dir", out}, []string{"others/*.yaml", "matches no blueprint"}},
		{"depot file glob of no blueprint", []string{"depot", "run", depotNone, "--output-dir", out}, []string{"others/*.yaml", "matches no blueprint"}},
		{"depot file parallelBuilds: 0", []string{"depot", "run", depotZero, "--output-dir", out}, []string{depotZero, "spec.parallelBuilds: must be at least 1, got 0"}},
		{"seed boot of a medium that is no ISO", []string{"seed", "boot", "--site-config", notISO, good}, []string{"--site-config", notISO, "not an ISO 9660 image"}},
		{"seed boot with a forward and NICs", []string{"seed", "boot", "--forward", "8080:10.0.2.50:80", "--nic", "tap,ifname=tap0", good}, []string{"--nic user,hostfwd=tcp:127.0.0.1:8080-10.0.2.50:80"}},
		{"seed boot of a NIC that names its netdev", []string{"seed", "boot", "--nic", "tap,id=n0,ifname=tap0", good}, []string{`--nic "tap,id=n0,ifname=tap0": leave out id=`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMainWith(t, func(c *exec.Cmd) { c.Env = append(c.Env, noTools) }, tc.args...)
			if code != exitBadInput {
				t.Fatalf("exit %d, want %d:\n%s%s", code, exitBadInput, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stdout, "Booting") {
				t.Errorf("a VM was started:\n%s", stdout)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("the depot's output directory was made")
			}
		})
	}
}

// The extra-manifests/ beside an image-based-config.yaml may be a symlink to a directory:
// it is followed and its manifests checked, never silently left off the medium.
func TestImageBasedExtraManifestsSymlink(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"image-based-config.yaml", "install-config.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../seeds/site/siteconfig/testdata/image-based", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	manifests := t.TempDir()
	os.WriteFile(filepath.Join(manifests, "broken.yaml"), []byte("kind: ConfigMap\n"), 0o644)
	if err := os.Symlink(manifests, filepath.Join(dir, "extra-manifests")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain(t, "site-config", "validate", filepath.Join(dir, "image-based-config.yaml"))
	if code != exitBadInput || !strings.Contains(stdout+stderr, "broken.yaml") {
		t.Errorf("exit %d, want %d and the manifest broken.yaml named:\n%s%s", code, exitBadInput, stdout, stderr)
	}
	// A symlink to nothing is named too.
	os.Remove(filepath.Join(dir, "extra-manifests"))
	os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "extra-manifests"))
	code, stdout, stderr = runMain(t, "site-config", "validate", filepath.Join(dir, "image-based-config.yaml"))
	if code != exitBadInput || !strings.Contains(stdout+stderr, "extra-manifests") {
		t.Errorf("dangling symlink: exit %d, want %d and extra-manifests named:\n%s%s", code, exitBadInput, stdout, stderr)
	}
}
