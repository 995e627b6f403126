// Package e2e runs snofactory end to end with real components: the real binary, the real
// docker-registry on 127.0.0.1, real qemu VMs and the real ignition binary.
package e2e

import (
	"os"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the binary under test, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }
