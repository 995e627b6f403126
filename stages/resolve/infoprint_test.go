package resolve

import (
	"bytes"
	"testing"

	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

func TestInfoWriteText(t *testing.T) {
	base := Info{Ref: "quay.io/r:4.18", Digest: "sha256:d", Version: "4.18.1", Arch: "x86_64", Components: 190,
		UniqueBlobs: 600, UniqueBlobBytes: 20 << 30, TotalBlobBytes: 30 << 30}
	full := base
	full.ISO, full.Installer = &lockfile.LockedISO{URL: "https://x/live.iso"}, "quay.io/installer@sha256:i"
	head := "Release:                  quay.io/r:4.18\n" +
		"Digest:                   sha256:d\n" +
		"Version:                  4.18.1\n" +
		"Components:               190\n" +
		"Unique blobs:             600 (20GiB (21474836480 bytes))\n" +
		"Blobs per image, summed:  30GiB (32212254720 bytes)\n"
	for _, tc := range []struct {
		name string
		info Info
		want string
	}{
		{"without ISO or installer", base, head},
		{"with both", full, head + "Live ISO (x86_64):        https://x/live.iso\nInstaller:                quay.io/installer@sha256:i\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.info.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}
