package conformance

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// mkfsRoot runs the installer's mkfs_root (init.sh) on img with the request file req (""
// for none), under busybox's sh with the host's e2fsprogs mke2fs, as the installer does.
func mkfsRoot(t *testing.T, img, req string) error {
	t.Helper()
	s := string(initScript)
	begin, end := strings.Index(s, "# ---- mkfs_root ----"), strings.Index(s, "# ---- end of mkfs_root ----")
	if begin < 0 || end < begin {
		t.Fatal("init.sh has no mkfs_root section")
	}
	script := "log() { :; }\ndie() { echo \"$1\" >&2; exit 1; }\nROOT_LABEL_DEFAULT=" + RootLabel + "\nINSTALL_SERIAL=" +
		wire.InstallDiskSerial + "\nMKE2FS=" + mke2fsBin.src + "\n" + s[begin:end] + "\nmkfs_root \"$1\" \"$2\"\n"
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(64<<20), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(busyboxBin.src, "sh", "-c", script, "sh", img, req)
	// The initramfs has no mke2fs.conf: mke2fs's built-in defaults, as there.
	cmd.Env = append(os.Environ(), "MKE2FS_CONFIG="+filepath.Join(t.TempDir(), "none"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &mkfsError{err, stderr.String()}
	}
	return nil
}

type mkfsError struct {
	err    error
	stderr string
}

func (e *mkfsError) Error() string { return e.err.Error() + ": " + e.stderr }

// superblock is what dumpe2fs (e2fsprogs, an independent reader) says of the file system.
func superblock(t *testing.T, img string) map[string]string {
	t.Helper()
	cmd := exec.Command("dumpe2fs", "-h", img)
	cmd.Env = append(os.Environ(), "TZ=UTC", "PATH=/usr/sbin:/sbin:/usr/bin:/bin")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dumpe2fs -h %s: %v", img, err)
	}
	sb := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			sb[k] = strings.TrimSpace(v)
		}
	}
	return sb
}

// The install request fixes the root file system's UUID, hash seed and times: two runs of
// the installer's mkfs a second apart make the same bytes. Without a request, mke2fs
// picks them.
func TestMkfsRootFromInstallRequest(t *testing.T) {
	dir := t.TempDir()
	epoch := int64(1700000000)
	uuid, seed := wire.FSIdentity("sha256:" + strings.Repeat("ab", 32))
	b, err := wire.EncodeInstallRequest(wire.InstallRequest{RootUUID: uuid, HashSeed: seed, MkfsTime: epoch})
	if err != nil {
		t.Fatal(err)
	}
	req := filepath.Join(dir, "request.img")
	if err := os.WriteFile(req, b, 0o644); err != nil {
		t.Fatal(err)
	}
	first, second, random := filepath.Join(dir, "first.img"), filepath.Join(dir, "second.img"), filepath.Join(dir, "random.img")
	began := time.Now()
	if err := mkfsRoot(t, first, req); err != nil {
		t.Fatal(err)
	}
	// A sleep that is needed, and only for the rest of the first run's second: mke2fs reads
	// the wall clock in whole seconds, and equal bytes only show the request's time is used
	// if the second run sees a later second than the first.
	time.Sleep(time.Until(began.Truncate(time.Second).Add(time.Second)))
	if err := mkfsRoot(t, second, req); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(first)
	c, _ := os.ReadFile(second)
	if !bytes.Equal(a, c) {
		t.Error("two file systems made from one install request differ")
	}
	sb := superblock(t, first)
	created := time.Unix(epoch, 0).UTC().Format(time.ANSIC)
	for k, want := range map[string]string{"Filesystem UUID": uuid, "Directory Hash Seed": seed, "Filesystem volume name": RootLabel,
		"Filesystem created": created, "Last checked": created, "Block size": "4096", "Inode size": "256"} {
		if sb[k] != want {
			t.Errorf("%s = %q, want %q", k, sb[k], want)
		}
	}
	if strings.Contains(sb["Filesystem features"], "has_journal") {
		t.Errorf("the root has a journal: %s", sb["Filesystem features"])
	}

	if err := mkfsRoot(t, random, ""); err != nil {
		t.Fatal(err)
	}
	if got := superblock(t, random); got["Filesystem UUID"] == uuid || got["Directory Hash Seed"] == seed {
		t.Errorf("without a request the root still has the request's identity: %q, %q", got["Filesystem UUID"], got["Directory Hash Seed"])
	}

	// A request that names no identity stops the install rather than making a random one.
	empty := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(empty, make([]byte, wire.InstallRequestSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mkfsRoot(t, filepath.Join(dir, "refused.img"), empty); err == nil || !strings.Contains(err.Error(), "names no root_uuid") {
		t.Errorf("an empty install request: %v", err)
	}
}
