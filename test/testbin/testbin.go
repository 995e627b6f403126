package testbin

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RunWithBinary is a TestMain's body for packages that run the real binary: it builds
// snofactory into a temporary directory, points *bin at it, runs the tests and removes the
// directory. It returns the exit code.
func RunWithBinary(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "snofactory-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Binary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Binary builds cmd/snofactory into dir (static, with the project's build tags) and returns
// its path. Call it from TestMain with a directory the caller removes.
//
// It builds with go run, whose linked executables the Go build cache keeps (go build -o
// links every time), and has go run copy the executable into dir instead of running it:
// the packages that run the binary link it once between them, not once each (about 10
// CPU-seconds a link).
func Binary(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "snofactory")
	cmd := exec.Command("go", "run", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs", "-exec", "cp", "./cmd/snofactory", out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building snofactory: %v\n%s", err, b)
	}
	return out, nil
}

// RepoRoot is the directory holding go.mod, found from this source file.
var RepoRoot = sync.OnceValues(func() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository root")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", file)
		}
		dir = parent
	}
})

// Require returns the path of tool, failing (never skipping) the test when it is missing:
// the oracles and components the tests use are installed by `make deps`, and a test that
// quietly skips proves nothing.
func Require(t testing.TB, tool, aptPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is not on PATH: install the Debian package %s (make deps)", tool, aptPackage)
	}
	return p
}

// WaitExited waits for process pid to be gone (or a zombie its new parent has not reaped
// yet) and fails the test if it is still running after within, a guard against a hang, not a
// figure. The wait is the kernel's exit event on a pidfd, not a poll of the clock.
func WaitExited(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	if err := WaitExitedWithin(pid, within); err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
}

// WaitExitedWithin blocks until pid exits, or within passes, and says which.
func WaitExitedWithin(pid int, within time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(within)
	for {
		if zombie(pid) {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("still running after %s", within)
		}
		// A pidfd turns readable when its process exits.
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll pidfd: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// zombie reports a dead process whose parent has not reaped it yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i:]), ") Z")
}

// OnEndingThread runs f on an OS thread that ends when f returns, for tests of children
// started with a parent-death signal, which the kernel sends when the starting thread ends.
// A goroutine that locked its thread and returns ends it, unless it is the main thread,
// which Go never ends: on that one, hold it and try again on another. It returns once the
// thread is gone, so any parent-death signal has been sent by then.
func OnEndingThread(f func()) {
	done := make(chan struct{})
	var tid int
	var try func()
	try = func() {
		runtime.LockOSThread()
		if syscall.Gettid() == os.Getpid() {
			go try() // cannot run on this thread while it is held
			<-done
			runtime.UnlockOSThread()
			return
		}
		tid = syscall.Gettid()
		f()
		close(done) // returning still locked ends the thread
	}
	go try()
	<-done
	// The kernel sends the signal on the thread's exit, before the thread leaves /proc.
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	for {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			return
		}
		runtime.Gosched()
	}
}

// RandomHex is n random bytes in hex: a value a test can find again, and no one else wrote.
func RandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Cosign returns cosign as `make deps` builds it (test/cosign/build.sh), failing the test
// when it is missing: it is the independent verifier of our signatures.
func Cosign(t testing.TB) string { return builtTool(t, "cosign") }

// Skopeo is the path of the skopeo that make deps builds (test/skopeo/build.sh); the test
// fails when it is missing. Debian's skopeo is built without sigstore, so this one checks
// our signatures under a containers policy and signs seeds for ours to check.
func Skopeo(t testing.TB) string { return builtTool(t, "skopeo") }

// builtTool is build/NAME/NAME, which make deps builds once.
func builtTool(t testing.TB, name string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "build", name, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing (%v): run `make deps`, which builds it once", name, err)
	}
	return p
}
