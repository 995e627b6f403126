// Package e2e runs snofactory end to end with real components: the real binary, the real
// docker-registry on 127.0.0.1, real qemu VMs and the real ignition binary.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the binary under test, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "snofactory-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	snofactoryBin, err = testbin.Binary(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
