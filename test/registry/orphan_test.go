package registry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperAbandon is not a test: run as a child by
// TestRegistryDiesWithItsParent, it starts a registry and exits without
// stopping it.
func TestHelperAbandon(t *testing.T) {
	if os.Getenv("SNOFACTORY_REGISTRY_ABANDON") != "1" {
		return
	}
	r, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("started", r.cmd.Process.Pid, r.dir)
	os.Exit(0)
}

func TestRegistryDiesWithItsParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAbandon$")
	cmd.Env = append(os.Environ(), "SNOFACTORY_REGISTRY_ABANDON=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "started ") {
			fmt.Sscanf(sc.Text(), "started %d %s", &pid, &dir)
		}
	}
	_ = cmd.Wait()
	if pid == 0 {
		t.Fatal("helper did not start a registry")
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("registry pid %d outlived the process that started it", pid)
}

// zombie reports a dead process its new parent has not reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3, after the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i:]), ") Z")
}
