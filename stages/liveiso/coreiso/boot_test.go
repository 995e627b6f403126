package coreiso

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snofactory/snofactory/test/testbin"
)

const bootKargsSize = 512

// bootableLiveISO builds a tiny BIOS-bootable live ISO that follows the
// CoreOS contract: isolinux loads the kernel with /images/initrd.img and the
// embed area /images/ignition.img as initrds, the append line holds a karg
// area described by kargs.json, and igninfo.json names the area. Its init
// prints /proc/cmdline and the sha256 of /config.ign to the serial port.
func bootableLiveISO(t *testing.T) string {
	t.Helper()
	kernel := requireBootTools(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"isolinux", "images", "coreos"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFileT(t, kernel, filepath.Join(root, "images", "vmlinuz"), 0o644)
	copyFileT(t, "/usr/lib/ISOLINUX/isolinux.bin", filepath.Join(root, "isolinux", "isolinux.bin"), 0o644)
	copyFileT(t, "/usr/lib/syslinux/modules/bios/ldlinux.c32", filepath.Join(root, "isolinux", "ldlinux.c32"), 0o644)
	writeBootInitrd(t, filepath.Join(dir, "initrd"), filepath.Join(root, "images", "initrd.img"))
	if err := os.WriteFile(filepath.Join(root, "images", "ignition.img"), make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBootConfig(t, root)
	out := filepath.Join(dir, "live.iso")
	run(t, dir, "xorriso", "-as", "mkisofs", "-quiet", "-R", "-V", "SNOFLIVE",
		"-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-o", out, root)
	return out
}

// requireBootTools checks for what bootableLiveISO builds from and returns
// the newest kernel in /boot.
func requireBootTools(t *testing.T) string {
	t.Helper()
	testbin.Require(t, "xorriso", "xorriso")
	testbin.Require(t, "cpio", "cpio")
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		t.Fatal("no kernel in /boot: install the Debian package linux-image-amd64 (make deps)")
	}
	for _, f := range []struct{ path, pkg string }{
		{"/usr/lib/ISOLINUX/isolinux.bin", "isolinux"},
		{"/usr/lib/syslinux/modules/bios/ldlinux.c32", "syslinux-common"},
		{"/bin/busybox", "busybox-static"},
	} {
		if _, err := os.Stat(f.path); err != nil {
			t.Fatalf("%s missing: install the Debian package %s (make deps)", f.path, f.pkg)
		}
	}
	return kernels[len(kernels)-1]
}

func copyFileT(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// writeBootInitrd writes to img a gzip newc initramfs (built in dir) whose
// busybox init reports the command line, the config's sha256 and the
// embedded keyfiles on the serial port, then powers off.
func writeBootInitrd(t *testing.T, dir, img string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFileT(t, "/bin/busybox", filepath.Join(dir, "bin", "busybox"), 0o755)
	initScript := `#!/bin/busybox sh
/bin/busybox mkdir -p /dev /proc
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox mount -t proc proc /proc
exec >/dev/ttyS0 2>&1
echo "SNOF-CMDLINE: $(/bin/busybox cat /proc/cmdline)"
if [ -e /config.ign ]; then echo "SNOF-CONFIG: $(/bin/busybox sha256sum /config.ign)"; else echo "SNOF-CONFIG: none"; fi
for f in /etc/coreos-firstboot-network/*; do [ -e "$f" ] && echo "SNOF-NET: $f"; done
echo SNOF-DONE
/bin/busybox poweroff -f
`
	if err := os.WriteFile(filepath.Join(dir, "init"), []byte(initScript), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "sh", "-c", "find . | cpio -o -H newc --quiet | gzip -1 > "+img)
}

// writeBootConfig writes isolinux.cfg with a karg area on its append line,
// and the coreos/ files that describe the areas.
func writeBootConfig(t *testing.T, root string) {
	t.Helper()
	def := "console=ttyS0 snofactory.default=1"
	prefix := "default live\nprompt 0\ntimeout 1\nlabel live\n  kernel /images/vmlinuz\n  append initrd=/images/initrd.img,/images/ignition.img "
	area := def + "\n" + strings.Repeat("#", bootKargsSize-len(def)-1)
	kj, _ := json.Marshal(map[string]any{"default": def, "size": bootKargsSize,
		"files": []map[string]any{{"path": "isolinux/isolinux.cfg", "offset": len(prefix), "pad": "#", "end": "\n"}}})
	for name, body := range map[string]string{
		"isolinux/isolinux.cfg": prefix + area + "\n",
		"coreos/kargs.json":     string(kj),
		"coreos/igninfo.json":   `{"file": "images/ignition.img"}`,
		"coreos/features.json":  `{"live-initrd-network": true}`,
	} {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bootISO boots the ISO under qemu and returns the serial console output
// once init reports done. KVM is probed for real by booting with it; where
// /dev/kvm exists but cannot run the guest (as on some nested hosts), the
// boot is retried with TCG and a warning, with a scaled timeout.
func bootISO(t *testing.T, iso string) string {
	t.Helper()
	qemu := testbin.Require(t, "qemu-system-x86_64", "qemu-system-x86")
	if _, err := os.Stat("/dev/kvm"); err == nil {
		log, why := tryBoot(t, qemu, "kvm", iso, 60*time.Second)
		if why == "" {
			return log
		}
		t.Logf("WARNING: KVM could not boot the guest (%s); falling back to TCG (slow, timeout scaled)", why)
	} else {
		t.Log("WARNING: no /dev/kvm; booting with TCG (slow, timeout scaled)")
	}
	log, why := tryBoot(t, qemu, "tcg", iso, 300*time.Second)
	if why != "" {
		t.Fatalf("booting %s with TCG: %s\nserial console:\n%s", iso, why, tail(log, 3000))
	}
	return log
}

// tryBoot runs one boot; why is "" on success, else what went wrong.
func tryBoot(t *testing.T, qemu, accel, iso string, timeout time.Duration) (log, why string) {
	dir := t.TempDir()
	logPath, errPath := filepath.Join(dir, "serial.log"), filepath.Join(dir, "qemu.err")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd := exec.Command(qemu, "-accel", accel, "-m", "384", "-display", "none", "-monitor", "none",
		"-no-reboot", "-cdrom", iso, "-boot", "d", "-serial", "file:"+logPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = errFile, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-done:
			b, _ := os.ReadFile(logPath)
			if bytes.Contains(b, []byte("SNOF-DONE")) {
				return string(b), ""
			}
			e, _ := os.ReadFile(errPath)
			return string(b), fmt.Sprintf("qemu exited (%v) before init finished: %s", err, tail(string(e), 500))
		case <-time.After(250 * time.Millisecond):
		}
		e, _ := os.ReadFile(errPath)
		if bytes.Contains(e, []byte("emulation failure")) || bytes.Contains(e, []byte("KVM internal error")) ||
			bytes.Contains(e, []byte("failed to initialize kvm")) {
			kill()
			msg := "KVM failed"
			for _, l := range strings.Split(string(e), "\n") {
				if strings.Contains(l, "KVM") || strings.Contains(l, "kvm") || strings.Contains(l, "emulation failure") {
					msg = strings.TrimSpace(l)
					break
				}
			}
			return "", "qemu: " + msg
		}
		if time.Now().After(deadline) {
			kill()
			b, _ := os.ReadFile(logPath)
			return string(b), fmt.Sprintf("no SNOF-DONE within %s", timeout)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// The real kernel unpacks what we embed: config.ign arrives at /config.ign
// with the kernel arguments we set, both for a plain embed and for the
// rebuild strategy with a config far larger than the area.
func TestBootEmbeddedISO(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM; run without -short")
	}
	base := bootableLiveISO(t)
	ctx := context.Background()
	keyfile := []byte("[connection]\nid=eth0\ntype=ethernet\n")
	for _, tt := range []struct {
		name string
		cfg  []byte
		want Strategy
	}{
		{"embed", testConfig("boot"), StrategyPatch},
		{"rebuild", bigConfig(600 << 10), StrategyRebuild},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "custom.iso")
			rep, err := Customize(ctx, base, out, Customization{
				Ignition:        tt.cfg,
				KargsAppend:     []string{"snofactory.marker=" + tt.name},
				NetworkKeyfiles: map[string][]byte{"eth0.nmconnection": keyfile},
			})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Strategy != tt.want {
				t.Fatalf("strategy %s, want %s (report %+v)", rep.Strategy, tt.want, rep)
			}
			log := bootISO(t, out)
			if !strings.Contains(log, "SNOF-CONFIG: "+sha(tt.cfg)) {
				t.Errorf("the booted kernel did not unpack our /config.ign (want sha256 %s):\n%s", sha(tt.cfg), tail(log, 2000))
			}
			if !strings.Contains(log, "snofactory.default=1 snofactory.marker="+tt.name) {
				t.Errorf("kernel command line lacks the appended karg:\n%s", tail(log, 2000))
			}
			if !strings.Contains(log, "SNOF-NET: /etc/coreos-firstboot-network/eth0.nmconnection") {
				t.Errorf("network keyfile not unpacked:\n%s", tail(log, 2000))
			}
			fmt.Fprintf(os.Stderr, "boot %s: config %d bytes, payload %d, area %d\n", tt.name, rep.ConfigBytes, rep.PayloadBytes, rep.AreaBytes)
		})
	}
}
