package seed

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// failAfter reads from r and fails once n bytes were read.
type failAfter struct {
	r io.Reader
	n int
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("the medium went away")
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

// A block device is written in place, its first MiB last: a completed write holds the
// disk (and what lay beyond it is untouched, nothing is truncated); a write that stops
// part-way, or whose digest does not match, clears the first MiB and says the device
// holds partial data. (A regular file stands in for the device: the writes are the same.)
func TestWriteBlockHeadLast(t *testing.T) {
	raw := bytes.Repeat([]byte("seed-disk-"), 400_000)[:3<<20]
	d := Disk{File: "disk.raw.zst", VirtualSize: int64(len(raw)), RawDigest: digest.FromBytes(raw)}
	for _, tc := range []struct {
		name    string
		reader  func() io.Reader
		disk    Disk
		partial string
	}{
		{"complete", func() io.Reader { return bytes.NewReader(raw) }, d, ""},
		{"the source fails mid-way", func() io.Reader { return &failAfter{r: bytes.NewReader(raw), n: 2 << 20} }, d, "the medium went away"},
		{"the digest does not match", func() io.Reader { return bytes.NewReader(raw) },
			Disk{File: d.File, VirtualSize: d.VirtualSize, RawDigest: digest.FromString("other")}, "raw digest mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "dev")
			old := bytes.Repeat([]byte{0x5a}, 4<<20)
			os.WriteFile(dev, old, 0o644)
			err := writeBlock(context.Background(), dev, tc.disk, tc.reader())
			got, _ := os.ReadFile(dev)
			if len(got) != len(old) {
				t.Fatalf("the device is %d bytes, was %d: a device is never truncated", len(got), len(old))
			}
			if tc.partial == "" {
				if err != nil || !bytes.Equal(got[:len(raw)], raw) || !bytes.Equal(got[len(raw):], old[len(raw):]) {
					t.Fatalf("err %v; the device does not hold the disk followed by its old tail", err)
				}
				return
			}
			var pe *PartialError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "now holds partial data") || !strings.Contains(err.Error(), tc.partial) {
				t.Fatalf("err = %v, want a partial-data error with %q", err, tc.partial)
			}
			if !bytes.Equal(got[:headLen], make([]byte, headLen)) {
				t.Error("the first MiB was not cleared after a failed write")
			}
		})
	}
}
