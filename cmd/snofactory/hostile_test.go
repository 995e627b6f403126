package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/testbin"
)

// hostOnly marks the bytes of host files a crafted input points at: they must never reach
// an output, a message or a registry.
const hostOnly = "HOST-ONLY-c0ffee"

// hostileSeed builds a good seed (qcow2 and raw) in a new directory and lets craft break it.
func hostileSeed(t *testing.T, craft func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 11, Formats: []string{seed.FormatQCOW2, seed.FormatRaw}})
	if craft != nil {
		craft(dir)
	}
	return dir
}

// restamp records the qcow2 disk's new size and digest in the manifest, so only what the
// craft put inside the file is wrong.
func restamp(t *testing.T, dir string) {
	t.Helper()
	m, err := seed.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Disks {
		if m.Disks[i].Format == seed.FormatQCOW2 {
			n, dg, err := seed.FileDigest(context.Background(), filepath.Join(dir, m.Disks[i].File))
			if err != nil {
				t.Fatal(err)
			}
			m.Disks[i].Size, m.Disks[i].Digest = n, dg
		}
	}
	b, _ := m.Marshal()
	os.WriteFile(filepath.Join(dir, seed.ManifestFile), b, 0o644)
}

// TestHostileInputs is the crafted-input suite: seeds, seed.json, site configs,
// references and targets made by someone who means harm or by a slip of the keyboard.
// Each case must be refused with the right exit code and a message naming the problem;
// the target must be left exactly as it was; no host file's bytes may reach stdout, stderr
// or any output; nothing may be left beside the target. Block devices are exercised in
// seeds/artifact/seed and pipeline/output on loop devices where the machine allows them; here
// targets are files, /dev/null and directories.
func TestHostileInputs(t *testing.T) {
	host := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(host, []byte(hostOnly+":x:0:0:root:/root\npassword: hunter2\n"), 0o644)
	hostDisk := filepath.Join(t.TempDir(), "host.raw")
	os.WriteFile(hostDisk, bytes.Repeat([]byte(hostOnly), 1<<14), 0o644)
	qcow2 := func(dir string, args ...string) {
		p := filepath.Join(dir, "disk.qcow2")
		os.Remove(p)
		if out, err := exec.Command("qemu-img", append(append([]string{"create", "-q", "-f", "qcow2"}, args...), p, "1M")...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v: %s", err, out)
		}
		restamp(t, dir)
	}
	manifest := func(dir, body string) { os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte(body), 0o644) }

	seeds := []struct {
		name, want string
		craft      func(dir string)
	}{
		{"disk symlinked to a host file", "disk.raw.zst: is a symbolic link", func(d string) {
			os.Remove(filepath.Join(d, "disk.raw.zst"))
			os.Symlink(host, filepath.Join(d, "disk.raw.zst"))
		}},
		{"disk symlinked to a device", "disk.qcow2: is a symbolic link", func(d string) {
			os.Remove(filepath.Join(d, "disk.qcow2"))
			os.Symlink("/dev/zero", filepath.Join(d, "disk.qcow2"))
		}},
		{"disk is a FIFO", "disk.raw.zst: is a FIFO", func(d string) {
			os.Remove(filepath.Join(d, "disk.raw.zst"))
			syscall.Mkfifo(filepath.Join(d, "disk.raw.zst"), 0o644)
		}},
		{"seed.json symlinked", "seed.json: is a symbolic link", func(d string) {
			os.Rename(filepath.Join(d, seed.ManifestFile), filepath.Join(d, "m.json"))
			os.Symlink("m.json", filepath.Join(d, seed.ManifestFile))
		}},
		{"a stray symlink beside the files", "etc: is a symbolic link", func(d string) { os.Symlink("/etc", filepath.Join(d, "etc")) }},
		{"qcow2 with a backing file", "disk.qcow2: names a backing file", func(d string) { qcow2(d, "-F", "raw", "-b", hostDisk) }},
		{"qcow2 with an external data file", "disk.qcow2: keeps its data in an external data file", func(d string) {
			qcow2(d, "-o", "data_file="+filepath.Join(t.TempDir(), "data"))
		}},
		{"stored disk longer than declared", "disk.raw.zst: holds", func(d string) {
			f, _ := os.OpenFile(filepath.Join(d, "disk.raw.zst"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte(hostOnly))
			f.Close()
		}},
		{"flipped byte in the stored disk", "disk.raw.zst: digest mismatch", func(d string) {
			p := filepath.Join(d, "disk.raw.zst")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}},
		{"seed.json naming a path", "is not a plain file name", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, seed.ManifestFile))
			manifest(d, strings.Replace(string(b), `"disk.raw.zst"`, `"../../../etc/passwd"`, 1))
		}},
		{"seed.json too large", "seed.json: holds", func(d string) {
			manifest(d, `{"schemaVersion":1,"name":"`+strings.Repeat("a", 2<<20)+`"}`)
		}},
		{"seed.json malformed", "seed.json:3:3: invalid character", func(d string) {
			manifest(d, "{\n  \"schemaVersion\": 1\n  \"name\": \"x\"\n}\n")
		}},
		{"seed.json is a password file", "seed.json:1:1: invalid character", func(d string) { manifest(d, hostOnly+"\npassword: hunter2\n") }},
		{"seed.json of another schema", "schemaVersion 9 is not supported", func(d string) { manifest(d, `{"schemaVersion":9}`) }},
	}

	type tc struct {
		name   string
		args   []string
		code   int
		want   string
		target string // a file that must be left as it was, "" for none
	}
	var cases []tc
	for _, s := range seeds {
		dir := hostileSeed(t, s.craft)
		target := filepath.Join(t.TempDir(), "disk.img")
		os.WriteFile(target, []byte("old disk"), 0o644)
		cases = append(cases,
			tc{"write: " + s.name, []string{"seed", "write", "--image", dir, "--device", target}, exitBadInput, s.want, target},
			tc{"push: " + s.name, []string{"seed", "push", dir, "oci:" + filepath.Join(t.TempDir(), "layout") + ":v1"}, exitBadInput, s.want, ""},
		)
	}

	good := hostileSeed(t, nil)
	readOnly := filepath.Join(t.TempDir(), "ro.img")
	os.WriteFile(readOnly, []byte("keep"), 0o444)
	siteDir := t.TempDir()
	site := filepath.Join(siteDir, "site.yaml")
	demo, _ := os.ReadFile("../../blueprints/demo/site.yaml")
	os.WriteFile(site, demo, 0o644)
	passwdLink := filepath.Join(siteDir, "link.yaml")
	os.Symlink(host, passwdLink)
	sameDir := t.TempDir()
	bp, err := testbin.CopyDemo(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		tc{"write onto /dev/null", []string{"seed", "write", "--image", good, "--device", "/dev/null"}, exitBadInput, "is a character device", ""},
		tc{"write onto a directory", []string{"seed", "write", "--image", good, "--device", t.TempDir()}, exitBadInput, "is a directory", ""},
		tc{"write onto a read-only file", []string{"seed", "write", "--image", good, "--device", readOnly}, exitBadInput, "is a read-only file", readOnly},
		tc{"write onto the seed's own disk", []string{"seed", "write", "--image", good, "--device", filepath.Join(good, "disk.raw.zst")}, exitBadInput, "is this command's input", filepath.Join(good, "disk.raw.zst")},
		tc{"write into a missing directory", []string{"seed", "write", "--image", good, "--device", filepath.Join(t.TempDir(), "no", "d.img")}, exitBadInput, "its directory does not exist", ""},
		tc{"verify a bare name", []string{"seed", "verify", "demo"}, exitBadInput, `"demo" names no registry`, ""},
		tc{"inspect a missing path", []string{"seed", "inspect", "./no-such-seed"}, exitBadInput, "no such seed directory", ""},
		tc{"pull a missing layout", []string{"seed", "pull", "oci:/no/such/layout:v1", t.TempDir()}, exitBadInput, "no such OCI layout directory", ""},
		tc{"verify a directory that is no seed", []string{"seed", "verify", t.TempDir()}, exitBadInput, "is not a seed directory", ""},
		tc{"push without a registry", []string{"seed", "push", good, "seeds/demo:1"}, exitBadInput, "names no registry", ""},
		tc{"site config that is a password file", []string{"site-config", "validate", passwdLink}, exitBadInput, "is invalid", ""},
		tc{"site medium over its own input", []string{"site-config", "create", site, "-o", site}, exitBadInput, "is this command's input", site},
		tc{"site medium onto /dev/null", []string{"site-config", "create", site, "-o", "/dev/null"}, exitBadInput, "is a character device", ""},
		tc{"site medium over a read-only file", []string{"site-config", "create", site, "-o", readOnly}, exitBadInput, "is a read-only file", readOnly},
		tc{"lock over its own blueprint", []string{"lock", bp, "-o", bp}, exitBadInput, "is this command's input", bp},
		tc{"render into the blueprint's directory", []string{"render", bp, "-o", filepath.Dir(bp)}, exitBadInput, "-o holds this command's input", bp},
		tc{"build output directory holding the blueprint", []string{"build", bp, "--until", "render", "--output-dir", filepath.Dir(bp), "--cache-dir", t.TempDir()},
			exitBadInput, "the output directory holds this command's input", bp},
		tc{"build cache directory holding the blueprint", []string{"build", bp, "--until", "render", "--output-dir", t.TempDir(), "--cache-dir", filepath.Dir(filepath.Dir(bp))},
			exitBadInput, "the cache directory holds this command's input", bp},
		tc{"one directory as output and cache", []string{"build", bp, "--until", "render", "--output-dir", sameDir, "--cache-dir", sameDir}, exitBadInput, "give each its own", ""},
	)
	if len(cases) < 40 {
		t.Fatalf("%d crafted cases, want at least 40", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before []byte
			var siblings []string
			if c.target != "" {
				before, _ = os.ReadFile(c.target)
				siblings = listDir(c.target)
			}
			// The bound: a refusal is cheap, so a case still running after 10 s is
			// reading something it should have refused (a device, a FIFO, a huge file).
			// Cases take milliseconds; the deadline stops a runaway instead of hanging, and
			// RunChild fails the case when it does.
			bin := snofactoryBin.Path(t)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			// The real binary, with its memory limited: a case that grows without bound
			// fails here instead of taking the machine down.
			code, stdout, stderr := testbin.RunChild(ctx, t, bin, c.args, nil)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.want)
			}
			for _, leak := range []string{hostOnly, "hunter2"} {
				if strings.Contains(stdout+stderr, leak) {
					t.Errorf("a host file's bytes reached the output: %q", stdout+stderr)
				}
			}
			if c.target != "" {
				if after, _ := os.ReadFile(c.target); !bytes.Equal(before, after) {
					t.Errorf("%s changed", c.target)
				}
				if after := listDir(c.target); fmt.Sprint(after) != fmt.Sprint(siblings) {
					t.Errorf("left behind beside the target: %v, was %v", after, siblings)
				}
			}
		})
	}
}

// listDir names the entries beside path.
func listDir(path string) []string {
	entries, _ := os.ReadDir(filepath.Dir(path))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
