package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
)

// imageBasedDir copies the image-based installer's sample inputs into a directory and lets
// change edit them by file name.
func imageBasedDir(t *testing.T, change func(name string, b []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"image-based-config.yaml", "install-config.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../seeds/site/siteconfig/testdata/image-based", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), change(f, b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A key named twice in image-based-config.yaml or the install-config.yaml beside it, at the
// top or deeper, is bad input (exit 2) named at file:line:column with its path and the
// first key's place, never reported as something else (an unsupported apiVersion).
func TestSiteConfigValidateDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"duplicated key", "image-based-config.yaml", "releaseRegistry: quay.io\n", "releaseRegistry: quay.io\nhostname: other.example.com\n",
			`:15:1: hostname: duplicate key "hostname" (first at line 13, column 1)`},
		{"duplicate at depth", "image-based-config.yaml", "      type: ethernet\n", "      type: ethernet\n      name: eth1\n",
			`:21:7: networkConfig.interfaces[0].name: duplicate key "name" (first at line 19, column 7)`},
		{"install config: duplicated key", "install-config.yaml", "compute:\n", "baseDomain: other.example\ncompute:\n",
			`:3:1: baseDomain: duplicate key "baseDomain" (first at line 2, column 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := imageBasedDir(t, func(name string, b []byte) []byte {
				if name != tc.file {
					return b
				}
				if !strings.Contains(string(b), tc.old) {
					t.Fatalf("%s has no %q", name, tc.old)
				}
				return []byte(strings.Replace(string(b), tc.old, tc.new, 1))
			})
			code, stdout, stderr := runMain(t, "site-config", "validate", filepath.Join(dir, "image-based-config.yaml"))
			want := filepath.Join(dir, tc.file) + tc.want
			if code != exitBadInput || !strings.Contains(stdout+stderr, want) {
				t.Errorf("exit %d, want %d and %q:\n%s%s", code, exitBadInput, want, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, "apiVersion") {
				t.Errorf("reported as another kind of file:\n%s%s", stdout, stderr)
			}
		})
	}
}

// A seed whose chunk index gives one chunk id two blobs, or has a key twice, is bad input
// (exit 2) for verify, refused before any chunk is read, with the chunk and both values
// named.
func TestSeedVerifyStrictIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b []byte, x *diskpack.Index) []byte
		want   func(x *diskpack.Index) string
	}{
		{"chunk id that disagrees with its blob", func(_ []byte, x *diskpack.Index) []byte {
			x.Chunks[1].ID = x.Chunks[0].ID
			b, err := x.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, func(x *diskpack.Index) string {
			return "chunks[1] at offset " + strconv.FormatInt(x.Chunks[1].Offset, 10) + ": id " + string(x.Chunks[0].ID) +
				" disagrees with its blob: chunks[0] has the same id with blob " + string(x.Chunks[0].Blob)
		}},
		{"index with a duplicated key", func(b []byte, _ *diskpack.Index) []byte {
			return []byte(strings.Replace(string(b), `{"version":`, `{"size":1,"version":`, 1))
		}, func(*diskpack.Index) string {
			return `disk.index: decoding the disk index: line 1, column 23: duplicate key "size"`
		}},
		{"index with data after it", func(b []byte, _ *diskpack.Index) []byte { return append(b, "{}"...) },
			func(*diskpack.Index) string { return "data after the JSON document" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 11, Formats: []string{seed.FormatChunked}})
			d := &m.Disks[0]
			p := filepath.Join(dir, d.Index.File)
			b, _ := os.ReadFile(p)
			var x diskpack.Index
			if err := json.Unmarshal(b, &x); err != nil || len(x.Chunks) < 2 {
				t.Fatalf("the test seed's index: %v, %d chunks", err, len(x.Chunks))
			}
			b = tc.change(b, &x)
			os.WriteFile(p, b, 0o644)
			d.Index.Size, d.Index.Digest = int64(len(b)), digest.FromBytes(b)
			mb, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), mb, 0o644)

			code, stdout, stderr := runMain(t, "seed", "verify", dir)
			if want := tc.want(&x); code != exitBadInput || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want %d and %q:\n%s%s", code, exitBadInput, want, stdout, stderr)
			}
		})
	}
}
