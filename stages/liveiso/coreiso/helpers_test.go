package coreiso

import (
	"os/exec"
	"strings"
	"testing"
)

func isX86(n string) bool {
	return strings.HasPrefix(n, "embed-areas-") && !strings.Contains(n, "s390x")
}
func isS390x(n string) bool { return strings.Contains(n, "s390x") }

func run(t testing.TB, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}
