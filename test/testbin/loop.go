package testbin

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// LoopDevice attaches a loop device over the file backing and returns its path and a
// detach function, which the test calls to read backing as the device left it (and which
// also runs at cleanup). Where the machine allows no loop device (root and losetup are
// needed) the test is skipped.
func LoopDevice(t *testing.T, backing string) (string, func()) {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", backing).Output()
	if err != nil {
		t.Skipf("no loop device here (%v): this case needs root and losetup", err)
	}
	dev := strings.TrimSpace(string(out))
	detach := sync.OnceFunc(func() { exec.Command("losetup", "--detach", dev).Run() })
	t.Cleanup(detach)
	return dev, detach
}
