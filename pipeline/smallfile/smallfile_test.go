package smallfile_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/smallfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifo-link")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name  string
		path  string
		limit int64
		want  string   // content on success
		is    error    // sentinel the error matches
		says  []string // what the error message names
	}{
		{name: "regular file", path: regular, limit: 10, want: "0123456789"},
		{name: "symlink to a regular file", path: link, limit: 64, want: "0123456789"},
		{name: "zero cap", path: regular, limit: 0, is: smallfile.ErrTooLarge, says: []string{regular, "larger than 0 bytes"}},
		{name: "over the cap", path: regular, limit: 9, is: smallfile.ErrTooLarge, says: []string{regular, "larger than 9 bytes"}},
		{name: "fifo", path: fifo, limit: 10, is: smallfile.ErrNotRegular, says: []string{fifo, "not a regular file"}},
		{name: "symlink to a fifo", path: fifoLink, limit: 10, is: smallfile.ErrNotRegular, says: []string{fifoLink}},
		{name: "directory", path: dir, limit: 10, is: smallfile.ErrNotRegular, says: []string{dir, "not a regular file"}},
		{name: "/dev/zero", path: "/dev/zero", limit: 10, is: smallfile.ErrNotRegular, says: []string{"/dev/zero", "not a regular file"}},
		{name: "missing", path: missing, limit: 10, is: os.ErrNotExist, says: []string{missing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := smallfile.Read(tt.path, tt.limit)
			if tt.is == nil {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if string(got) != tt.want {
					t.Fatalf("Read = %q, want %q", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Read = %q, want an error matching %v", got, tt.is)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q does not match %v", err, tt.is)
			}
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Path != tt.path {
				t.Errorf("error %q is not a path error on %s", err, tt.path)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	zeroLink := filepath.Join(dir, "zero-link")
	fifo := filepath.Join(dir, "fifo")
	for _, err := range []error{os.Symlink(regular, link), os.Symlink("/dev/zero", zeroLink), syscall.Mkfifo(fifo, 0o600)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	open := map[string]func(string) (*os.File, error){"Open": smallfile.Open, "OpenOrBlockDevice": smallfile.OpenOrBlockDevice}
	for name, fn := range open {
		for _, tc := range []struct {
			path string
			ok   bool
		}{
			{regular, true}, {link, true},
			{fifo, false}, {"/dev/zero", false}, {zeroLink, false}, {dir, false},
		} {
			f, err := fn(tc.path)
			if tc.ok {
				if err != nil {
					t.Errorf("%s(%s): %v", name, tc.path, err)
					continue
				}
				// The file is opened without a cap: all of it reads.
				if b, err := io.ReadAll(f); err != nil || string(b) != "0123456789" {
					t.Errorf("%s(%s) read %q, %v", name, tc.path, b, err)
				}
				f.Close()
				continue
			}
			if err == nil {
				f.Close()
				t.Errorf("%s(%s) opened it, want it refused", name, tc.path)
				continue
			}
			var pe *os.PathError
			if !errors.Is(err, smallfile.ErrNotRegular) || !errors.As(err, &pe) || pe.Path != tc.path || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("%s(%s): error %q does not say the file is not a regular file", name, tc.path, err)
			}
		}
	}
}

// ReadNoFollow refuses a symlink in the open itself, even one to a regular file.
func TestReadNoFollow(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(regular, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	if b, err := smallfile.ReadNoFollow(regular, 10); err != nil || string(b) != "{}" {
		t.Fatalf("ReadNoFollow(regular) = %q, %v", b, err)
	}
	_, err := smallfile.ReadNoFollow(link, 10)
	if !errors.Is(err, smallfile.ErrSymlink) || !strings.Contains(err.Error(), link) {
		t.Fatalf("ReadNoFollow(symlink) = %v, want a refusal naming %s", err, link)
	}
	if _, err := smallfile.ReadNoFollow(regular, 1); !errors.Is(err, smallfile.ErrTooLarge) {
		t.Fatalf("ReadNoFollow over the cap = %v, want ErrTooLarge", err)
	}
}
