package vm

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/testbin"
)

// TestBootConformanceISO boots the pristine conformance ISO (no Ignition config) with
// each firmware and follows its phase reports to boot-complete.
func TestBootConformanceISO(t *testing.T) {
	for _, fw := range []Firmware{FirmwareBIOS, FirmwareUEFI} {
		t.Run(string(fw), func(t *testing.T) { testBoot(t, fw) })
	}
}

func testBoot(t *testing.T, fw Firmware) {
	q := requireQemu(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	iso, err := conformance.Cached(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := ResolveAccel(ctx, q, AccelAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	console := filepath.Join(dir, "console.log")
	m, err := Start(ctx, Config{Name: "boot-test-" + string(fw), ISO: iso, MemoryMiB: 512, ConsoleLog: console, NoReboot: true, Firmware: fw}, acc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, acc.Scale(15*time.Second))
	defer wcancel()
	msgs, err := m.WaitFinal(wctx, wire.PhaseBootComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot-complete after %s under %s", time.Since(start).Round(time.Millisecond), acc.Name)
	var phases []string
	for i, msg := range msgs {
		phases = append(phases, msg.Phase)
		if msg.Seq != uint64(i+1) || msg.Boot != msgs[0].Boot {
			t.Errorf("message %d out of order: %+v", i, msg)
		}
	}
	want := strings.Join([]string{wire.PhaseLiveBooted, wire.PhaseIgnitionApplied, wire.PhaseBootComplete}, ",")
	if got := strings.Join(phases, ","); got != want {
		t.Errorf("phases %s", got)
	}
	if msgs[0].Details["mode"] != "live" || !strings.Contains(msgs[0].Details["cmdline"], conformance.DefaultKargs) {
		t.Errorf("live-booted details %v", msgs[0].Details)
	}
	loader := map[Firmware]string{FirmwareBIOS: "ISOLINUX", FirmwareUEFI: "BdsDxe"}[fw]
	if b, err := os.ReadFile(console); err != nil || !strings.Contains(string(b), loader) {
		t.Errorf("console log does not show the boot loader: %v %q", err, b)
	}

	// With NoReboot, a reset through QMP ends qemu instead of rebooting the guest.
	if err := m.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("qemu still running 20s after a reset with NoReboot")
	}

	// Stop kills qemu and everything in its process group.
	pid := m.cmd.Process.Pid
	m.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("qemu pid %d still exists after Stop: %v", pid, err)
	}
	if _, err := os.Stat(m.tmp); !os.IsNotExist(err) {
		t.Errorf("runtime dir %s left behind", m.tmp)
	}
}

// Cancelling the context kills the VM; the events end with an Exited event.
func TestContextCancelKillsVM(t *testing.T) {
	requireQemu(t)
	dir := t.TempDir()
	disk := filepath.Join(dir, "empty.qcow2")
	if err := CreateDisk(context.Background(), disk, "qcow2", 16); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qemu-img", "info", disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "virtual size: 16 MiB") {
		t.Fatalf("qemu-img info: %v %s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Start(ctx, Config{Name: "cancel-test", Disks: []Disk{{Path: disk}}, MemoryMiB: 64, ConsoleLog: filepath.Join(dir, "c.log")}, TCG("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	// Cancel a VM that is up: qemu answers on its monitor once it runs.
	if _, err := m.Status(ctx); err != nil {
		t.Fatalf("qemu not running before the cancel: %v", err)
	}
	cancel()
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("qemu still running 10s after cancel")
	}
	var last Event
	for ev := range m.Events() {
		last = ev
	}
	if !last.Exited {
		t.Fatalf("last event is not Exited: %+v", last)
	}
	if _, err := m.WaitFinal(context.Background(), wire.PhaseBootComplete, nil); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitFinal after exit: %v", err)
	}
}

// qemu dies with the process that started it (Pdeathsig), but not with the thread that
// did: the kernel sends that signal when the starting thread ends, and Go ends threads.
func TestVMOutlivesTheThreadThatStartedIt(t *testing.T) {
	requireQemu(t)
	dir := t.TempDir()
	disk := filepath.Join(dir, "empty.qcow2")
	if err := CreateDisk(context.Background(), disk, "qcow2", 16); err != nil {
		t.Fatal(err)
	}
	var m *Machine
	var err error
	testbin.OnEndingThread(func() {
		m, err = Start(context.Background(), Config{Name: "thread-test", Disks: []Disk{{Path: disk}}, MemoryMiB: 64, ConsoleLog: filepath.Join(dir, "c.log")}, TCG("test"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	// The thread is gone, so a parent-death signal would have been sent: qemu, killed
	// by it, could not answer its monitor.
	status, err := m.Status(context.Background())
	if err != nil {
		t.Fatalf("qemu does not answer after the thread that started it ended: %v", err)
	}
	var st struct{ Running bool }
	if err := json.Unmarshal(status, &st); err != nil || !st.Running {
		t.Fatalf("qemu status after the thread that started it ended: %s", status)
	}
}

// Disks and overlays a VM writes into are 0600: they hold the build's pull secret, or a
// site's, once a guest has run on them.
func TestDisksAreNotWorldReadable(t *testing.T) {
	dir := t.TempDir()
	disk, overlay := filepath.Join(dir, "disk.qcow2"), filepath.Join(dir, "overlay.qcow2")
	if err := CreateDisk(context.Background(), disk, "qcow2", 1); err != nil {
		t.Fatal(err)
	}
	if err := CreateOverlay(context.Background(), disk, "qcow2", overlay); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{disk, overlay} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", filepath.Base(p), fi.Mode().Perm(), err)
		}
	}
}
