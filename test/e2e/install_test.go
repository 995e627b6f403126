package e2e

import (
	"bufio"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/stages/validate"
	"github.com/snofactory/snofactory/test/testbin"
)

// editBlueprint applies replacements to a blueprint file; each old text must be there.
func editBlueprint(t *testing.T, bp string, edits ...string) {
	t.Helper()
	b, err := os.ReadFile(bp)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("%s no longer contains %q", bp, edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(bp, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withFirmware sets the demo's VM firmware.
func withFirmware(t *testing.T, bp, fw string) {
	editBlueprint(t, bp, "    accelerator: auto\n", "    accelerator: auto\n    firmware: "+fw+"\n")
}

// withFragment adds an inline Butane fragment to the demo.
func withFragment(t *testing.T, bp, butane string) {
	var b strings.Builder
	b.WriteString("  butane:\n    - inline: |\n")
	for _, line := range strings.Split(strings.TrimRight(butane, "\n"), "\n") {
		b.WriteString("        " + line + "\n")
	}
	editBlueprint(t, bp, "  butane:\n", b.String())
}

// junitCases reads a JUnit report: every test case's name and whether it was skipped
// (with the message) or failed.
type junitCase struct {
	Name    string `xml:"name,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
}

func junitCases(t *testing.T, path string) map[string]junitCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
		Cases []junitCase `xml:"testcase"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]junitCase{}
	cases := doc.Cases
	for _, s := range doc.Suites {
		cases = append(cases, s.Cases...)
	}
	for _, c := range cases {
		out[c.Name] = c
	}
	return out
}

// TestDemoInstallsAndValidates runs the demo through install and validate on the
// conformance OS in a real qemu VM (TCG here, KVM where it works), with UEFI (every other
// demo build in these tests boots BIOS, the demo's firmware; stages/liveiso installs with
// both) and a separate container-storage partition: the install reports every phase in
// order, the installed disk boots and passes every check (one skipped by the blueprint,
// with its reason), its partitions are as checkContainerStorageDisk wants them, the JUnit
// file lists every check, and a
// second build is all cache hits and boots nothing. A build resumed after install boots the
// cached disk once, for validate and seal, and publishes; a rebuild after a one-file change
// then moves as a delta (rebuildMovesAsDelta).
func TestDemoInstallsAndValidates(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	bp, ref, reg := deltaBlueprint(t)
	withFirmware(t, bp, "uefi")
	editBlueprint(t, bp, containerStorageEdit[0], containerStorageEdit[1])
	cache, out := t.TempDir(), t.TempDir()
	r := runCLI(t, "build", bp, "--until", "validate", "--cache-dir", cache, "--output-dir", out, "--progress", "plain")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	rec := loadRecord(t, out)
	if got := stageCache(rec); len(got) != 6 || got["install"] != "miss" || got["validate"] != "miss" {
		t.Fatalf("stages %v", got)
	}
	cases := junitCases(t, filepath.Join(out, "validation.junit.xml"))
	for _, c := range validate.KnownChecks() {
		if _, ok := cases[c.ID]; !ok {
			t.Errorf("JUnit report lacks check %s", c.ID)
		}
	}
	for id, c := range cases {
		if c.Failure != nil {
			t.Errorf("check %s failed: %s", id, c.Failure.Message)
		}
	}
	if c := cases["host.time.sync"]; c.Skipped == nil || !strings.Contains(c.Skipped.Message, "keeps no NTP client") {
		t.Errorf("skipped check: %+v", c)
	}
	for _, id := range []string{"host.boot.from-disk", "host.ignition.files", "host.images.present", "host.bootstrap.cleaned"} {
		if c := cases[id]; c.Skipped != nil || c.Failure != nil {
			t.Errorf("%s did not pass: %+v", id, c)
		}
	}
	// The UEFI boot of a separate container-storage partition (TestContainerStoragePartition
	// boots it BIOS).
	checkContainerStorageDisk(t, out)

	out2 := t.TempDir()
	if r := runCLI(t, "build", bp, "--until", "validate", "--cache-dir", cache, "--output-dir", out2); r.code != 0 {
		t.Fatalf("second build: exit %d\n%s", r.code, r.stderr)
	}
	for name, c := range stageCache(loadRecord(t, out2)) {
		if c != "hit" {
			t.Errorf("second build: %s was %s", name, c)
		}
	}
	for _, console := range []string{"install-console.log", "validate-console.log"} {
		if _, err := os.Stat(filepath.Join(out2, "logs", console)); err == nil {
			t.Errorf("the second build booted a VM (%s exists)", console)
		}
	}
	// Resumed after install: validate boots the cached disk and hands its VM on to
	// seal, which boots nothing; publish pushes the seed.
	out3 := t.TempDir()
	if r := runCLI(t, "build", bp, "--force", "validate", "--cache-dir", cache, "--output-dir", out3); r.code != 0 {
		t.Fatalf("build through publish: exit %d\n%s", r.code, r.stderr)
	}
	if got := stageCache(loadRecord(t, out3)); got["install"] != "hit" || got["validate"] != "miss" || got["seal"] != "miss" || got["publish"] != "miss" {
		t.Errorf("stages %v", got)
	}
	checkOneFactoryBoot(t, out3, "validate", "validate", "seal")
	rebuildMovesAsDelta(t, reg, bp, ref, cache, out3)
}

// buildFailing builds the demo with one more Butane fragment through validate, expecting the
// build to fail (exit 1), and returns the output directory and the result.
func buildFailing(t *testing.T, butane string) (string, cliResult) {
	t.Helper()
	bp := demoBlueprint(t)
	withFragment(t, bp, butane)
	out := t.TempDir()
	r := runCLI(t, "build", bp, "--until", "validate", "--cache-dir", t.TempDir(), "--output-dir", out)
	if r.code != 1 {
		t.Fatalf("build: exit %d, want 1\n%s", r.code, r.stderr)
	}
	return out, r
}

// A unit that fails in the guest fails the install with the guest's own report and log,
// and leaves a gather bundle.
func TestInstallFailsWithTheGuestReport(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	out, r := buildFailing(t, `variant: fcos
version: 1.4.0
systemd:
  units:
    - name: broken.service
      enabled: true
      contents: |
        [Service]
        Type=oneshot
        ExecStart=/bin/sh -c 'echo the widget is missing >&2; exit 3'
        [Install]
        WantedBy=multi-user.target`)
	for _, want := range []string{"stage install failed", "broken.service", "the widget is missing", "gather bundle: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, f := range []string{"console.log", "agent.jsonl", "qmp-status.json", "error.txt"} {
		if _, err := os.Stat(filepath.Join(out, "gather", "install", f)); err != nil {
			t.Errorf("gather bundle: %v", err)
		}
	}
	// The guest's own log bundle came through the gather port: the failed unit's log is in it.
	list, err := exec.Command("tar", "-tzvf", filepath.Join(out, "gather", "install", "log-bundle.tar.gz")).CombinedOutput()
	if err != nil || !strings.Contains(string(list), "broken.service") {
		t.Errorf("log bundle lacks the unit's log (%v):\n%s", err, list)
	}
}

// An installed node that lacks a precached image fails validate naming the image and its
// digest. A unit on the first boot empties the image store's index, as a broken import or a
// stray cleanup would.
func TestValidateNamesAMissingImage(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	out, r := buildFailing(t, `variant: fcos
version: 1.4.0
systemd:
  units:
    - name: lose-images.service
      enabled: true
      contents: |
        [Service]
        Type=oneshot
        ExecStart=/bin/sh -c 'echo [] > /var/lib/containers/storage/vfs-images/images.json'
        [Install]
        WantedBy=multi-user.target`)
	lock, err := os.ReadFile(filepath.Join(out, "resolve", "lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var digest string
	if i := strings.Index(string(lock), `"digest": "sha256:`); i >= 0 {
		digest = string(lock)[i+11 : i+11+71]
	}
	for _, want := range []string{"stage validate failed", "FAIL host.images.present", "demo/hello", digest} {
		if want == "" || !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if c := junitCases(t, filepath.Join(out, "validation.junit.xml"))["host.images.present"]; c.Failure == nil {
		t.Errorf("the JUnit report does not fail host.images.present")
	}
}

// qemuFor lists the qemu processes whose command line mentions dir (the run's console log
// lives below it).
func qemuFor(dir string) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "qemu-system") && strings.Contains(cmd, dir) {
			found = append(found, filepath.Base(filepath.Dir(p))+": "+cmd)
		}
	}
	return found
}

// kill -9 of snofactory while the factory VM runs leaves no qemu behind, and the re-run
// resumes: the stages before install are cache hits, and the killed build's VM directory is
// reaped when the next VM starts. The re-run is then interrupted (Ctrl-C) mid-install: it
// stops its qemu, exits 130 and leaves no install entry. (Installs that finish are
// covered by every other demo build.)
func TestKill9MidInstallLeavesNoQemu(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	bp := demoBlueprint(t)
	cache, out := t.TempDir(), t.TempDir()
	cmd := startUntilInstallVM(t, bp, cache, out)
	running := qemuFor(out)
	if len(running) == 0 {
		t.Fatal("no qemu running for this build mid-install")
	}
	// The VM's private directory (its agent and QMP sockets) outlives a killed build; the
	// next VM start reaps it.
	vmDir := regexp.MustCompile(`path=(\S*/sfvm-[^/]+)/agent\.sock`).FindStringSubmatch(running[0])
	if vmDir == nil {
		t.Fatalf("no VM directory in %s", running[0])
	}
	cmd.Process.Kill()
	cmd.Wait()
	noQemuLeft(t, out, "the killed build")

	out2 := t.TempDir()
	rerun := startUntilInstallVM(t, bp, cache, out2)
	if len(qemuFor(out2)) == 0 {
		t.Error("no qemu running for the re-run mid-install")
	}
	if _, err := os.Stat(vmDir[1]); err == nil {
		t.Errorf("the killed build's VM directory %s is still there once the re-run's VM started", vmDir[1])
	}
	got := stageCache(loadRecord(t, out2))
	for _, s := range []string{"resolve", "render", "live-iso", "precache"} {
		if got[s] != "hit" {
			t.Errorf("re-run: %s was %s, want a cache hit", s, got[s])
		}
	}
	rerun.Process.Signal(syscall.SIGINT)
	err := rerun.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("re-run after SIGINT: %v, want exit 130", err)
	}
	noQemuLeft(t, out2, "the interrupted re-run")
	if rec := loadRecord(t, out2); rec.Status != "interrupted" {
		t.Errorf("re-run's run.json status %q, want interrupted", rec.Status)
	}
	if e, _ := filepath.Glob(filepath.Join(cache, "entries", "install", "*")); len(e) != 0 {
		t.Errorf("an interrupted install left a cache entry: %v", e)
	}
}

// startUntilInstallVM starts build --until install and returns once the install's guest
// reports its first phase: qemu runs and the guest is mid-install.
func startUntilInstallVM(t *testing.T, bp, cache, out string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(snofactoryBin, "build", bp, "--until", "install", "--cache-dir", cache, "--output-dir", out, "--progress", "json")
	events, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(events)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"stage":"install"`) && strings.Contains(sc.Text(), `"kind":"progress"`) {
			// The rest of the stream is drained so the build never blocks on its stderr.
			go io.Copy(io.Discard, events)
			return cmd
		}
	}
	cmd.Wait()
	t.Fatalf("the build ended before the VM reported a phase")
	return nil
}

// noQemuLeft fails the test, and kills them, if qemu processes of out's build do not exit.
// Each is awaited on its exit event, with a guard far above any shutdown.
func noQemuLeft(t *testing.T, out, what string) {
	t.Helper()
	var left []string
	for _, l := range qemuFor(out) {
		pid, _ := strconv.Atoi(strings.SplitN(l, ":", 2)[0])
		if err := testbin.WaitExitedWithin(pid, time.Minute); err != nil {
			syscall.Kill(pid, syscall.SIGKILL)
			left = append(left, l)
		}
	}
	if len(left) > 0 {
		t.Fatalf("qemu outlived %s: %v", what, left)
	}
}
