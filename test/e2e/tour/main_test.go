// Package tour runs the README's tour, command by command, on a fresh copy of the
// repository with the real binary, the conformance ISO, qemu and a registry. It is a package
// of its own, apart from test/e2e, so that `go test -p 2` runs its long demo build beside
// the other end-to-end tests instead of after them.
package tour

import (
	"io"
	"os"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the binary under test, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }

// copyFile copies src to dst and returns dst.
func copyFile(t *testing.T, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
