package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// allocChild is the argument that makes the test binary touch N MiB and exit: test
// allocChild N.
const allocChild = "alloc-child"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == allocChild {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		touch(n)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// touch allocates n MiB and writes every page of it, so all of it is resident.
func touch(n int) []byte {
	b := make([]byte, n<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// Each child's peak is its own: a child that touches 128 MiB shows at least that, true
// shows a few MiB, although this process (their parent) has touched
// more than either. A child started straight from a process this large inherits its
// parent's peak when it execs (Linux records the peak of the address space exec replaces,
// which os/exec's vfork shares with the parent): every child then shows the parent's peak.
func TestPeakRSSIsEachChildsOwn(t *testing.T) {
	parent := touch(192)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMeasurer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	big, err := m.run(ctx, self, allocChild, "128")
	if err != nil {
		t.Fatal(err)
	}
	small, err := m.run(ctx, "true")
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(parent)
	t.Logf("peak RSS: child touching 128 MiB %.1f MiB, true %.1f MiB", big.rssMiB, small.rssMiB)
	if big.rssMiB < 128 {
		t.Errorf("the child that touched 128 MiB shows a peak of %.1f MiB", big.rssMiB)
	}
	if small.rssMiB >= 16 {
		t.Errorf("true shows a peak of %.1f MiB: not its own", small.rssMiB)
	}
	if big.cpu <= 0 || big.wall <= 0 {
		t.Errorf("no time measured: %+v", big)
	}
}

// A child that fails is reported as failing, with its output.
func TestMeasuredChildFails(t *testing.T) {
	m, err := newMeasurer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.run(context.Background(), "sh", "-c", "echo broken >&2; exit 3"); err == nil {
		t.Fatal("a failing child measured as a success")
	}
}
