package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/util"
	ign "github.com/coreos/ignition/v2/config/v3_3/types"

	"github.com/snofactory/snofactory/seeds/agent"
	"github.com/snofactory/snofactory/stages/install/vm"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
	"github.com/snofactory/snofactory/test/conformance"
)

// Phase timeouts at KVM speed; vm.Accelerator.Scale stretches them for TCG.
const (
	bootTimeout    = 20 * time.Second
	installTimeout = 30 * time.Second
)

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ignitionFile is one file for the test's Ignition config.
type ignitionFile struct {
	path    string
	content []byte
}

// ignitionConfig renders a spec 3.3.0 config (the newest Debian's ignition 2.14 takes)
// writing files, and checks it with the real ignition-validate.
func ignitionConfig(t *testing.T, files ...ignitionFile) []byte {
	t.Helper()
	cfg := ign.Config{Ignition: ign.Ignition{Version: "3.3.0"}}
	for _, f := range files {
		src := "data:;base64," + base64.StdEncoding.EncodeToString(f.content)
		cfg.Storage.Files = append(cfg.Storage.Files, ign.File{
			Node:          ign.Node{Path: f.path, Overwrite: util.BoolToPtr(true)},
			FileEmbedded1: ign.FileEmbedded1{Mode: util.IntToPtr(0o644), Contents: ign.Resource{Source: &src}},
		})
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	validate, err := exec.LookPath("ignition-validate")
	if err != nil {
		t.Fatalf("ignition-validate not found: install the Debian package ignition (make deps): %v", err)
	}
	p := filepath.Join(t.TempDir(), "config.ign")
	if err := os.WriteFile(p, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(validate, p).CombinedOutput(); err != nil {
		t.Fatalf("ignition-validate rejects the test config: %v: %s", err, out)
	}
	return raw
}

// liveVM boots iso and returns the running machine; it is stopped when the test ends.
func liveVM(t *testing.T, ctx context.Context, cfg vm.Config) (*vm.Machine, vm.Accelerator) {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64 not found: install the Debian package qemu-system-x86 (make deps): %v", err)
	}
	acc, err := vm.ResolveAccel(ctx, qemu, vm.AccelAuto, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.ConsoleLog = filepath.Join(dir, "console.log")
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 768
	}
	m, err := vm.Start(ctx, cfg, acc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(cfg.ConsoleLog)
			t.Logf("console of %s:\n%s", cfg.Name, tail(b, 4000))
		}
	})
	return m, acc
}

// bootLive boots a live ISO and returns the guest's reports up to its final boot-complete,
// within the boot timeout scaled for the accelerator.
func bootLive(t *testing.T, ctx context.Context, cfg vm.Config) []agent.Message {
	t.Helper()
	m, acc := liveVM(t, ctx, cfg)
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, acc.Scale(bootTimeout))
	defer cancel()
	msgs, err := m.WaitFinal(wctx, agent.PhaseBootComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: boot-complete %s after qemu start (firmware %s, accelerator %s, guest uptime %.1fs)",
		cfg.Name, time.Since(start).Round(time.Millisecond), cfg.Firmware, acc.Name, msgs[len(msgs)-1].Uptime)
	return msgs
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// customizedISO builds (or reuses) the conformance ISO and embeds config and kargs.
func customizedISO(t *testing.T, ctx context.Context, config []byte, kargs ...string) (string, coreiso.Report) {
	t.Helper()
	base, err := conformance.Cached(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "live.iso")
	rep, err := coreiso.Customize(ctx, base, out, coreiso.Customization{Ignition: config, KargsAppend: kargs})
	if err != nil {
		t.Fatalf("embedding the config: %v", err)
	}
	return out, rep
}

func findPhase(msgs []agent.Message, phase string) (agent.Message, bool) {
	for _, m := range msgs {
		if m.Phase == phase {
			return m, true
		}
	}
	return agent.Message{}, false
}

