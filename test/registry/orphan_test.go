package registry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
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

// A registry dies with the process that started it (kill -9 included: the helper exits
// without running any cleanup), and the next Start removes the storage it left behind.
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
	testbin.WaitExited(t, pid, 10*time.Second)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the abandoned registry's directory is not there to reap: %v", err)
	}
	live := StartT(t, Options{})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the next Start left %s of a dead owner behind: %v", dir, err)
	}
	// A live owner's directory is never reaped.
	StartT(t, Options{})
	if _, err := os.Stat(live.dir); err != nil {
		t.Fatalf("a Start reaped the directory of a running registry: %v", err)
	}
}

// The kernel sends the parent-death signal when the thread that started the child ends,
// and Go ends the thread of a goroutine that locked it and returned. The registry must not
// die with such a thread while the process that owns it lives.
func TestRegistryOutlivesTheThreadThatStartedIt(t *testing.T) {
	var r *Registry
	var err error
	testbin.OnEndingThread(func() { r, err = Start(context.Background(), Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop() })
	// The thread is gone, so a parent-death signal would have been sent: the registry,
	// killed by it, could not answer.
	resp, err := http.Get(r.URL() + "/v2/")
	if err != nil {
		t.Fatalf("the registry does not answer after its starting thread ended: %v", err)
	}
	resp.Body.Close()
}

// A registry that cannot bind its port must not come up as "ready" because the process
// already on that port answers /v2/: two demo environments on one fixed port both
// "started" that way, the second serving nothing.
func TestStartOnATakenPortFails(t *testing.T) {
	taken := StartT(t, Options{})
	_, port, _ := strings.Cut(taken.Addr(), ":")
	var n int
	fmt.Sscan(port, &n)
	r, err := Start(context.Background(), Options{Port: n})
	if err == nil {
		r.Stop()
		t.Fatalf("a second registry on %s started", taken.Addr())
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("the error does not say the port is taken: %v", err)
	}
}
