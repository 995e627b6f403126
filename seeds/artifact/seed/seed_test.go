package seed_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

func valid() *seed.Manifest {
	d := digest.FromString("x")
	return &seed.Manifest{
		SchemaVersion: seed.SchemaVersion, Name: "sno-1", Target: oskind.OpenShift, ReleaseVersion: "4.18.3",
		Firmware: seed.FirmwareUEFI, BlueprintDigest: d, LockDigest: d, ReconfigurationAPIVersion: "snofactory.io/v1alpha1",
		Created:    time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)),
		Tools:      map[string]string{"snofactory": "v0.1.0", "qemu-img": "9.2.0"},
		Images:     []seed.Image{{Name: "recert", Ref: "quay.io/x/recert@" + d.String(), Digest: d}},
		Validation: seed.Validation{Passed: 10, Skipped: 1, Warnings: 2},
		Disks: []seed.Disk{
			{Format: seed.FormatQCOW2, File: "disk.qcow2", Size: 10, Digest: d, VirtualSize: 100, RawDigest: d},
			{Format: seed.FormatRaw, File: "disk.raw.zst", Compression: seed.CompressionZstd, Size: 10, Digest: d, VirtualSize: 100, RawDigest: d},
		},
		Credentials: &seed.Credentials{File: "credentials.age", Recipients: []string{"age1xyz"}, Size: 5, Digest: d},
		SBOM:        &seed.SBOM{File: "sbom.spdx.json", Size: 7, Digest: d},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m *seed.Manifest)
		want   []string // every substring must appear; none means valid
	}{
		{"valid", func(*seed.Manifest) {}, nil},
		{"coreos without release", func(m *seed.Manifest) { m.Target, m.ReleaseVersion = oskind.CoreOS, "" }, nil},
		{"no credentials", func(m *seed.Manifest) { m.Credentials = nil }, nil},
		{"no sbom (older seeds)", func(m *seed.Manifest) { m.SBOM = nil }, nil},
		{"sbom", func(m *seed.Manifest) {
			m.SBOM.File, m.SBOM.Size, m.SBOM.Digest = "credentials.age", seed.MaxSBOMSize+1, ""
		},
			[]string{`sbom.file: "credentials.age" is also credentials.file`, "sbom.size: 33554433 is not within 1..33554432", "sbom.digest: required"}},
		{"sbom path", func(m *seed.Manifest) { m.SBOM.File, m.SBOM.Size = "/etc/sbom.json", 0 }, []string{`sbom.file: "/etc/sbom.json" is not a plain file name`, "sbom.size: 0"}},
		{"schema version", func(m *seed.Manifest) { m.SchemaVersion = 3 }, []string{"schemaVersion: 3 is not 1 or 2"}},
		{"chunked without index", func(m *seed.Manifest) {
			m.Disks[0].Format = seed.FormatChunked
			m.Disks[0].Compression = seed.CompressionZstd
		},
			[]string{"disks[0].index: required for a chunked disk"}},
		{"chunked in a version 1 manifest", func(m *seed.Manifest) {
			m.SchemaVersion = seed.SchemaVersionV1
			m.Disks[0].Format, m.Disks[0].Compression = seed.FormatChunked, seed.CompressionZstd
			m.Disks[0].Index = &seed.DiskIndex{File: "disk.index", Size: 10, Digest: m.Disks[0].Digest}
		}, []string{"disks[0].format: chunked needs schemaVersion 2"}},
		{"index on a qcow2 disk", func(m *seed.Manifest) {
			m.Disks[0].Index = &seed.DiskIndex{File: "disk.index", Size: 10, Digest: m.Disks[0].Digest}
		}, []string{"disks[0].index: only a chunked disk has one"}},
		{"index named as the disk", func(m *seed.Manifest) {
			m.Disks[0].Format, m.Disks[0].Compression = seed.FormatChunked, seed.CompressionZstd
			m.Disks[0].Index = &seed.DiskIndex{File: m.Disks[0].File, Size: 1 << 30, Digest: "sha256:x"}
		}, []string{"disks[0].index.file: \"disk.qcow2\" is also disks[0].file", "disks[0].index.size:", "disks[0].index.digest:"}},
		{"name", func(m *seed.Manifest) { m.Name = "Bad_Name" }, []string{`name: "Bad_Name" is not a DNS-1123 label`}},
		{"target", func(m *seed.Manifest) { m.Target = "rhel" }, []string{`target: "rhel"`}},
		{"openshift needs release", func(m *seed.Manifest) { m.ReleaseVersion = "" }, []string{"releaseVersion: required for target openshift"}},
		{"firmware", func(m *seed.Manifest) { m.Firmware = "efi" }, []string{`firmware: "efi"`}},
		{"digests", func(m *seed.Manifest) { m.BlueprintDigest, m.LockDigest = "", "md5:abc" }, []string{"blueprintDigest: required", `lockDigest: "md5:abc" is not a sha256 digest`}},
		{"created", func(m *seed.Manifest) { m.Created = time.Time{} }, []string{"created: required"}},
		{"tool version", func(m *seed.Manifest) { m.Tools["qemu-img"] = "" }, []string{`tools: tool "qemu-img"`}},
		{"image", func(m *seed.Manifest) { m.Images[0].Ref, m.Images[0].Digest = "", "sha256:zz" }, []string{"images[0].ref: required", "images[0].digest"}},
		{"failed validation", func(m *seed.Manifest) { m.Validation.Failed = 1 }, []string{"validation.failed: 1 checks failed"}},
		{"no disks", func(m *seed.Manifest) { m.Disks = nil }, []string{"disks: at least one disk"}},
		{"disk path", func(m *seed.Manifest) { m.Disks[0].File = "../disk.qcow2" }, []string{`disks[0].file: "../disk.qcow2" is not a plain file name`}},
		{"disk is manifest", func(m *seed.Manifest) { m.Disks[0].File = seed.ManifestFile }, []string{`disks[0].file: "seed.json" is also the manifest`}},
		{"duplicate files", func(m *seed.Manifest) { m.Credentials.File = "disk.qcow2" }, []string{`credentials.file: "disk.qcow2" is also disks[0].file`}},
		{"qcow2 compression", func(m *seed.Manifest) { m.Disks[0].Compression = "zstd" }, []string{"disks[0].compression"}},
		{"raw compression", func(m *seed.Manifest) { m.Disks[1].Compression = "" }, []string{"disks[1].compression"}},
		{"format", func(m *seed.Manifest) { m.Disks[0].Format = "vmdk" }, []string{`disks[0].format: "vmdk"`}},
		{"sizes", func(m *seed.Manifest) { m.Disks[1].Size, m.Disks[1].VirtualSize = 0, -1 }, []string{"disks[1].size", "disks[1].virtualSize"}},
		{"raw digest", func(m *seed.Manifest) { m.Disks[1].RawDigest = "" }, []string{"disks[1].rawDigest: required"}},
		{"recipients", func(m *seed.Manifest) { m.Credentials.Recipients = nil }, []string{"credentials.recipients"}},
		{"all at once", func(m *seed.Manifest) { m.Name, m.Firmware, m.Disks[0].Size = "", "", 0 },
			[]string{"name:", "firmware:", "disks[0].size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			tc.change(m)
			err := m.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := valid()
	if err := seed.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := seed.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(m.Created) || got.Created.Location() != time.UTC {
		t.Errorf("created = %v, want %v in UTC", got.Created, m.Created)
	}
	a, _ := m.Marshal()
	b, _ := got.Marshal()
	if !bytes.Equal(a, b) {
		t.Errorf("round trip changed the manifest:\n%s\n%s", a, b)
	}
	onDisk, _ := os.ReadFile(filepath.Join(dir, seed.ManifestFile))
	if !bytes.Equal(onDisk, a) || !bytes.HasPrefix(onDisk, []byte("{\n  \"schemaVersion\": 2,")) {
		t.Errorf("stored bytes are not the stable form:\n%s", onDisk)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("staging files left behind: %v", entries)
	}
}

func TestWriteRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	m := valid()
	m.Firmware = ""
	if err := seed.WriteManifest(dir, m); err == nil || !strings.Contains(err.Error(), "firmware") {
		t.Fatalf("WriteManifest = %v, want a firmware error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, seed.ManifestFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an invalid manifest was written: %v", err)
	}
}

func TestReadRefuses(t *testing.T) {
	good, _ := valid().Marshal()
	for _, tc := range []struct{ name, json, want string }{
		{"unknown field", strings.Replace(string(good), `"name":`, `"colour": "red", "name":`, 1), `unknown field "colour"`},
		{"newer version", `{"schemaVersion": 3}`, "schemaVersion 3 is not supported"},
		{"invalid", strings.Replace(string(good), `"uefi"`, `"efi"`, 1), `firmware: "efi"`},
		{"not json", `{`, "seed.json:1:2: the JSON document ends early"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), []byte(tc.json), 0o644)
			_, err := seed.ReadManifest(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadManifest = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDescribeAndRawReader(t *testing.T) {
	dir := t.TempDir()
	m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 7})
	want := seedtest.RawDisk(1<<20, 7)
	for _, d := range m.Disks {
		if d.VirtualSize != int64(len(want)) || d.RawDigest != digest.FromBytes(want) {
			t.Errorf("%s: virtual size %d raw digest %s, want %d %s", d.File, d.VirtualSize, d.RawDigest, len(want), digest.FromBytes(want))
		}
		rc, err := seed.RawReader(context.Background(), dir, d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: raw bytes differ from the disk", d.File)
		}
	}
	if err := seed.Verify(context.Background(), dir); err != nil {
		t.Fatalf("Verify of a fresh seed: %v", err)
	}
}

// TestVerifyCatchesFlippedByte flips one byte in each stored file and expects the mismatch
// to name that file and both digests.
func TestVerifyCatchesFlippedByte(t *testing.T) {
	for _, file := range []string{"disk.qcow2", "disk.raw.zst", seedtest.PackFile, seedtest.IndexFile, "credentials.age", seedtest.SBOMFile} {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Credentials: true, SBOM: true})
			p := filepath.Join(dir, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			err = seed.Verify(context.Background(), dir)
			var mm *seed.MismatchError
			if !errors.As(err, &mm) || mm.File != file || mm.What != "digest" {
				t.Fatalf("Verify = %v, want a digest mismatch of %s", err, file)
			}
			want := want(m, file)
			for _, s := range []string{file, want.String(), digest.FromBytes(b).String()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
		})
	}
}