// checkReports asserts the guest's reports: ordered, the karg on /proc/cmdline, and every
// file written by Ignition with the expected content.
func checkReports(t *testing.T, msgs []agent.Message, karg string, files ...ignitionFile) {
	t.Helper()
	for i, m := range msgs {
		if i > 0 && m.Boot == msgs[i-1].Boot && m.Seq != msgs[i-1].Seq+1 {
			t.Errorf("message %d (%s) has seq %d after %d", i, m.Phase, m.Seq, msgs[i-1].Seq)
		}
	}
	init, ok := findPhase(msgs, "init")
	if !ok {
		t.Fatalf("no init report in %v", msgs)
	}
	if karg != "" && !strings.Contains(" "+strings.TrimSpace(init.Details["cmdline"])+" ", " "+karg+" ") {
		t.Errorf("kernel argument %q not in the guest's /proc/cmdline %q", karg, init.Details["cmdline"])
	}
	for _, phase := range []string{"ignition-fetch-offline", "ignition-files"} {
		var ok bool
		for _, m := range msgs {
			ok = ok || (m.Phase == phase && m.Status == agent.StatusOK)
		}
		if !ok {
			t.Errorf("no successful %s report", phase)
		}
	}
	res, ok := findPhase(msgs, "ignition-result")
	if !ok {
		t.Fatalf("no ignition-result report")
	}
	for _, f := range files {
		key := "file:" + f.path
		sum := sha256.Sum256(f.content)
		if got := res.Details[key+".sha256"]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: guest reports sha256 %q (error %q), want %x", f.path, got, res.Details[key+".error"], sum)
		}
		if len(f.content) <= agent.MaxDetailFileBytes && res.Details[key] != string(f.content) {
			t.Errorf("%s: guest reports content %q, want %q", f.path, res.Details[key], f.content)
		}
	}
}

// The embedded config and an appended karg reach the guest, with BIOS (isolinux's karg
// area) and with UEFI (GRUB's karg area).
func TestLiveISOBootRunsIgnition(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.FirmwareBIOS, vm.FirmwareUEFI} {
		t.Run(string(fw), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			token := ignitionFile{path: "/etc/snofactory/token-" + randomHex(t, 4), content: []byte(randomHex(t, 16))}
			karg := "snofactory.e2e=" + randomHex(t, 6)
			iso, rep := customizedISO(t, ctx, ignitionConfig(t, token), karg)
			if rep.Strategy != coreiso.StrategyPatch {
				t.Errorf("a small config should be embedded in place, got strategy %s", rep.Strategy)
			}
			msgs := bootLive(t, ctx, vm.Config{Name: "live-boot-" + string(fw), ISO: iso, NoReboot: true, Firmware: fw})
			checkReports(t, msgs, karg, token)
		})
	}
}

// A config larger than the 256 KiB embed area: Customize rebuilds the ISO with a larger
// ignition.img, and the guest must still get all of it, booted either way.
func TestLiveISOBootOversizedConfig(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.FirmwareBIOS, vm.FirmwareUEFI} {
		t.Run(string(fw), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			big := make([]byte, 384<<10) // random, so it does not compress below the area size
			if _, err := rand.Read(big); err != nil {
				t.Fatal(err)
			}
			bigFile := ignitionFile{path: "/var/lib/snofactory/big.bin", content: big}
			token := ignitionFile{path: "/etc/snofactory/token", content: []byte(randomHex(t, 16))}
			config := ignitionConfig(t, token, bigFile)
			if len(config) <= conformance.IgnitionImgSize {
				t.Fatalf("test config is only %d bytes", len(config))
			}
			karg := "snofactory.e2e=" + randomHex(t, 6)
			iso, rep := customizedISO(t, ctx, config, karg)
			if rep.Strategy != coreiso.StrategyRebuild || rep.AreaBytes <= conformance.IgnitionImgSize {
				t.Fatalf("oversized config: strategy %s, area %d bytes; want a rebuild with a larger area", rep.Strategy, rep.AreaBytes)
			}
			msgs := bootLive(t, ctx, vm.Config{Name: "live-boot-oversized-" + string(fw), ISO: iso, NoReboot: true, Firmware: fw})
			t.Logf("config %d bytes, embed area %d bytes", len(config), rep.AreaBytes)
			checkReports(t, msgs, karg, token, bigFile)
		})
	}
}

