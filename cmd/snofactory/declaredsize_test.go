package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/artifact/diskpack"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
)

// A seed that declares a disk larger than any seed may hold is refused as bad input before
// anything is read or hashed, from a directory and from an oci: layout: verifying the 2^62
// bytes it declares would run for centuries, and a pull must never call it verified.
func TestSeedCommandsRefuseDeclaredSizes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		formats []string
		craft   func(m *seed.Manifest, x *diskpack.Index)
		want    string
	}{
		{"chunked disk of 2^62 bytes", []string{seed.FormatChunked}, func(m *seed.Manifest, x *diskpack.Index) {
			x.Size, m.Disks[0].VirtualSize = 1<<62, 1<<62
		}, "disks[0].virtualSize: 4611686018427387904 bytes is more than the 70368744177664 (64 TiB)"},
		{"raw disk of 2^62 bytes", []string{seed.FormatRaw}, func(m *seed.Manifest, _ *diskpack.Index) {
			m.Disks[0].VirtualSize = 1 << 62
		}, "disks[0].virtualSize: 4611686018427387904 bytes is more than the 70368744177664 (64 TiB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 5, Formats: tc.formats})
			layout := filepath.Join(t.TempDir(), "layout")
			ref := "oci:" + layout + ":v1"
			if _, err := ociseed.Push(context.Background(), dir, ref); err != nil {
				t.Fatal(err)
			}
			craftDeclaredSize(t, dir, layout, tc.craft)
			pulled := filepath.Join(t.TempDir(), "pulled")
			// runMain bounds each command by the test's context and the child's memory
			// limit: before the fix, verify hashed zeros until killed.
			for _, args := range [][]string{
				{"seed", "verify", dir}, {"seed", "inspect", dir},
				{"seed", "verify", ref}, {"seed", "pull", ref, pulled},
			} {
				code, stdout, stderr := runMain(t, args...)
				if code != exitBadInput || !strings.Contains(stderr, tc.want) {
					t.Errorf("%s: exit %d, stderr %q; want %d and %q", strings.Join(args, " "), code, stderr, exitBadInput, tc.want)
				}
				if strings.Contains(stdout, "erified") {
					t.Errorf("%s called the seed verified: %s", strings.Join(args, " "), stdout)
				}
			}
			if _, err := os.Stat(pulled); !os.IsNotExist(err) {
				t.Errorf("the pull made %s before refusing the seed", pulled)
			}
		})
	}
}

// craftDeclaredSize lets craft change the seed in dir (seed.json and its chunk index, if
// any) and puts the same changes into the oci: layout the seed was pushed to, under their
// new digests, so only the declared sizes are wrong.
func craftDeclaredSize(t *testing.T, dir, layout string, craft func(*seed.Manifest, *diskpack.Index)) {
	t.Helper()
	m, err := seed.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	oldManifest, err := os.ReadFile(filepath.Join(dir, seed.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var x *diskpack.Index
	var oldIndex []byte
	if d := m.Disks[0]; d.Index != nil {
		oldIndex, _ = os.ReadFile(filepath.Join(dir, d.Index.File))
		x = new(diskpack.Index)
		if err := json.Unmarshal(oldIndex, x); err != nil {
			t.Fatal(err)
		}
	}
	craft(m, x)
	if x != nil {
		b, err := x.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, m.Disks[0].Index.File), b, 0o644)
		m.Disks[0].Index.Size, m.Disks[0].Index.Digest = int64(len(b)), digest.FromBytes(b)
		defer replaceBlob(t, layout, digest.FromBytes(oldIndex), b)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, seed.ManifestFile), b, 0o644)
	replaceBlob(t, layout, digest.FromBytes(oldManifest), b)
}

// replaceBlob stores b in the layout in place of the blob old and points every descriptor
// of old (in manifests, indexes and index.json) at it, re-storing each changed manifest
// the same way, up to index.json.
func replaceBlob(t *testing.T, layout string, old digest.Digest, b []byte) {
	t.Helper()
	blobs := filepath.Join(layout, "blobs", "sha256")
	if err := os.WriteFile(filepath.Join(blobs, digest.FromBytes(b).Encoded()), b, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(blobs)
	files := []string{filepath.Join(layout, "index.json")}
	for _, e := range entries {
		files = append(files, filepath.Join(blobs, e.Name()))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(raw, []byte(old.String())) || !json.Valid(raw) {
			continue
		}
		var doc any
		json.Unmarshal(raw, &doc)
		repoint(doc, old, digest.FromBytes(b), int64(len(b)))
		changed, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "index.json" {
			os.WriteFile(f, changed, 0o644)
		} else if digest.FromBytes(raw) != old {
			replaceBlob(t, layout, digest.FromBytes(raw), changed)
		}
	}
}

// repoint sets every descriptor of old in the decoded JSON v to the new digest and size.
func repoint(v any, old, new digest.Digest, size int64) {
	switch v := v.(type) {
	case map[string]any:
		if v["digest"] == old.String() {
			v["digest"], v["size"] = new.String(), size
		}
		for _, c := range v {
			repoint(c, old, new, size)
		}
	case []any:
		for _, c := range v {
			repoint(c, old, new, size)
		}
	}
}

// A chunked disk may declare almost the largest size a seed disk may have with one small
// chunk: the rest are holes. Verify checks the chunks and reads or hashes nothing for the
// holes, so it ends in the time its chunks take; before, it hashed 60 TiB of zeros, for
// hours, until the test's context ended it.
func TestSeedVerifyDoesNotHashHoles(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 9, Formats: []string{seed.FormatChunked}})
	layout := filepath.Join(t.TempDir(), "layout")
	if _, err := ociseed.Push(context.Background(), dir, "oci:"+layout+":v1"); err != nil {
		t.Fatal(err)
	}
	craftDeclaredSize(t, dir, layout, func(m *seed.Manifest, x *diskpack.Index) {
		x.Size, m.Disks[0].VirtualSize = 60<<40, 60<<40
	})
	code, stdout, stderr := runMain(t, "seed", "verify", dir)
	if code != 0 {
		t.Fatalf("seed verify: exit %d: %s%s", code, stdout, stderr)
	}
}
