// Package tour runs the README's tour, command by command, on a fresh copy of the
// repository with the real binary, the conformance ISO, qemu and a registry. It is a package
// of its own, apart from test/e2e, so that `go test -p 2` runs its long demo build beside
// the other end-to-end tests instead of after them.
package tour

import (
	"os"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the binary under test, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }
