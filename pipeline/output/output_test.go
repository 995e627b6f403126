package output

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// Each kind of output path is written as a user who named it expects, or refused before
// anything is written, and what is refused is left exactly as it was.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "input.yaml")
	os.WriteFile(input, []byte("input"), 0o644)
	link := filepath.Join(dir, "link.yaml")
	os.Symlink(input, link)
	existing := filepath.Join(dir, "existing.iso")
	os.WriteFile(existing, bytes.Repeat([]byte("old"), 1000), 0o644)
	readOnly := filepath.Join(dir, "ro.iso")
	os.WriteFile(readOnly, []byte("keep"), 0o444)
	for _, tc := range []struct {
		name, path, refused string
	}{
		{"a new file", filepath.Join(dir, "new.iso"), ""},
		{"an existing file is replaced", existing, ""},
		{"the input itself", input, "is this command's input"},
		{"a symlink to the input", link, "is this command's input"},
		{"a directory", dir, "is a directory"},
		{"a character device", "/dev/null", "is a character device"},
		{"a read-only file", readOnly, "is a read-only file"},
		{"a missing directory", filepath.Join(dir, "no", "x.iso"), "its directory does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			err := Write(tc.path, 0o600, func(f *os.File) error {
				_, err := f.Write([]byte("new content"))
				return err
			}, input)
			after, _ := os.ReadFile(tc.path)
			if tc.refused != "" {
				var oe *Error
				if !errors.As(err, &oe) || !IsRefused(err) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v, want a refusal with %q", err, tc.refused)
				}
				if tc.path != "/dev/null" && !bytes.Equal(before, after) {
					t.Error("a refused path changed")
				}
				return
			}
			if err != nil || string(after) != "new content" {
				t.Fatalf("err %v, content %q", err, after)
			}
			if fi, _ := os.Stat(tc.path); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
	// A failed fill leaves the old file and no partial file.
	err := Write(existing, 0o644, func(f *os.File) error {
		f.Write([]byte("half"))
		return errors.New("the source went away")
	})
	if err == nil || !strings.Contains(err.Error(), "the source went away") {
		t.Errorf("err = %v", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "new content" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if partial, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(partial) > 0 {
		t.Errorf("partial files left: %v", partial)
	}

	// A killed writer's partial file (nobody holds it) goes at the next Write; one that a
	// live Write holds stays.
	stale := filepath.Join(dir, "."+filepath.Base(existing)+".partial-killed")
	os.WriteFile(stale, []byte("half"), 0o600)
	err = Write(existing, 0o644, func(f *os.File) error {
		if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the stale partial file is still there: %v", err)
		}
		inner := Write(existing, 0o644, func(*os.File) error { return nil })
		if _, err := os.Stat(f.Name()); inner != nil || err != nil {
			t.Errorf("a second Write removed the live partial file: %v, %v", inner, err)
		}
		_, err := f.Write([]byte("newest"))
		return err
	})
	if b, _ := os.ReadFile(existing); err != nil || string(b) != "newest" {
		t.Errorf("Write after a killed one: %v, %q", err, b)
	}
}

// A block device is written in place: not truncated, not renamed over, its inode kept.
// It uses a loop device where the machine allows one (root, losetup); elsewhere the other
// cases of TestWrite still run.
func TestWriteBlockDevice(t *testing.T) {
	backing := filepath.Join(t.TempDir(), "stick.img")
	os.WriteFile(backing, bytes.Repeat([]byte{0xee}, 4<<20), 0o644)
	dev, detach := testbin.LoopDevice(t, backing)
	before, _ := os.Stat(dev)
	if err := Write(dev, 0o600, func(f *os.File) error {
		_, err := f.Write([]byte("site medium"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(dev)
	if err != nil || !os.SameFile(before, after) || after.Mode()&os.ModeDevice == 0 {
		t.Fatalf("the device node was replaced: %v", err)
	}
	detach()
	b, _ := os.ReadFile(backing)
	if len(b) != 4<<20 || string(b[:11]) != "site medium" || b[11] != 0xee {
		t.Errorf("the device was not written in place (%d bytes, starts %q)", len(b), b[:12])
	}
}

// An output directory may be new or an existing directory, but never a file, nor one that
// is or holds an input, however it is reached.
func TestCheckDir(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "site", "blueprint.yaml")
	os.MkdirAll(filepath.Dir(in), 0o755)
	os.WriteFile(in, []byte("x"), 0o644)
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(root, "link")
	os.Symlink(filepath.Join(root, "site"), link)
	os.MkdirAll(filepath.Join(root, "out"), 0o755)
	tests := []struct {
		name, dir, want string
	}{
		{"new directory", filepath.Join(root, "new"), ""},
		{"sibling directory", filepath.Join(root, "out"), ""},
		{"a file", file, "is not a directory"},
		{"the input's directory", filepath.Join(root, "site"), "holds this command's input " + in},
		{"an ancestor of the input", root, "holds this command's input"},
		{"a symlink to the input's directory", link, "holds this command's input"},
		{"the input itself, as a directory path", filepath.Join(root, "site") + "/", "holds this command's input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDir("-o", tt.dir, in, filepath.Join(root, "missing-input"))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !IsRefused(err)):
				t.Fatalf("got %v, want a refusal containing %q", err, tt.want)
			}
		})
	}
}
