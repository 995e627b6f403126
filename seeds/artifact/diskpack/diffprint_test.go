package diskpack

import (
	"bytes"
	"testing"
)

func TestDiffWriteText(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Diff
		want string
	}{
		{"half shared", Diff{Chunks: 4, SharedChunks: 2, Bytes: 4 << 20, SharedBytes: 2 << 20, Stored: 2 << 20, SharedStored: 1 << 20,
			Groups: 2, SharedGroups: 1, PushStored: 3 << 19},
			"new shares with old:\n  chunks: 2 of 4 (50.0%)\n  raw bytes: 2MiB of 4MiB (50.0%)\n" +
				"  stored bytes: 1MiB of 2MiB (50.0%); moving new where old is sends 1MiB\n" +
				"  chunk groups: 1 of 2 (50.0%); pushing new after old sends 1.5MiB\n"},
		{"an empty disk is all shared", Diff{},
			"new shares with old:\n  chunks: 0 of 0 (100.0%)\n  raw bytes: 0B of 0B (100.0%)\n" +
				"  stored bytes: 0B of 0B (100.0%); moving new where old is sends 0B\n" +
				"  chunk groups: 0 of 0 (100.0%); pushing new after old sends 0B\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.d.WriteText(&b, "old", "new"); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
