package coreiso

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
)

func TestWriteModes(t *testing.T) {
	in := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
	orig, _ := os.ReadFile(in)
	dir := filepath.Dir(in)
	cfg := testConfig("w")

	t.Run("output equal to input is refused", func(t *testing.T) {
		_, err := Customize(context.Background(), in, in, Customization{Ignition: cfg})
		if !IsBadInput(err) || !strings.Contains(err.Error(), "is this command's input") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("output in a missing directory", func(t *testing.T) {
		_, err := Customize(context.Background(), in, filepath.Join(dir, "nope", "out.iso"), Customization{Ignition: cfg})
		if err == nil || !IsBadInput(err) {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("cancelled context writes nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out := filepath.Join(dir, "cancelled.iso")
		if _, err := Customize(ctx, in, out, Customization{Ignition: cfg}); !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v", err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("output exists after cancellation: %v", err)
		}
	})
	t.Run("an existing output is replaced atomically", func(t *testing.T) {
		out := filepath.Join(dir, "existing.iso")
		if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Customize(context.Background(), in, out, Customization{Ignition: cfg}); err != nil {
			t.Fatal(err)
		}
		if got, err := ShowIgnition(out); err != nil || !bytes.Equal(got, cfg) {
			t.Fatalf("show = %q, %v", got, err)
		}
	})
	t.Run("no temporary files are left behind", func(t *testing.T) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name()[0] == '.' {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
	t.Run("the input is untouched by -o", func(t *testing.T) {
		now, _ := os.ReadFile(in)
		if !bytes.Equal(now, orig) {
			t.Fatal("input changed")
		}
	})
}

// copyInto copies the whole file, bulk and tail, and on a file system that takes O_DIRECT
// the bulk bypasses the page cache: none of its pages are left cached, and the file is
// left without O_DIRECT for the patches that follow.
func TestCopyIntoDirect(t *testing.T) {
	for _, tt := range []struct {
		name string
		size int64
	}{
		{"smaller than a block", 2048},
		{"whole blocks", 3 * output.DirectBlock},
		{"ISO sectors past the last block", 5*output.DirectBlock + 2048},
		{"several chunks and a tail", 2*directChunk + 3*output.DirectBlock + 2048},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			want := make([]byte, tt.size)
			for i := range want {
				want[i] = byte(i*7 + i>>12)
			}
			srcPath := filepath.Join(dir, "in.iso")
			if err := os.WriteFile(srcPath, want, 0o600); err != nil {
				t.Fatal(err)
			}
			src, err := os.Open(srcPath)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			dst, err := os.Create(filepath.Join(dir, "out.iso"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			direct, _ := output.Direct(dst, func() error { return nil }) // does its file system take O_DIRECT?
			if err := copyInto(context.Background(), dst, src, tt.size); err != nil {
				t.Fatal(err)
			}
			if bulk := tt.size - tt.size%output.DirectBlock; direct && bulk > 0 {
				if n := cachedPages(t, dst, bulk); n != 0 {
					t.Errorf("%d pages of the %d-byte bulk are in the page cache: it was not written directly", n, bulk)
				}
			}
			if flags, err := unix.FcntlInt(dst.Fd(), unix.F_GETFL, 0); err != nil || flags&unix.O_DIRECT != 0 {
				t.Errorf("flags %#x, %v after the copy: O_DIRECT left on", flags, err)
			}
			got, err := os.ReadFile(dst.Name())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("copy differs from its source (%d of %d bytes, %v)", len(got), len(want), err)
			}
		})
	}
}

// cachedPages counts the pages of f's first size bytes that are in the page cache
// (mincore). A buffered write leaves every page it wrote there; a direct one none.
func cachedPages(t *testing.T, f *os.File, size int64) int {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
