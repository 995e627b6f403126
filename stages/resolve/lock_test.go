package resolve

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/stages/internal/lockfile"
)

// The lock snofactory lock writes is an output the user names (-o): it goes through the
// output rules when it is written, not only when the command starts, so a FIFO, a
// directory, a read-only file or one of the command's inputs put there meanwhile (or
// reached through a symlink) is refused and left as it was; a new file or a writable one
// is replaced whole, with mode 0644, and reads back.
func TestWriteLockGoesThroughTheOutputRules(t *testing.T) {
	lock := &lockfile.Lock{SchemaVersion: lockfile.SchemaVersion}
	for _, tc := range []struct {
		name    string
		target  func(t *testing.T, dir, input string) string
		refused bool
	}{
		{"a FIFO", func(t *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "fifo")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, true},
		{"a directory", func(t *testing.T, dir, _ string) string { return dir }, true},
		{"a symlink to a directory", func(t *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "link")
			os.Symlink(t.TempDir(), p)
			return p
		}, true},
		{"the blueprint", func(_ *testing.T, _, input string) string { return input }, true},
		{"a symlink to the blueprint", func(_ *testing.T, dir, input string) string {
			p := filepath.Join(dir, "link.json")
			os.Symlink(input, p)
			return p
		}, true},
		{"a read-only file", func(_ *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "ro.json")
			os.WriteFile(p, []byte("keep"), 0o444)
			return p
		}, true},
		{"a new file", func(_ *testing.T, dir, _ string) string { return filepath.Join(dir, "new.lock.json") }, false},
		{"a writable file", func(_ *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "old.lock.json")
			os.WriteFile(p, []byte("old"), 0o600)
			return p
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			input := filepath.Join(dir, "blueprint.yaml")
			os.WriteFile(input, []byte("kind: Blueprint\n"), 0o644)
			path := tc.target(t, dir, input)
			before, _ := os.Lstat(path)
			err := WriteLock(path, lock, input)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ReadLock(path); err != nil {
					t.Errorf("the lock written does not read back: %v", err)
				}
				if fi, _ := os.Stat(path); fi == nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("mode %v, want 0644", fi)
				}
				return
			}
			if !output.IsRefused(err) {
				t.Fatalf("WriteLock(%s) = %v, want a refusal by the output rules", path, err)
			}
			after, _ := os.Lstat(path)
			if before.Mode() != after.Mode() || !before.ModTime().Equal(after.ModTime()) || before.Size() != after.Size() {
				t.Errorf("%s changed: %v %v -> %v %v", path, before.Mode(), before.ModTime(), after.Mode(), after.ModTime())
			}
			if b, _ := os.ReadFile(input); string(b) != "kind: Blueprint\n" {
				t.Errorf("the blueprint changed: %q", b)
			}
		})
	}
}
