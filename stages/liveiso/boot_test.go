package liveiso_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/util"
	ign "github.com/coreos/ignition/v2/config/v3_3/types"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/stages/internal/vm"
	"github.com/snofactory/snofactory/stages/liveiso/coreiso"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/testbin"
)

// Phase timeouts at KVM speed; vm.Accelerator.Scale stretches them for TCG.
const (
	bootTimeout    = 20 * time.Second
	installTimeout = 30 * time.Second
)

// ignitionUnit is one systemd unit for the test's Ignition config.
type ignitionUnit struct {
	name, contents string
	enabled        bool
}

// ignitionConfigUnits renders a spec 3.3.0 config (the newest Debian's ignition 2.14
// takes) with systemd units and files, and checks it with the real ignition-validate.
func ignitionConfigUnits(t *testing.T, units []ignitionUnit, files ...conformance.File) []byte {
	t.Helper()
	cfg := ign.Config{Ignition: ign.Ignition{Version: "3.3.0"}}
	for _, u := range units {
		cfg.Systemd.Units = append(cfg.Systemd.Units, ign.Unit{Name: u.name, Enabled: util.BoolToPtr(u.enabled), Contents: util.StrToPtr(u.contents)})
	}
	for _, f := range files {
		src := "data:;base64," + base64.StdEncoding.EncodeToString(f.Content)
		cfg.Storage.Files = append(cfg.Storage.Files, ign.File{
			Node:          ign.Node{Path: f.Path, Overwrite: util.BoolToPtr(true)},
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

// oversizedConfig returns a config larger than the conformance ISO's 256 KiB embed area
// (Customize must rebuild the ISO with a larger ignition.img) and the files it writes.
func oversizedConfig(t *testing.T, units []ignitionUnit) ([]byte, []conformance.File) {
	t.Helper()
	big := make([]byte, 384<<10) // random, so it does not compress below the area size
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	files := []conformance.File{
		{Path: "/etc/snofactory/token", Content: []byte(testbin.RandomHex(t, 16))},
		{Path: "/var/lib/snofactory/big.bin", Content: big},
	}
	config := ignitionConfigUnits(t, units, files...)
	if len(config) <= conformance.IgnitionImgSize {
		t.Fatalf("test config is only %d bytes", len(config))
	}
	return config, files
}

// checkRebuilt fails the test unless Customize rebuilt the ISO with an area larger than
// the conformance ISO's.
func checkRebuilt(t *testing.T, rep coreiso.Report, config []byte) {
	t.Helper()
	if rep.Strategy != coreiso.StrategyRebuild || rep.AreaBytes <= conformance.IgnitionImgSize {
		t.Fatalf("oversized config: strategy %s, area %d bytes; want a rebuild with a larger area", rep.Strategy, rep.AreaBytes)
	}
	t.Logf("config %d bytes, embed area %d bytes", len(config), rep.AreaBytes)
}

// precacheDataDisk writes a precache data disk (seeds/contract/precachedisk) holding n tiny
// images and returns its path and the images' pinned references.
func precacheDataDisk(t *testing.T, ctx context.Context, n int) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	if err := precachedisk.CreateLayout(dir); err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) digest.Digest {
		d := digest.FromBytes(b)
		if err := os.WriteFile(precachedisk.BlobPath(dir, d), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	var images []precachedisk.Image
	var refs []string
	for i := range n {
		layer, err := random.Layer(4<<10, types.OCILayer)
		if err != nil {
			t.Fatal(err)
		}
		img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		put(b)
		cfg, _ := img.RawConfigFile()
		put(cfg)
		raw, _ := img.RawManifest()
		d := put(raw)
		ref := fmt.Sprintf("registry.example.com/e2e/img%d@%s", i, d)
		refs = append(refs, ref)
		images = append(images, precachedisk.Image{Ref: ref, MediaType: string(types.OCIManifestSchema1), Digest: d, Size: int64(len(raw))})
	}
	if err := precachedisk.WriteIndex(dir, images); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "precache.raw")
	if _, err := precachedisk.Write(ctx, dir, disk, nil); err != nil {
		t.Fatal(err)
	}
	return disk, refs
}

// installVM boots iso with an empty target disk (serial wire.TargetDiskSerial) and, if
// dataDisk is set, the precache data disk (serial wire.PrecacheDiskSerial, read-only),
// firmware fw. The target disk is first in the boot order, as on a factory server: empty
// (not bootable) until the install, the firmware falls through to the ISO; after it, the
// disk boots. SeaBIOS follows -boot order, but OVMF only the devices' bootindex (and
// tries no device left out), which vm.Config cannot set, so the target disk is attached
// here by hand with bootindex=1 (after the data disk: the guest must find its disks by
// serial, not by name) and the CD-ROM gets bootindex=2 through a -global default.
func installVM(t *testing.T, ctx context.Context, name string, fw vm.Firmware, iso, dataDisk string) (*vm.Machine, vm.Accelerator, string) {
	t.Helper()
	target := filepath.Join(t.TempDir(), "target.qcow2")
	if err := vm.CreateDisk(ctx, target, "qcow2", conformance.MinDiskMiB+16); err != nil {
		t.Fatal(err)
	}
	var disks []vm.Disk
	if dataDisk != "" {
		disks = append(disks, vm.Disk{Path: dataDisk, Format: "raw", ReadOnly: true, Serial: wire.PrecacheDiskSerial})
	}
	extra := []string{"-drive", "file=" + target + ",format=qcow2,if=none,id=target0",
		"-device", "virtio-blk-pci,drive=target0,serial=" + wire.TargetDiskSerial + ",bootindex=1",
		"-global", "ide-cd.bootindex=2"}
	m, acc := liveVM(t, ctx, vm.Config{Name: name, ISO: iso, Disks: disks, BootOrder: "cd", Firmware: fw, ExtraArgs: extra})
	return m, acc, target
}

// milestones returns the phases of msgs that are install milestones (wire.InstallPhases),
// as phase:status, in order.
func milestones(msgs []wire.Message) []string {
	var out []string
	for _, m := range msgs {
		if slices.Contains(wire.InstallPhases(), m.Phase) && m.Status != wire.StatusStart {
			out = append(out, m.Phase+":"+string(m.Status))
		}
	}
	return out
}

func phaseList(msgs []wire.Message) string {
	var buf bytes.Buffer
	for _, msg := range msgs {
		buf.WriteString(msg.Phase + ":" + string(msg.Status) + " ")
	}
	return buf.String()
}

// The conformance OS installs itself to the disk the host marks as the target, with no
// karg, under BIOS and UEFI: it reports every install phase once and in order, imports
// the data disk's images into the target root, reboots from the disk (the boot loader
// of that firmware), runs the enabled units (and not the disabled one), and ends with
// install-complete. A later boot of the installed disk ends with boot-complete and
// keeps what the first boot wrote. The small config is embedded in place and an appended
// karg reaches the live system through isolinux's karg area (BIOS) and GRUB's (UEFI): the
// installs boot the ISO, so no live-only boot is spent on that (an oversized config is
// booted by the other two installs, one per firmware).
func TestConformanceInstall(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.FirmwareBIOS, vm.FirmwareUEFI} {
		t.Run(string(fw), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			token := conformance.File{Path: "/etc/snofactory/token", Content: []byte(testbin.RandomHex(t, 16))}
			marker := "unit-ran-" + testbin.RandomHex(t, 4)
			units := []ignitionUnit{
				{name: "e2e-ok.service", enabled: true, contents: "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo " + marker + " > /var/lib/e2e-unit'\n[Install]\nWantedBy=multi-user.target\n"},
				{name: "e2e-off.service", enabled: false, contents: "[Service]\nType=oneshot\nExecStart=/bin/false\n"},
			}
			karg := "snofactory.e2e=" + testbin.RandomHex(t, 6)
			iso, rep := customizedISO(t, ctx, ignitionConfigUnits(t, units, token), karg)
			if rep.Strategy != coreiso.StrategyPatch {
				t.Errorf("a small config should be embedded in place, got strategy %s", rep.Strategy)
			}
			data, refs := precacheDataDisk(t, ctx, 2)
			m, acc, target := installVM(t, ctx, "install-"+string(fw), fw, iso, data)
			start := time.Now()
			wctx, wcancel := context.WithTimeout(ctx, acc.Scale(2*installTimeout))
			defer wcancel()
			msgs, err := m.WaitFinal(wctx, wire.PhaseInstallComplete, nil)
			t.Logf("phases: %s", phaseList(msgs))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("install-complete after %s (firmware %s, accelerator %s)", time.Since(start).Round(time.Millisecond), fw, acc.Name)
			want := []string{}
			for _, p := range wire.InstallPhases() {
				want = append(want, p+":ok")
			}
			if got := milestones(msgs); !slices.Equal(got, want) {
				t.Errorf("install milestones %v, want %v", got, want)
			}
			for _, msg := range msgs {
				if msg.Status == wire.StatusFailed {
					t.Errorf("%s failed: %v", msg.Phase, msg.Details)
				}
			}
			checkInstallDetails(t, msgs, fw, len(refs))
			conformance.CheckReports(t, msgs, wire.PhaseIgnitionApplied, karg, token)
			first, _ := conformance.FindPhase(msgs, wire.PhaseRebootedFromDisk)
			i := slices.IndexFunc(msgs, func(m wire.Message) bool { return m.Phase == wire.PhaseRebootedFromDisk })
			conformance.CheckReports(t, msgs[i:], "ignition-firstboot", "", token)
			if first.Boot == msgs[0].Boot {
				t.Error("rebooted-from-disk carries the live boot's boot id: no reboot happened")
			}
			unitsMsg, _ := conformance.FindPhase(msgs, wire.PhaseUnits)
			if got := unitsMsg.Details["units"]; got != "e2e-ok.service:ok" {
				t.Errorf("units ran: %q, want only e2e-ok.service, ok", got)
			}

			// A later boot of the installed disk alone, in a new VM (the guest may power off
			// after install-complete): boot-complete, no Ignition, the files kept.
			m.Stop()
			m, _ = liveVM(t, ctx, vm.Config{Name: "installed-" + string(fw), Firmware: fw,
				Disks: []vm.Disk{{Path: target, Serial: wire.TargetDiskSerial}}})
			wctx2, wcancel2 := context.WithTimeout(ctx, acc.Scale(bootTimeout))
			defer wcancel2()
			again, err := m.WaitFinal(wctx2, wire.PhaseBootComplete, nil)
			t.Logf("second boot: %s", phaseList(again))
			if err != nil {
				t.Fatal(err)
			}
			final := again[len(again)-1]
			if final.Details["mode"] != "disk" || final.Details["firstboot"] != "false" || final.Details["firmware"] != string(fw) {
				t.Errorf("second disk boot reports %v: want mode=disk firstboot=false firmware=%s", final.Details, fw)
			}
			for _, p := range []string{"ignition-files", wire.PhaseUnits, wire.PhaseInstallComplete, wire.PhaseLiveBooted} {
				if _, ran := conformance.FindPhase(again, p); ran {
					t.Errorf("the second boot from disk reported %s", p)
				}
			}
			persisted, _ := conformance.FindPhase(again, "persisted-files")
			if got := persisted.Details["file:"+token.Path]; got != string(token.Content) {
				t.Errorf("after a reboot %s holds %q, want %q", token.Path, got, token.Content)
			}
		})
	}
}

// checkInstallDetails asserts what the milestones say about the install: the images
// imported, the disk written, and a boot from that disk with the firmware's own loader.
func checkInstallDetails(t *testing.T, msgs []wire.Message, fw vm.Firmware, images int) {
	t.Helper()
	// The data disk, when there is one, is attached first (see installVM).
	dev := "/dev/vda"
	if images > 0 {
		dev = "/dev/vdb"
	}
	imp, _ := conformance.FindPhase(msgs, wire.PhaseImagesImported)
	if imp.Details["images"] != strconv.Itoa(images) {
		t.Errorf("images-imported %v, want images=%d", imp.Details, images)
	}
	if images == 0 && imp.Details["reason"] == "" {
		t.Errorf("images-imported %v: no reason for importing nothing", imp.Details)
	}
	written, _ := conformance.FindPhase(msgs, wire.PhaseWrittenToDisk)
	if written.Details["device"] != dev || written.Details["root"] != dev+"2" || written.Details["esp"] != dev+"1" {
		t.Errorf("written-to-disk %v: want device %s, ESP partition 1, root partition 2", written.Details, dev)
	}
	rb, _ := conformance.FindPhase(msgs, wire.PhaseRebootedFromDisk)
	loader := map[vm.Firmware]string{vm.FirmwareBIOS: "extlinux", vm.FirmwareUEFI: "grub-efi"}[fw]
	if rb.Details["root"] != dev+"2" || rb.Details["disk_serial"] != wire.TargetDiskSerial ||
		rb.Details["firmware"] != string(fw) || rb.Details["loader"] != loader ||
		!strings.Contains(rb.Details["cmdline"], "snofactory.root=LABEL="+conformance.RootLabel) {
		t.Errorf("rebooted-from-disk %v: want root %s2 on the disk with serial %s, firmware %s, loader %s", rb.Details, dev, wire.TargetDiskSerial, fw, loader)
	}
}

// An enabled unit that fails on the first boot from disk fails the install: the guest
// reports the units phase failed and then install-complete failed, both carrying the
// unit's output in log= and naming it in error=, so the host has the reason at once.
// Its config is larger than the 256 KiB embed area: the rebuilt ISO's live system gets all
// of it and the appended karg under UEFI (TestLiveISOInstallToDiskAndReboot boots a rebuilt
// ISO under BIOS).
func TestConformanceInstallFailingUnit(t *testing.T) {
	// A failing unit is reported the same way whatever the firmware; TestConformanceInstall
	// covers both firmwares, so this one boots UEFI only.
	for _, fw := range []vm.Firmware{vm.FirmwareUEFI} {
		t.Run(string(fw), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			marker := "e2e-unit-output-" + testbin.RandomHex(t, 6)
			units := []ignitionUnit{{name: "e2e-fail.service", enabled: true,
				contents: "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo " + marker + "; echo on-stderr >&2; exit 3'\n[Install]\nWantedBy=multi-user.target\n"}}
			config, files := oversizedConfig(t, units)
			karg := "snofactory.e2e=" + testbin.RandomHex(t, 6)
			iso, rep := customizedISO(t, ctx, config, karg)
			checkRebuilt(t, rep, config)
			m, acc, _ := installVM(t, ctx, "install-failing-unit-"+string(fw), fw, iso, "")
			wctx, wcancel := context.WithTimeout(ctx, acc.Scale(2*installTimeout))
			defer wcancel()
			msgs, err := m.WaitFinal(wctx, wire.PhaseInstallComplete, nil)
			t.Logf("phases: %s", phaseList(msgs))
			if err == nil {
				t.Fatal("the install succeeded although an enabled unit failed")
			}
			if !strings.Contains(err.Error(), "e2e-fail.service") {
				t.Errorf("the host's error does not name the unit: %v", err)
			}
			want := []string{wire.PhaseLiveBooted + ":ok", wire.PhaseIgnitionApplied + ":ok", wire.PhaseImagesImported + ":ok",
				wire.PhaseWrittenToDisk + ":ok", wire.PhaseRebootedFromDisk + ":ok", wire.PhaseInstallComplete + ":failed"}
			if got := milestones(msgs); !slices.Equal(got, want) {
				t.Errorf("milestones %v, want %v", got, want)
			}
			checkInstallDetails(t, msgs, fw, 0)
			if i := slices.IndexFunc(msgs, func(m wire.Message) bool { return m.Phase == wire.PhaseRebootedFromDisk }); i > 0 {
				conformance.CheckReports(t, msgs[:i], wire.PhaseIgnitionApplied, karg, files...)
			}
			final := msgs[len(msgs)-1]
			failed := msgs[len(msgs)-2]
			if failed.Phase != wire.PhaseUnits || failed.Status != wire.StatusFailed {
				t.Fatalf("the report before the final one is %s %s, want %s failed", failed.Phase, failed.Status, wire.PhaseUnits)
			}
			for _, m := range []wire.Message{failed, final} {
				if !strings.Contains(m.Details[wire.DetailLog], marker) || !strings.Contains(m.Details[wire.DetailLog], "on-stderr") {
					t.Errorf("%s %s: log= %q lacks the unit's output", m.Phase, m.Status, m.Details[wire.DetailLog])
				}
				if !strings.Contains(m.Details[wire.DetailError], "e2e-fail.service") || !strings.Contains(m.Details[wire.DetailError], "exit status 3") {
					t.Errorf("%s %s: error= %q does not name the unit and its exit status", m.Phase, m.Status, m.Details[wire.DetailError])
				}
			}
		})
	}
}

