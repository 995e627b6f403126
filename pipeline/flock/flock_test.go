package flock

import (
	"os"
	"path/filepath"
	"testing"
)

// Two opens of one file stand for two processes: flock locks belong to the open file.
func TestLocks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   func(*os.File) (bool, error) // what the first open takes; nil: nothing
		try    func(*os.File) (bool, error)
		wantOK bool
	}{
		{"exclusive on a free file", nil, TryLock, true},
		{"shared on a free file", nil, TryShared, true},
		{"exclusive beside exclusive", TryLock, TryLock, false},
		{"shared beside exclusive", TryLock, TryShared, false},
		{"exclusive beside shared", TryShared, TryLock, false},
		{"shared beside shared", TryShared, TryShared, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lock")
			first, second := open(t, path), open(t, path)
			if tc.held != nil {
				if ok, err := tc.held(first); !ok || err != nil {
					t.Fatalf("taking the first lock: %v %v", ok, err)
				}
			}
			ok, err := tc.try(second)
			if err != nil || ok != tc.wantOK {
				t.Fatalf("ok %v, err %v; want %v, nil", ok, err, tc.wantOK)
			}
			if tc.held == nil || tc.wantOK {
				return
			}
			// Released by Unlock, the lock is free again for the second open.
			if err := Unlock(first); err != nil {
				t.Fatal(err)
			}
			if ok, err := tc.try(second); !ok || err != nil {
				t.Fatalf("after Unlock: ok %v, err %v", ok, err)
			}
		})
	}
}

// Closing the file releases its lock, and Lock takes a free lock at once.
func TestCloseReleasesAndLockTakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, second := open(t, path), open(t, path)
	if err := Lock(first); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if ok, err := TryLock(second); !ok || err != nil {
		t.Fatalf("after close: ok %v, err %v", ok, err)
	}
}

// A file that cannot be locked (closed) fails with an error, not as contention.
func TestFailureIsNotContention(t *testing.T) {
	f := open(t, filepath.Join(t.TempDir(), "lock"))
	f.Close()
	if ok, err := TryLock(f); ok || err == nil {
		t.Fatalf("ok %v, err %v; want an error", ok, err)
	}
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
