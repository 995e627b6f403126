package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A directory whose owner died (its lock file is unlocked) goes with the next OwnedTempDir
// of the same prefix; one whose owner is alive, and one without a lock file, stay.
func TestOwnedTempDirReapsOrphans(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	prefix := "sftest-"
	alive, owner, err := OwnedTempDir(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	// An owner that dies: a child process holds the lock of its own directory, then exits.
	dead, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dead, ownerLock)
	if out, err := exec.Command("flock", lock, "true").CombinedOutput(); err != nil {
		t.Fatalf("flock: %v %s", err, out)
	}
	unlocked, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	mine, owner2, err := OwnedTempDir(prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer owner2.Close()
	for dir, want := range map[string]bool{alive: true, dead: false, unlocked: true, mine: true} {
		_, err := os.Stat(dir)
		if exists := err == nil; exists != want {
			t.Errorf("%s exists=%v, want %v", dir, exists, want)
		}
	}
	if !strings.HasPrefix(filepath.Base(mine), prefix) {
		t.Errorf("dir %s lacks the prefix", mine)
	}
}