// coreos.inst.install_dev still works (and wins over the serial): with no data disk the
// install imports nothing and says why, reboots, and the first boot from disk runs
// Ignition again, as CoreOS does. Its config is larger than the 256 KiB embed area: the
// rebuilt ISO's live system gets all of it under BIOS.
func TestLiveISOInstallToDiskAndReboot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	config, files := oversizedConfig(t, nil)
	token := files[0]
	karg := "snofactory.e2e=" + testbin.RandomHex(t, 6)
	iso, rep := customizedISO(t, ctx, config, karg, "coreos.inst.install_dev=/dev/vda")
	checkRebuilt(t, rep, config)
	disk := filepath.Join(t.TempDir(), "root.qcow2")
	if err := vm.CreateDisk(ctx, disk, "qcow2", conformance.MinDiskMiB+16); err != nil {
		t.Fatal(err)
	}
	// No serial: only the karg names the target.
	m, acc := liveVM(t, ctx, vm.Config{Name: "install", ISO: iso, Disks: []vm.Disk{{Path: disk}}, BootOrder: "cd"})
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, acc.Scale(installTimeout))
	defer wcancel()
	msgs, err := m.WaitFinal(wctx, wire.PhaseInstallComplete, nil)
	t.Logf("phases: %s", phaseList(msgs))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install-complete after %s (accelerator %s)", time.Since(start).Round(time.Millisecond), acc.Name)
	i := slices.IndexFunc(msgs, func(m wire.Message) bool { return m.Phase == wire.PhaseRebootedFromDisk })
	if i < 0 {
		t.Fatal("no rebooted-from-disk report")
	}
	live, installed := msgs[:i], msgs[i:]
	conformance.CheckReports(t, live, wire.PhaseIgnitionApplied, karg, files...)
	if _, ok := conformance.FindPhase(live, wire.PhaseBootComplete); ok {
		t.Error("the live system reported boot-complete although it was installing")
	}
	if installed[0].Boot == live[0].Boot {
		t.Error("the disk boot reports the live boot's boot id: no reboot happened")
	}
	imp, _ := conformance.FindPhase(live, wire.PhaseImagesImported)
	if imp.Details["images"] != "0" || !strings.Contains(imp.Details["reason"], wire.PrecacheDiskSerial) {
		t.Errorf("images-imported without a data disk: %v", imp.Details)
	}
	// The installed system keeps the appended karg but drops the installer's own.
	if strings.Contains(installed[0].Details["cmdline"], "coreos.inst.install_dev") {
		t.Errorf("installed system still has the installer karg: %q", installed[0].Details["cmdline"])
	}
	conformance.CheckReports(t, installed, "ignition-firstboot", karg, token)
	if d := msgs[len(msgs)-1].Details; d["mode"] != "disk" || d["firstboot"] != "true" {
		t.Errorf("final report %v: want mode=disk firstboot=true", d)
	}
}
