package systemdsite_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/testbin"
)

// The systemd OS installed as RHCOS is: its live ISO boots the busybox live environment,
// whose installer writes the OS's whole disk image to the target disk (as coreos-installer
// writes the metal image) and reboots; the firmware then boots the disk, and systemd
// reaches its default target with no failed unit, with a machine-id and SSH host keys made
// by this boot, sshd, chronyd and NetworkManager running; its factory unit reports
// rebooted-from-disk and install-complete, as the install stage waits for. It is the first
// half of the factory boot the demo pipeline runs on this OS in the default run
// (TestSystemdDemoSeedAtSite, which checks the same first boot from the install stage's
// log), so it runs only when asked (SNOFACTORY_SYSTEMD_INSTALL=1), for an install alone.
func TestSystemdLiveInstall(t *testing.T) {
	live := systemdLive(t, "boots a VM twice", true)
	ctx := t.Context()
	dir := t.TempDir()
	disk := filepath.Join(dir, "target.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", disk, "3G").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	var phases []string
	var booted map[string]string
	console := filepath.Join(dir, "console.log")
	_, err := stages.Probe(ctx, stages.ProbeBoot{Name: "systemd-install", ISO: live.ISO, Disk: disk, MemoryMiB: 1024,
		ConsoleLog: console, Timeout: bootTimeout + 2*time.Minute}, func(m wire.Message) bool {
		phases = append(phases, m.Phase+":"+string(m.Status))
		if m.Status == wire.StatusFailed {
			t.Errorf("%s failed: %v", m.Phase, m.Details)
			return true
		}
		if m.Phase == wire.PhaseInstallComplete && m.Details["mode"] == "systemd" {
			booted = m.Details
			return true
		}
		return false
	})
	if err != nil || booted == nil {
		b, _ := os.ReadFile(console)
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		t.Fatalf("the installed systemd OS did not report install-complete: %v\nphases: %v\nconsole:\n%s", err, phases, b)
	}
	// No config on the live ISO here, so none on /boot and no Ignition at the first boot
	// from disk (TestSystemdDemoSeedAtSite has one); no precache disk, so no images.
	want := regexp.MustCompile(`^live-booted:ok ignition-applied:ok images-imported:ok written-to-disk:ok rebooted-from-disk:ok install-complete:ok$`)
	if got := strings.Join(phases, " "); !want.MatchString(got) {
		t.Errorf("phases %q, want %s", got, want)
	}
	checkFirstBoot(t, booted)
}

// systemdLive is the systemd live ISO, built or cached (make conformance-systemd builds it),
// for a test that boots VMs (why: what they cost); an optIn test runs only when
// SNOFACTORY_SYSTEMD_INSTALL=1 asks for its boots.
func systemdLive(t *testing.T, why string, optIn bool) conformance.SystemdLive {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: " + why)
	}
	if optIn && os.Getenv("SNOFACTORY_SYSTEMD_INSTALL") != "1" {
		t.Skip("skipping: " + why + "; set SNOFACTORY_SYSTEMD_INSTALL=1")
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	live, err := conformance.BuildSystemdLive(t.Context(), conformance.SystemdOptions{Dir: filepath.Join(root, conformance.DefaultSystemdDir), ModuleDir: root})
	if err != nil {
		t.Fatal(err)
	}
	return live
}
