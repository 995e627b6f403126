package seed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/testbin"
)

// hostFile stands for a host file a crafted seed points at: its bytes must never reach
// an output or a message.
const hostSecret = "HOST-ONLY-7f3a9c: root:x:0:0"

// craftedSeed builds a good seed (qcow2 and raw) and lets craft break it.
func craftedSeed(t *testing.T, formats []string, craft func(t *testing.T, dir string, m *seed.Manifest)) string {
	t.Helper()
	dir := t.TempDir()
	if formats == nil {
		formats = []string{seed.FormatQCOW2, seed.FormatRaw}
	}
	m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 7, Formats: formats})
	craft(t, dir, m)
	return dir
}

// rewrite stores m again (its digests as given) after craft changed it.
func rewrite(t *testing.T, dir string, m *seed.Manifest) {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, seed.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hostFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(p, []byte(hostSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// replaceWithSymlink swaps a seed file for a symlink to target.
func replaceWithSymlink(t *testing.T, dir, name, target string) {
	t.Helper()
	os.Remove(filepath.Join(dir, name))
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// rewriteIndex changes the chunked disk's index and records the new index's digest and
// size in the manifest, so only the index's content is wrong.
func rewriteIndex(t *testing.T, dir string, m *seed.Manifest, change func(*diskpack.Index)) {
	t.Helper()
	d := &m.Disks[0]
	b, err := os.ReadFile(filepath.Join(dir, d.Index.File))
	if err != nil {
		t.Fatal(err)
	}
	var x diskpack.Index
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	change(&x)
	if b, err = x.Marshal(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, d.Index.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d.Index.Size, d.Index.Digest = int64(len(b)), digest.FromBytes(b)
	rewrite(t, dir, m)
}

// rewriteIndexBytes changes the chunked disk's index as bytes and records its digest and
// size in the manifest.
func rewriteIndexBytes(t *testing.T, dir string, m *seed.Manifest, change func([]byte) []byte) {
	t.Helper()
	d := &m.Disks[0]
	p := filepath.Join(dir, d.Index.File)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = change(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	d.Index.Size, d.Index.Digest = int64(len(b)), digest.FromBytes(b)
	rewrite(t, dir, m)
}

// qcow2With makes a 1 MiB qcow2 with qemu-img create options (a backing file, a data file)
// and records it in the manifest in place of the seed's qcow2 disk, digests and all, so only
// the reference outside the file is wrong.
func qcow2With(t *testing.T, dir string, m *seed.Manifest, args ...string) {
	t.Helper()
	p := filepath.Join(dir, "disk.qcow2")
	os.Remove(p)
	cmd := exec.Command("qemu-img", append(append([]string{"create", "-q", "-f", "qcow2"}, args...), p, "1M")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	n, dg, err := seed.FileDigest(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Disks {
		if m.Disks[i].Format == seed.FormatQCOW2 {
			m.Disks[i].Size, m.Disks[i].Digest = n, dg
		}
	}
	rewrite(t, dir, m)
}

// Crafted seeds are refused by verify and write with a message naming the problem, as a
// bad seed (exit 2 at the CLI); a write's target is left exactly as it was; no host file's
// bytes reach the target or the message; every case ends within seconds.
func TestHostileSeeds(t *testing.T) {
	chunked := []string{seed.FormatChunked}
	// A chunked disk is written without a whole-pack hash first: its damaged chunk is
	// named as it is reached.
	writeWants := map[string]string{"pack flipped byte": "in disk.pack: blake3 check mismatch"}
	for _, tc := range []struct {
		name    string
		craft   func(t *testing.T, dir string, m *seed.Manifest)
		want    string
		formats []string
	}{
		{"pack flipped byte", func(t *testing.T, dir string, m *seed.Manifest) {
			p := filepath.Join(dir, seedtest.PackFile)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0xff
			os.WriteFile(p, b, 0o600)
		}, "disk.pack: digest mismatch", chunked},
		{"index is a symlink to a host file", func(t *testing.T, dir string, m *seed.Manifest) {
			replaceWithSymlink(t, dir, seedtest.IndexFile, hostFile(t))
		}, "disk.index: is a symbolic link", chunked},
		{"index with overlapping chunks", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Chunks[1].Offset = x.Chunks[0].Offset })
		}, "overlaps the chunk before", chunked},
		{"index with a chunk past the disk's end", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Chunks[len(x.Chunks)-1].Offset = 1 << 40 })
		}, "ends past the disk", chunked},
		{"index of a larger disk than the manifest's", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Size = 1 << 40 })
		}, "describes a disk of 1099511627776 bytes", chunked},
		{"index claims chunks larger than any allowed", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Params.Max = 1 << 40 })
		}, "chunk sizes", chunked},
		{"index blob shared by chunks of other content", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Chunks[1].Blob = x.Chunks[0].Blob })
		}, "is also chunks[0], a chunk with other content", chunked},
		{"disk is a symlink to a host file", func(t *testing.T, dir string, m *seed.Manifest) {
			replaceWithSymlink(t, dir, "disk.raw.zst", hostFile(t))
		}, "disk.raw.zst: is a symbolic link", nil},
		{"disk is a symlink to a device", func(t *testing.T, dir string, m *seed.Manifest) {
			replaceWithSymlink(t, dir, "disk.raw.zst", "/dev/zero")
		}, "disk.raw.zst: is a symbolic link", nil},
		{"manifest is a symlink", func(t *testing.T, dir string, m *seed.Manifest) {
			os.Rename(filepath.Join(dir, seed.ManifestFile), filepath.Join(dir, "real.json"))
			os.Symlink("real.json", filepath.Join(dir, seed.ManifestFile))
		}, "seed.json: is a symbolic link", nil},
		{"disk is a FIFO", func(t *testing.T, dir string, m *seed.Manifest) {
			os.Remove(filepath.Join(dir, "disk.raw.zst"))
			if err := syscall.Mkfifo(filepath.Join(dir, "disk.raw.zst"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "disk.raw.zst: is a FIFO", nil},
		{"a stray socket-like entry: a symlink beside the files", func(t *testing.T, dir string, m *seed.Manifest) {
			os.Symlink("/etc", filepath.Join(dir, "extra"))
		}, "extra: is a symbolic link", nil},
		{"qcow2 with a backing file", func(t *testing.T, dir string, m *seed.Manifest) {
			back := filepath.Join(t.TempDir(), "host.raw")
			os.WriteFile(back, bytes.Repeat([]byte(hostSecret), 1<<15), 0o644)
			qcow2With(t, dir, m, "-F", "raw", "-b", back)
		}, "disk.qcow2: names a backing file", nil},
		{"qcow2 with an external data file", func(t *testing.T, dir string, m *seed.Manifest) {
			qcow2With(t, dir, m, "-o", "data_file="+filepath.Join(t.TempDir(), "host.data"))
		}, "disk.qcow2: keeps its data in an external data file", nil},
		{"qcow2 larger than declared", func(t *testing.T, dir string, m *seed.Manifest) {
			for i := range m.Disks {
				m.Disks[i].VirtualSize = 4096
			}
			rewrite(t, dir, m)
		}, "has a virtual size of 1048576 bytes, the manifest says 4096", nil},
		{"raw disk stored as qcow2", func(t *testing.T, dir string, m *seed.Manifest) {
			for i := range m.Disks {
				if m.Disks[i].Format == seed.FormatRaw {
					m.Disks[i].Format = seed.FormatQCOW2
					m.Disks[i].Compression = ""
				}
			}
			rewrite(t, dir, m)
		}, "is not a qcow2 image, as the manifest says it is", nil},
		{"stored file longer than declared", func(t *testing.T, dir string, m *seed.Manifest) {
			f, _ := os.OpenFile(filepath.Join(dir, "disk.raw.zst"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte(hostSecret))
			f.Close()
		}, "disk.raw.zst: holds", nil},
		{"flipped byte in the stored disk", func(t *testing.T, dir string, m *seed.Manifest) {
			p := filepath.Join(dir, "disk.raw.zst")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, "disk.raw.zst: digest mismatch", nil},
		{"file name with a path", func(t *testing.T, dir string, m *seed.Manifest) {
			b, _ := os.ReadFile(filepath.Join(dir, seed.ManifestFile))
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), bytes.Replace(b, []byte(`"disk.raw.zst"`), []byte(`"../../etc/passwd"`), 1), 0o644)
		}, "seed.json: invalid seed manifest", nil},
		{"manifest larger than any real one", func(t *testing.T, dir string, m *seed.Manifest) {
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), append([]byte(`{"schemaVersion":1,"name":"`), bytes.Repeat([]byte("a"), 2<<20)...), 0o644)
		}, "seed.json: holds", nil},
		{"manifest with a syntax error", func(t *testing.T, dir string, m *seed.Manifest) {
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte("{\n  \"schemaVersion\": 1,\n  \"name\": \"x\"\n  \"target\": \"coreos\"\n}\n"), 0o644)
		}, "seed.json:4:3: invalid character", nil},
		{"manifest with a wrong type", func(t *testing.T, dir string, m *seed.Manifest) {
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte("{\n  \"schemaVersion\": 1,\n  \"disks\": \"all\"\n}\n"), 0o644)
		}, "seed.json:3:12: cannot unmarshal string", nil},
		{"manifest with a duplicated key", func(t *testing.T, dir string, m *seed.Manifest) {
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte("{\n  \"schemaVersion\": 2,\n  \"schemaVersion\": 1\n}\n"), 0o644)
		}, `seed.json:3:3: duplicate key "schemaVersion" (first at line 2, column 3)`, nil},
		{"manifest with a second document after it", func(t *testing.T, dir string, m *seed.Manifest) {
			p := filepath.Join(dir, seed.ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, "{}\n"...), 0o644)
		}, "data after the JSON document", nil},
		{"index with a duplicated key", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndexBytes(t, dir, m, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`{"version":`), []byte(`{"size":1,"version":`), 1)
			})
		}, `line 1, column 23: duplicate key "size" (first at line 1, column 2)`, chunked},
		{"index with a chunk id that disagrees with its blob", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Chunks[1].ID = x.Chunks[0].ID })
		}, "chunks[1] at offset", chunked},
		{"index with data after it", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndexBytes(t, dir, m, func(b []byte) []byte { return append(b, "[]"...) })
		}, "data after the JSON document", chunked},
		{"chunked disk of 2^62 bytes", func(t *testing.T, dir string, m *seed.Manifest) {
			rewriteIndex(t, dir, m, func(x *diskpack.Index) { x.Size, m.Disks[0].VirtualSize = 1<<62, 1<<62 })
		}, "virtualSize: 4611686018427387904 bytes is more than the 70368744177664 (64 TiB)", chunked},
		{"raw disk larger than its frames can expand to", func(t *testing.T, dir string, m *seed.Manifest) {
			for i := range m.Disks {
				m.Disks[i].VirtualSize = 1 << 45
			}
			rewrite(t, dir, m)
		}, "stored bytes of disk.raw.zst can expand to", nil},
		{"manifest is another file", func(t *testing.T, dir string, m *seed.Manifest) {
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte(hostSecret+"\npassword: hunter2\n"), 0o644)
		}, "seed.json:1:1: invalid character", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := craftedSeed(t, tc.formats, tc.craft)
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := seed.Verify(ctx, dir)
			checkRefused(t, "verify", err, tc.want)

			target := filepath.Join(t.TempDir(), "target.img")
			old := bytes.Repeat([]byte{0x5a}, 3<<20)
			os.WriteFile(target, old, 0o644)
			_, err = seed.WriteDevice(ctx, dir, target)
			want := tc.want
			if w, ok := writeWants[tc.name]; ok {
				want = w
			}
			checkRefused(t, "write", err, want)
			if got, _ := os.ReadFile(target); !bytes.Equal(got, old) {
				t.Errorf("write: the target changed (%d bytes)", len(got))
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(target), ".*partial*")); len(leftovers) > 0 {
				t.Errorf("write left %v behind", leftovers)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Logf("took %s", d) // reported, not asserted: the bound is the test timeout
			}
		})
	}
}

func checkRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s accepted the crafted seed", what)
	}
	if !errors.Is(err, seed.ErrBadSeed) {
		t.Errorf("%s: %v is not a bad-seed error (exit 2)", what, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want %q", what, err, want)
	}
	if strings.Contains(err.Error(), "HOST-ONLY") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("%s quotes a host file: %v", what, err)
	}
}

// Targets that must not be written are refused before the seed is read further, and are
// left as they were.
func TestWriteRefusesTargets(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}, Seed: 2})
	readOnly := filepath.Join(t.TempDir(), "ro.img")
	os.WriteFile(readOnly, []byte("keep"), 0o444)
	for _, tc := range []struct{ name, target, want string }{
		{"the seed's own disk", filepath.Join(dir, "disk.raw.zst"), "is this command's input " + filepath.Join(dir, "disk.raw.zst")},
		{"the seed's manifest", filepath.Join(dir, seed.ManifestFile), "is this command's input " + filepath.Join(dir, seed.ManifestFile)},
		{"a directory", t.TempDir(), "is a directory"},
		{"a character device", "/dev/null", "is a character device"},
		{"a read-only file", readOnly, "is a read-only file"},
		{"a missing directory", filepath.Join(t.TempDir(), "no", "disk.img"), "its directory does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.target)
			_, err := seed.WriteDevice(context.Background(), dir, tc.target)
			if !output.IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteDevice(%s) = %v, want a refusal with %q", tc.target, err, tc.want)
			}
			if after, _ := os.ReadFile(tc.target); !bytes.Equal(before, after) {
				t.Error("the target changed")
			}
		})
	}
	if err := seed.Verify(context.Background(), dir); err != nil {
		t.Errorf("the seed itself was harmed: %v", err)
	}
}

