package smallfile_test

import (
	"errors"
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
