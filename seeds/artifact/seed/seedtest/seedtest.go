package seedtest

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// Options shape the seed Write builds.
type Options struct {
	// RawSize of the disk in bytes (default 3 MiB); rounded up to 512.
	RawSize int64
	// Formats to store the disk in (default qcow2, raw and chunked).
	Formats []string
	// Credentials adds a credentials.age file.
	Credentials bool
	// SBOM adds the seed's SBOM (seeds/artifact/sbom) as SBOMFile.
	SBOM bool
	// Seed makes the disk content reproducible; two Writes with the same Seed are identical.
	Seed uint64
	// Change, when set, alters the raw disk before it is stored (a later build of a seed).
	Change func(raw []byte)
}

// Write builds a seed in dir (created if needed) and returns its manifest, failing t on error.
func Write(t testing.TB, dir string, o Options) *seed.Manifest {
	t.Helper()
	if o.RawSize == 0 {
		o.RawSize = 3 << 20
	}
	o.RawSize = (o.RawSize + 511) &^ 511
	if len(o.Formats) == 0 {
		o.Formats = []string{seed.FormatQCOW2, seed.FormatRaw, seed.FormatChunked}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw := RawDisk(o.RawSize, o.Seed)
	if o.Change != nil {
		o.Change(raw)
	}
	scratch := t.TempDir()
	rawPath := filepath.Join(scratch, "disk.raw")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := &seed.Manifest{
		SchemaVersion:             seed.SchemaVersion,
		Name:                      "demo",
		Target:                    oskind.CoreOS,
		Firmware:                  seed.FirmwareBIOS,
		BlueprintDigest:           digest.FromString("blueprint"),
		LockDigest:                digest.FromString("lock"),
		ReconfigurationAPIVersion: "snofactory.io/v1alpha1",
		Created:                   time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Tools:                     map[string]string{"snofactory": "test", "qemu-img": "test"},
		Images:                    []seed.Image{{Name: "agent", Ref: "registry.example/agent@" + digest.FromString("agent").String(), Digest: digest.FromString("agent")}},
		Validation:                seed.Validation{Passed: 3},
	}
	for _, f := range o.Formats {
		var d seed.Disk
		var err error
		if f == seed.FormatChunked {
			var sums *diskpack.Packed
			// Groups of 2 chunks, which a disk this small would not get, so that tests
			// move chunk groups and range requests.
			if sums, err = diskpack.PackFiles(ctx, rawPath, filepath.Join(dir, PackFile), filepath.Join(dir, IndexFile), Params(), diskpack.WithGroupChunks(2)); err == nil {
				d, err = seed.DescribeChunked(dir, PackFile, IndexFile, sums)
			}
		} else {
			name := writeDisk(t, dir, rawPath, raw, f)
			d, err = seed.DescribeDisk(ctx, dir, name, f)
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Disks = append(m.Disks, d)
	}
	if o.Credentials {
		if err := os.WriteFile(filepath.Join(dir, "credentials.age"), []byte("age-encryption.org/v1\n-> X25519 test\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := seed.DescribeCredentials(ctx, dir, "credentials.age", []string{"age1testrecipient"})
		if err != nil {
			t.Fatal(err)
		}
		m.Credentials = c
	}
	if o.SBOM {
		m.SBOM = writeSBOM(t, dir, m)
	}
	if err := seed.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeDisk(t testing.TB, dir, rawPath string, raw []byte, format string) string {
	t.Helper()
	switch format {
	case seed.FormatRaw:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "disk.raw.zst"), enc.EncodeAll(raw, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		return "disk.raw.zst"
	case seed.FormatQCOW2:
		out := filepath.Join(dir, "disk.qcow2")
		if b, err := exec.Command("qemu-img", "convert", "-q", "-c", "-f", "raw", "-O", "qcow2", rawPath, out).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img convert: %v: %s", err, b)
		}
		return "disk.qcow2"
	}
	t.Fatalf("unknown format %q", format)
	return ""
}

// The files of a chunked disk, as the sealer names them.
const (
	PackFile  = "disk.pack"
	IndexFile = "disk.index"
)

// Params are small chunk sizes, so that a test disk of a few MiB makes dozens of chunks.
func Params() diskpack.Params { return diskpack.Params{Min: 16 << 10, Avg: 64 << 10, Max: 256 << 10} }

// RawDisk returns n bytes of disk content from seed: random (incompressible) 64 KiB runs
// between runs of zeros, as a sparse disk has.
func RawDisk(n int64, seedValue uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seedValue, seedValue^0x5eed))
	for off := int64(0); off < n; off += 128 << 10 {
		end := min(off+64<<10, n)
		for i := off; i < end; i += 8 {
			v := r.Uint64()
			for j := int64(0); j < 8 && i+j < end; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
	}
	return b
}

// SBOMFile is the SBOM Write adds with Options.SBOM.
const SBOMFile = sbom.FileName

// writeSBOM writes the SBOM of the seed m, with a few Debian packages, into dir.
func writeSBOM(t testing.TB, dir string, m *seed.Manifest) *seed.SBOM {
	t.Helper()
	doc, err := sbom.Build(sbom.Input{Manifest: m, OS: sbom.OSPackages{Manager: sbom.ManagerDpkg, DistroID: "debian", DistroVersion: "12", Total: 2,
		Packages: []sbom.Package{{Name: "busybox-static", Version: "1:1.35.0-4+b3", Arch: "amd64"}, {Name: "ignition", Version: "2.14.0-1+b5", Arch: "amd64"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sbom.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SBOMFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := seed.DescribeSBOM(context.Background(), dir, SBOMFile)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
