package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/registry"
)

// TestSeedCommands runs each seed command against a real registry.
func TestSeedCommands(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json")) // no user credentials
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	src := t.TempDir()
	m := seedtest.Write(t, src, seedtest.Options{RawSize: 2 << 20, Credentials: true, Seed: 5})
	ref := r.Ref("seeds/demo:v1")
	report := filepath.Join(t.TempDir(), "validation.json")
	os.WriteFile(report, []byte(`{"passed":3}`), 0o644)
	pulled := filepath.Join(t.TempDir(), "pulled")
	dev := filepath.Join(t.TempDir(), "disk.img")

	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"seed", "push", "--chunk-size", "512KiB", "--attach", report + "=application/vnd.snofactory.validation.v1+json", src, ref}, "Pushed " + ref + "@sha256:"},
		{[]string{"seed", "push", "--chunk-size", "512KiB", src, ref}, "0B sent"},
		{[]string{"seed", "inspect", ref}, "Reconfiguration API:  snofactory.io/v1alpha1"},
		{[]string{"seed", "pull", ref, pulled}, "Pulled seed demo into " + pulled},
		{[]string{"seed", "verify", ref}, "every digest matches"},
		{[]string{"seed", "verify", pulled}, "every digest matches"},
		{[]string{"seed", "write", "--image", ref, "--device", dev}, "raw digest " + m.Disks[0].RawDigest.String() + " verified"},
		{[]string{"seed", "write", "--image", src, "--device", dev}, "verified"},
		{[]string{"seed", "verify", src, "--device", dev}, "holds the seed's disk, complete"},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.out) {
			t.Fatalf("%s: exit %d, stdout %q (want %q), stderr %s", strings.Join(tc.args, " "), code, stdout, tc.out, stderr)
		}
	}
	// A later build of the seed moves as a delta: diff shows what it shares, and a pull or a
	// write --from the earlier seed (or the device holding it) fetches only the rest.
	src2 := t.TempDir()
	seedtest.Write(t, src2, seedtest.Options{RawSize: 2 << 20, Credentials: true, Seed: 5,
		Change: func(raw []byte) { copy(raw[1<<20:], "a changed file") }})
	ref2 := r.Ref("seeds/demo:v2")
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"seed", "push", src2, ref2}, "Pushed " + ref2},
		{[]string{"seed", "diff", src, src2}, "chunks: "},
		{[]string{"seed", "diff", ref, ref2}, "stored bytes: "},
		{[]string{"seed", "pull", "--from", pulled, ref2, filepath.Join(t.TempDir(), "v2")}, "reused "},
		{[]string{"seed", "write", "--image", ref2, "--device", dev, "--from", dev}, "reused "},
		{[]string{"seed", "verify", src2, "--device", dev}, "holds the seed's disk, complete"},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.out) {
			t.Fatalf("%s: exit %d, stdout %q (want %q), stderr %s", strings.Join(tc.args, " "), code, stdout, tc.out, stderr)
		}
		t.Logf("%s:\n%s", strings.Join(tc.args[:2], " "), stdout)
	}
	if code, _, stderr := runMain(t, "seed", "write", "--image", src2, "--device", dev, "--from", dev); code != 2 || !strings.Contains(stderr, "--from") {
		t.Errorf("write --from with a local seed: exit %d, %s", code, stderr)
	}

	// -o json is the seed's manifest as seed.json has it, with its digest and what is
	// attached to it (nothing, for this unsigned seed).
	code, stdout, stderr := runMain(t, "seed", "inspect", "--output", "json", ref)
	want, _ := os.ReadFile(filepath.Join(src, seed.ManifestFile))
	var view struct {
		Digest       string
		Seed         json.RawMessage
		Signatures   []any
		Attestations []any
	}
	if err := json.Unmarshal([]byte(stdout), &view); code != 0 || err != nil || compactJSON(t, view.Seed) != compactJSON(t, want) ||
		!strings.HasPrefix(view.Digest, "sha256:") || view.Signatures == nil || len(view.Signatures) != 0 || len(view.Attestations) != 0 {
		t.Errorf("inspect --output json: exit %d, %v: %s\nwant seed %s\n%s", code, err, stdout, want, stderr)
	}
	want2 := seedtest.RawDisk(2<<20, 5)
	copy(want2[1<<20:], "a changed file")
	if got, _ := os.ReadFile(dev); !bytes.Equal(got, want2) {
		t.Errorf("seed write: the device does not hold the raw disk")
	}
	for _, f := range []string{"disk.qcow2", "disk.raw.zst", "credentials.age", seed.ManifestFile} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, _ := os.ReadFile(filepath.Join(pulled, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("seed pull: %s differs", f)
		}
	}
}