// coreos.inst.install_dev: the live system installs itself to the disk, says so, reboots,
// and the first boot from disk runs Ignition again, as CoreOS does.
func TestLiveISOInstallToDiskAndReboot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	token := ignitionFile{path: "/etc/snofactory/token", content: []byte(randomHex(t, 16))}
	karg := "snofactory.e2e=" + randomHex(t, 6)
	iso, _ := customizedISO(t, ctx, ignitionConfig(t, token), karg, "coreos.inst.install_dev=/dev/vda")
	disk := filepath.Join(t.TempDir(), "root.qcow2")
	if err := vm.CreateDisk(ctx, disk, "qcow2", conformance.MinDiskMiB+16); err != nil {
		t.Fatal(err)
	}
	// Disk first: it is empty (not bootable) until the install, then it is what boots.
	m, acc := liveVM(t, ctx, vm.Config{Name: "install", ISO: iso, Disks: []vm.Disk{{Path: disk}}, BootOrder: "cd"})
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, acc.Scale(installTimeout))
	defer wcancel()
	live, err := m.WaitFinal(wctx, agent.PhaseInstallComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install-complete after %s", time.Since(start).Round(time.Millisecond))
	checkReports(t, live, karg, token)
	if _, ok := findPhase(live, agent.PhaseBootComplete); ok {
		t.Error("the live system reported boot-complete although it was installing")
	}

	wctx2, wcancel2 := context.WithTimeout(ctx, acc.Scale(bootTimeout))
	defer wcancel2()
	installed, err := m.WaitFinal(wctx2, agent.PhaseBootComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot-complete from disk after %s in all (accelerator %s)", time.Since(start).Round(time.Millisecond), acc.Name)
	if installed[0].Boot == live[0].Boot {
		t.Error("the disk boot reports the live boot's boot id: no reboot happened")
	}
	final := installed[len(installed)-1]
	if final.Details["mode"] != "disk" || final.Details["firstboot"] != "true" {
		t.Errorf("final report %v: want mode=disk firstboot=true", final.Details)
	}
	// The installed system keeps the appended karg but drops the installer's own.
	init, _ := findPhase(installed, "init")
	if strings.Contains(init.Details["cmdline"], "coreos.inst.install_dev") {
		t.Errorf("installed system still has the installer karg: %q", init.Details["cmdline"])
	}
	checkReports(t, installed, karg, token)

	// A second boot from disk: Ignition does not run again, as on CoreOS.
	if err := m.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	wctx3, wcancel3 := context.WithTimeout(ctx, acc.Scale(bootTimeout))
	defer wcancel3()
	again, err := m.WaitFinal(wctx3, agent.PhaseBootComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := again[len(again)-1].Details; d["mode"] != "disk" || d["firstboot"] != "false" {
		t.Errorf("second disk boot reports %v: want mode=disk firstboot=false", d)
	}
	if _, ran := findPhase(again, "ignition-files"); ran {
		t.Error("Ignition ran again on the second boot from disk")
	}
	persisted, _ := findPhase(again, "persisted-files")
	if got := persisted.Details["file:"+token.path]; got != string(token.content) {
		t.Errorf("after a reboot %s holds %q, want %q", token.path, got, token.content)
	}
	var buf bytes.Buffer
	for _, msg := range append(append(live, installed...), again...) {
		buf.WriteString(msg.Phase + ":" + string(msg.Status) + " ")
	}
	t.Logf("phases: %s", buf.String())
}
