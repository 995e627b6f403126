package conformance

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runInstallMetal runs init.sh's install_metal section under busybox's sh, as the live
// installer does, writing the gzipped image to the file target; a file has no partition
// devices, so mount, umount, blockdev and wait_for are stand-ins and the "mounted" root
// partition is the directory mnt.
func runInstallMetal(t *testing.T, target, image, config, mnt string) (string, error) {
	t.Helper()
	s := string(initScript)
	begin, end := strings.Index(s, "# ---- install_metal ----"), strings.Index(s, "# ---- end of install_metal ----")
	if begin < 0 || end < begin {
		t.Fatal("init.sh has no install_metal section")
	}
	section := strings.ReplaceAll(s[begin:end], "/run/snofactory", t.TempDir())
	script := "log() { :; }\ndie() { echo \"$1\" >&2; [ -n \"$2\" ] && cat \"$2\" >&2; exit 1; }\n" +
		"mount() { :; }\numount() { :; }\nblockdev() { :; }\nwait_for() { :; }\npartition() { echo \"$1-part$2\"; }\n" +
		section + "\ninstall_metal \"$@\"\n"
	cmd := exec.Command(busyboxBin.src, "sh", "-c", script, "sh", target, image, config, mnt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err
}

// The live installer of an ISO that carries a disk image writes the image from sector 0
// and the Ignition config with the first-boot stamp into the image's /boot, as
// coreos-installer does the metal image; it refuses a disk that already holds an
// installed system, and an image without the installed-disk mark (the installer would
// then install again on the next live boot), before writing the config.
func TestInstallMetal(t *testing.T) {
	if err := busyboxBin.check(); err != nil {
		t.Skip(err)
	}
	sector := func(mark string) []byte {
		b := make([]byte, 512)
		copy(b[440:], mark)
		b[510], b[511] = 0x55, 0xaa
		return append(b, bytes.Repeat([]byte("root file system "), 4096)...)
	}
	for _, tc := range []struct {
		name        string
		image, disk []byte
		want        string // an error's text; "" when it installs
	}{
		{"installs", sector(DiskSignature), make([]byte, 1<<20), ""},
		{"installed disk", sector(DiskSignature), sector(DiskSignature), "already holds an installed system"},
		{"unmarked image", sector(""), make([]byte, 1<<20), "carries no installed-disk mark"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			target, image, config, mnt := filepath.Join(dir, "disk"), filepath.Join(dir, "metal.img.gz"),
				filepath.Join(dir, "config.ign"), filepath.Join(dir, "mnt")
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			zw.Write(tc.image)
			zw.Close()
			for p, b := range map[string][]byte{target: tc.disk, image: gz.Bytes(), config: []byte(`{"ignition":{"version":"3.4.0"}}`)} {
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stderr, err := runInstallMetal(t, target, image, config, mnt)
			if tc.want != "" {
				if err == nil || !strings.Contains(stderr, tc.want) {
					t.Fatalf("install_metal = %v (%s), want %q", err, stderr, tc.want)
				}
				if _, err := os.Stat(filepath.Join(mnt, "boot/ignition/config.ign")); !os.IsNotExist(err) {
					t.Errorf("the config was written after the refusal (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("install_metal: %v\n%s", err, stderr)
			}
			got, _ := os.ReadFile(target)
			if !bytes.HasPrefix(got, tc.image) || len(got) != len(tc.disk) {
				t.Errorf("the disk (%d bytes) does not start with the image (%d bytes) or changed size", len(got), len(tc.image))
			}
			if b, err := os.ReadFile(filepath.Join(mnt, "boot/ignition/config.ign")); err != nil || !strings.Contains(string(b), "3.4.0") {
				t.Errorf("the Ignition config in the image's /boot = %q (%v)", b, err)
			}
			if _, err := os.Stat(filepath.Join(mnt, "boot/ignition.firstboot")); err != nil {
				t.Errorf("no first-boot stamp: %v", err)
			}
		})
	}
}