func TestSeedErrors(t *testing.T) {
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}})
	broken := t.TempDir()
	seedtest.Write(t, broken, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}})
	p := filepath.Join(broken, "disk.raw.zst")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	crafted := t.TempDir()
	seedtest.Write(t, crafted, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}})
	os.Remove(filepath.Join(crafted, "disk.raw.zst"))
	os.Symlink("/etc/passwd", filepath.Join(crafted, "disk.raw.zst"))
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"push not a seed", []string{"seed", "push", t.TempDir(), "oci:" + t.TempDir()}, 2, "is not a seed directory"},
		{"push bad ref", []string{"seed", "push", src, "Not A Ref"}, 2, "names no registry"},
		{"push without a registry", []string{"seed", "push", src, "seeds/demo:1"}, 2, `"seeds/demo:1" names no registry`},
		{"push bad ref with a registry", []string{"seed", "push", src, "registry.example.com/Not A Ref"}, 2, "parsing the seed reference"},
		{"verify a directory that is not a seed", []string{"seed", "verify", t.TempDir()}, 2, "is not a seed directory: it holds no seed.json"},
		{"verify a missing path", []string{"seed", "verify", "./no-such-seed"}, 2, "no such seed directory: ./no-such-seed"},
		{"inspect a bare name", []string{"seed", "inspect", "demo"}, 2, `"demo" names no registry`},
		{"write a seed with a symlinked disk", []string{"seed", "write", "--image", crafted, "--device", filepath.Join(t.TempDir(), "disk.img")}, 2, "disk.raw.zst: is a symbolic link"},
		{"push a seed with a symlinked disk", []string{"seed", "push", crafted, "oci:" + filepath.Join(t.TempDir(), "l") + ":v1"}, 2, "disk.raw.zst: is a symbolic link"},
		{"boot a seed with a symlinked disk", []string{"seed", "boot", crafted}, 2, "disk.raw.zst: is a symbolic link"},
		{"write onto a character device", []string{"seed", "write", "--image", src, "--device", "/dev/null"}, 2, "/dev/null: is a character device"},
		{"write onto the seed's own disk", []string{"seed", "write", "--image", src, "--device", filepath.Join(src, "disk.raw.zst")}, 2, "is this command's input"},
		{"write a corrupt seed", []string{"seed", "write", "--image", broken, "--device", filepath.Join(t.TempDir(), "disk.img")}, 2, "disk.raw.zst: digest mismatch"},
		{"push bad chunk size", []string{"seed", "push", "--chunk-size", "lots", src, "oci:" + t.TempDir()}, 2, "--chunk-size"},
		{"push bad attach", []string{"seed", "push", "--attach", "x.json", src, "oci:" + t.TempDir()}, 2, "FILE=ARTIFACT_TYPE"},
		{"inspect bad output", []string{"seed", "inspect", "-o", "xml", src}, 2, "--output"},
		// A seed that fails verification is untrusted input, as it is to write and pull.
		{"verify corrupt", []string{"seed", "verify", broken}, 2, "disk.raw.zst: digest mismatch"},
		{"pull missing layout", []string{"seed", "pull", "oci:" + filepath.Join(t.TempDir(), "none"), t.TempDir()}, 2, "no such OCI layout directory"},
		{"pull missing tag", []string{"seed", "pull", "oci:" + t.TempDir() + ":none", t.TempDir()}, 1, "no manifest named"},
		{"pull into a file", []string{"seed", "pull", "oci:" + t.TempDir() + ":v1", "/dev/null"}, 2, "/dev/null: DIR is not a directory; pull into a new directory"},
		{"write without device", []string{"seed", "write", "--image", src}, 2, "--device"},
		{"write mounted", []string{"seed", "write", "--image", src, "--device", rootDevice(t)}, 2, "is mounted at /"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args[len(tc.args)-1] == "" {
				t.Skip("/ is not on a block device here")
			}
			code, _, stderr := runMain(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr, tc.msg)
			}
		})
	}
}

// rootDevice is the block device mounted at /; the write test only asks whether it is
// mounted, which comes before any open for writing.
func rootDevice(t *testing.T) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 9 && fields[4] == "/" && strings.HasPrefix(fields[len(fields)-2], "/dev/") {
			if fi, err := os.Stat(fields[len(fields)-2]); err == nil && fi.Mode()&os.ModeDevice != 0 {
				return fields[len(fields)-2]
			}
		}
	}
	return ""
}

// compactJSON is b without insignificant space, to compare documents.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return out.String()
}