// A real block device (a loop device, where the machine allows one): written in place,
// first MiB last, never truncated; one smaller than the disk is refused untouched.
func TestWriteLoopDevice(t *testing.T) {
	loop := func(t *testing.T, size int) (dev, backing string, detach func()) {
		backing = filepath.Join(t.TempDir(), "disk.img")
		os.WriteFile(backing, bytes.Repeat([]byte{0xa5}, size), 0o644)
		dev, detach = testbin.LoopDevice(t, backing)
		return dev, backing, detach
	}
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 2 << 20, Formats: []string{seed.FormatRaw}, Seed: 9})
	small, smallBacking, detachSmall := loop(t, 1<<20)
	if _, err := seed.WriteDevice(context.Background(), dir, small); err == nil || !strings.Contains(err.Error(), "the seed's disk needs") {
		t.Errorf("a too-small device: %v", err)
	}
	detachSmall()
	if b, _ := os.ReadFile(smallBacking); !bytes.Equal(b, bytes.Repeat([]byte{0xa5}, 1<<20)) {
		t.Error("the too-small device was changed")
	}
	for _, format := range []string{seed.FormatRaw, seed.FormatChunked} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			seedtest.Write(t, dir, seedtest.Options{RawSize: 2 << 20, Formats: []string{format}, Seed: 9})
			dev, backing, detach := loop(t, 4<<20)
			d, err := seed.WriteDevice(context.Background(), dir, dev)
			if err != nil || d.Format != format {
				t.Fatalf("wrote %s: %v", d.Format, err)
			}
			if _, err := seed.VerifyDevice(context.Background(), dir, dev); err != nil {
				t.Errorf("verify --device: %v", err)
			}
			detach()
			b, _ := os.ReadFile(backing)
			if len(b) != 4<<20 || !bytes.Equal(b[:2<<20], seedtest.RawDisk(2<<20, 9)) || b[(2<<20)+1] != 0xa5 {
				t.Errorf("the device does not hold the disk followed by its old content (%d bytes)", len(b))
			}
		})
	}
}