func want(m *seed.Manifest, file string) digest.Digest {
	for _, d := range m.Disks {
		if d.File == file {
			return d.Digest
		}
		if d.Index != nil && d.Index.File == file {
			return d.Index.Digest
		}
	}
	if m.SBOM != nil && m.SBOM.File == file {
		return m.SBOM.Digest
	}
	return m.Credentials.Digest
}

// TestVerifyRawDigest: a stored file that matches but decodes to other bytes than the
// manifest's raw digest (e.g. a manifest edited by hand) is caught by the raw pass.
func TestVerifyRawDigest(t *testing.T) {
	for _, i := range []int{0, 1} {
		dir := t.TempDir()
		m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20})
		m.Disks[i].RawDigest = digest.FromString("other")
		if err := seed.WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
		err := seed.Verify(context.Background(), dir)
		var mm *seed.MismatchError
		if !errors.As(err, &mm) || mm.File != m.Disks[i].File || mm.What != "raw digest" {
			t.Errorf("%s: Verify = %v, want a raw digest mismatch", m.Disks[i].File, err)
		}
	}
}

// TestSBOMOptional: a seed with an SBOM records and verifies it; one written before the
// SBOM existed (no sbom field) still reads and verifies.
func TestSBOMOptional(t *testing.T) {
	for _, withSBOM := range []bool{true, false} {
		dir := t.TempDir()
		seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}, SBOM: withSBOM})
		b, err := os.ReadFile(filepath.Join(dir, seed.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte(`"sbom"`)); got != withSBOM {
			t.Errorf("sbom %v: seed.json has the field: %v", withSBOM, got)
		}
		m, err := seed.ReadManifest(dir)
		if err != nil {
			t.Fatalf("sbom %v: %v", withSBOM, err)
		}
		if (m.SBOM != nil) != withSBOM || (withSBOM && m.SBOM.File != seedtest.SBOMFile) {
			t.Errorf("sbom %v: manifest sbom %+v", withSBOM, m.SBOM)
		}
		if err := seed.Verify(context.Background(), dir); err != nil {
			t.Errorf("sbom %v: %v", withSBOM, err)
		}
	}
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}, SBOM: true})
	os.Remove(filepath.Join(dir, seedtest.SBOMFile))
	if _, err := seed.Check(dir); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), seedtest.SBOMFile) {
		t.Errorf("Check without the SBOM file = %v", err)
	}
}

func TestVerifyMissingFile(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}})
	os.Remove(filepath.Join(dir, "disk.raw.zst"))
	err := seed.Verify(context.Background(), dir)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "disk.raw.zst") {
		t.Fatalf("Verify = %v, want a missing disk.raw.zst", err)
	}
}
