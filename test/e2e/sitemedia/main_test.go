// Package sitemedia runs signed site-config media end to end: the real binary builds the
// demo seed with site keys (real registry, real qemu VMs, the conformance OS), and `seed
// boot` shows the seed refusing an unsigned medium and reconfiguring from a signed one.
package sitemedia

import (
	"os"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// snofactoryBin is the binary under test, built once by TestMain.
var snofactoryBin string

func TestMain(m *testing.M) { os.Exit(testbin.RunWithBinary(m, &snofactoryBin)) }
