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
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
)

// A seed that declares a disk larger than any seed may hold is refused as bad input before
// anything is read or hashed: verifying the 2^62 bytes it declares would run for centuries.
func TestSeedVerifyRefusesDeclaredSizes(t *testing.T) {
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
			m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Seed: 5, Formats: tc.formats})
			var x *diskpack.Index
			if d := m.Disks[0]; d.Index != nil {
				b, _ := os.ReadFile(filepath.Join(dir, d.Index.File))
				x = new(diskpack.Index)
				if err := json.Unmarshal(b, x); err != nil {
					t.Fatal(err)
				}
			}
			tc.craft(m, x)
			if x != nil {
				b, err := x.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, m.Disks[0].Index.File), b, 0o644)
				m.Disks[0].Index.Size, m.Disks[0].Index.Digest = int64(len(b)), digest.FromBytes(b)
			}
			b, err := m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, seed.ManifestFile), b, 0o644)

			// The test's own deadline bounds it: before the fix, verify hashed zeros until killed.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, args := range [][]string{{"seed", "verify", dir}, {"seed", "inspect", dir}} {
				var out, errb bytes.Buffer
				code := runContext(ctx, args, &out, &errb)
				if code != exitBadInput || !strings.Contains(errb.String(), tc.want) {
					t.Errorf("%s: exit %d, stderr %q; want %d and %q", args[1], code, errb.String(), exitBadInput, tc.want)
				}
			}
		})
	}
}
