package seed_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/pipeline/smallfile"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
)

func TestWriteDevice(t *testing.T) {
	for _, formats := range [][]string{{seed.FormatRaw}, {seed.FormatQCOW2}, {seed.FormatChunked}} {
		t.Run(formats[0], func(t *testing.T) {
			dir := t.TempDir()
			seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: formats, Seed: 3})
			dev := filepath.Join(t.TempDir(), "disk")
			// Old content longer than the disk must not survive.
			os.WriteFile(dev, bytes.Repeat([]byte{0xaa}, 3<<20), 0o644)
			d, err := seed.WriteDevice(context.Background(), dir, dev)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(dev)
			if d.Format != formats[0] || !bytes.Equal(got, seedtest.RawDisk(1<<20, 3)) {
				t.Errorf("the device does not hold the raw disk (%s, %d bytes)", d.Format, len(got))
			}
			// A disk in a file keeps what the seed keeps (an OpenShift node's private keys).
			if fi, _ := os.Stat(dev); fi.Mode().Perm() != 0o600 {
				t.Errorf("the written disk file has mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

func TestWriteDeviceCatchesBadRawDigest(t *testing.T) {
	dir := t.TempDir()
	m := seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}})
	m.Disks[0].RawDigest = m.Disks[0].Digest // wrong, but well-formed
	if err := seed.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	_, err := seed.WriteDevice(context.Background(), dir, filepath.Join(t.TempDir(), "disk"))
	var mm *seed.MismatchError
	if !errors.As(err, &mm) || mm.What != "raw digest" {
		t.Fatalf("WriteDevice = %v, want a raw digest mismatch", err)
	}
}

// TestWriteDeviceRefusesMounted asks about the device holding / (read-only: the check
// comes before any open for writing) and expects a refusal naming the mount point.
func TestWriteDeviceRefusesMounted(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no mountinfo: %v", err)
	}
	defer f.Close()
	var root string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 9 && fields[4] == "/" && strings.HasPrefix(fields[len(fields)-2], "/dev/") {
			root = fields[len(fields)-2]
		}
	}
	if fi, err := os.Stat(root); root == "" || err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Skipf("/ is not on a block device here (%q)", root)
	}
	err = output.CheckNotMounted(root)
	var me *output.MountedError
	if !errors.As(err, &me) || me.MountPoint == "" {
		t.Fatalf("CheckNotMounted(%s) = %v, want it mounted", root, err)
	}
	if err := output.CheckNotMounted(filepath.Join(t.TempDir(), "disk")); err != nil {
		t.Errorf("a new file is reported mounted: %v", err)
	}
}

// seed verify --device: a written target verifies; one whose first MiB is cleared (an
// interrupted write) is incomplete; one with a changed byte mismatches.
func TestVerifyDevice(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 2 << 20, Formats: []string{seed.FormatRaw}, Seed: 5})
	dev := filepath.Join(t.TempDir(), "disk.img")
	if _, err := seed.WriteDevice(context.Background(), dir, dev); err != nil {
		t.Fatal(err)
	}
	// A disk larger than the seed: what lies beyond is not checked.
	f, _ := os.OpenFile(dev, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("beyond the seed"))
	f.Close()
	if _, err := seed.VerifyDevice(context.Background(), dir, dev); err != nil {
		t.Fatalf("a written target: %v", err)
	}
	b, _ := os.ReadFile(dev)
	b[(1<<20)+100] ^= 1
	os.WriteFile(dev, b, 0o644)
	var mm *seed.MismatchError
	if _, err := seed.VerifyDevice(context.Background(), dir, dev); !errors.As(err, &mm) {
		t.Errorf("a changed byte: %v, want a raw digest mismatch", err)
	}
	copy(b, make([]byte, 1<<20))
	os.WriteFile(dev, b, 0o644)
	var ie *seed.IncompleteError
	if _, err := seed.VerifyDevice(context.Background(), dir, dev); !errors.As(err, &ie) || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a cleared first MiB: %v, want incomplete", err)
	}
}

// seed verify --device given a FIFO (no writer) or /dev/zero: refused as bad input at once,
// naming the device, instead of blocking in the open or reading zeros as a disk.
func TestVerifyDeviceRefusesWhatIsNotADisk(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatRaw}, Seed: 6})
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{fifo, "/dev/zero", t.TempDir()} {
		_, err := seed.VerifyDevice(context.Background(), dir, dev)
		if !badinput.Is(err) || !errors.Is(err, smallfile.ErrNotRegular) || !strings.Contains(err.Error(), dev) {
			t.Errorf("%s: %v, want bad input naming it, not a regular file", dev, err)
		}
	}
}
