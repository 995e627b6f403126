package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// extract reads one file out of an ISO with xorriso, an independent ISO 9660 reader.
func extract(t *testing.T, iso, path string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	cmd := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", path, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract %s: %v: %s", path, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildLayoutAndCache(t *testing.T) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Fatalf("xorriso not found: install the Debian package xorriso (make deps): %v", err)
	}
	ctx := context.Background()
	iso, err := Cached(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The embed area: a zeroed images/ignition.img of 256 KiB, found through igninfo.json.
	var info struct{ File string }
	if err := json.Unmarshal(extract(t, iso, "/coreos/igninfo.json"), &info); err != nil || info.File != IgnitionImgPath {
		t.Fatalf("igninfo.json: %+v %v", info, err)
	}
	if img := extract(t, iso, "/"+IgnitionImgPath); len(img) != IgnitionImgSize || !bytes.Equal(img, make([]byte, IgnitionImgSize)) {
		t.Fatalf("ignition.img is %d bytes and not all zero", len(img))
	}

	// Every karg area named by kargs.json holds the default kargs, the end character and
	// '#' padding up to size, at the stated offset of the stated file.
	var kargs struct {
		Default string
		Files   []struct {
			Path     string
			Offset   int
			Pad, End string
		}
		Size int
	}
	if err := json.Unmarshal(extract(t, iso, "/coreos/kargs.json"), &kargs); err != nil {
		t.Fatal(err)
	}
	if kargs.Default != DefaultKargs || kargs.Size != KargsAreaSize || len(kargs.Files) == 0 {
		t.Fatalf("kargs.json: %+v", kargs)
	}
	for _, f := range kargs.Files {
		b := extract(t, iso, "/"+f.Path)
		if f.Offset+kargs.Size > len(b) {
			t.Fatalf("%s: area at %d+%d beyond the file (%d bytes)", f.Path, f.Offset, kargs.Size, len(b))
		}
		area := string(b[f.Offset : f.Offset+kargs.Size])
		want := kargs.Default + f.End + strings.Repeat(f.Pad, kargs.Size-len(kargs.Default)-1)
		if area != want {
			t.Errorf("%s: area at %d is %q", f.Path, f.Offset, area)
		}
		// The boot loader must load the embed area as an extra initrd for that kernel.
		line := string(b[:f.Offset])
		line = line[strings.LastIndexByte(line, '\n')+1:]
		after := string(b[f.Offset+kargs.Size:])
		switch {
		case strings.HasSuffix(f.Path, "isolinux.cfg"):
			if !strings.Contains(line, "initrd=/images/pxeboot/initrd.img,/"+IgnitionImgPath) {
				t.Errorf("%s: karg line %q does not load the embed area", f.Path, line)
			}
		case strings.HasSuffix(f.Path, "grub.cfg"):
			if !strings.HasPrefix(strings.TrimSpace(line), "linux /images/pxeboot/vmlinuz") ||
				!strings.HasPrefix(strings.TrimSpace(after), "initrd /images/pxeboot/initrd.img /"+IgnitionImgPath) {
				t.Errorf("%s: karg area not between the linux line %q and the initrd line %q", f.Path, line, after)
			}
		default:
			t.Errorf("unexpected karg file %s", f.Path)
		}
	}
	if len(kargs.Files) != 2 {
		t.Errorf("want karg areas in isolinux.cfg and grub.cfg, got %+v", kargs.Files)
	}
	var features map[string]any
	if err := json.Unmarshal(extract(t, iso, "/coreos/features.json"), &features); err != nil {
		t.Fatalf("features.json: %v", err)
	}

	// Two El Torito boot images: BIOS (isolinux) and UEFI (the FAT image with GRUB).
	out, err := exec.Command("xorriso", "-indev", iso, "-report_el_torito", "plain").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "BIOS") || !strings.Contains(string(out), "UEFI") {
		t.Errorf("want BIOS and UEFI El Torito boot images: %v %s", err, out)
	}

	// A second build with the same inputs is a cache hit.
	res, err := Build(ctx, Options{Out: iso})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cached {
		t.Error("unchanged inputs rebuilt the ISO")
	}
}

func TestInitramfsContents(t *testing.T) {
	_, kver, err := findKernel("")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTree()
	self, err := os.Executable() // any regular file stands in for the agent binary
	if err != nil {
		t.Fatal(err)
	}
	if err := populate(context.Background(), tr, kver, self); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/init", "/bin/busybox", "/bin/sh", "/bin/ignition", "/bin/extlinux", "/bin/snofactory",
		"/bin/setfiles", "/bin/systemctl", "/lib64/ld-linux-x86-64.so.2", MBRImagePath, "/etc/modules.load", mke2fsPath, chattrPath, DpkgStatusPath} {
		if _, ok := tr.files[p]; !ok {
			t.Errorf("initramfs lacks %s", p)
		}
	}
	// Modules load dependencies first.
	order := strings.Fields(string(tr.files["/etc/modules.load"].data))
	pos := func(name string) int {
		return slices.IndexFunc(order, func(p string) bool { return filepath.Base(p) == name+".ko" })
	}
	for _, pair := range [][2]string{{"virtio", "virtio_pci"}, {"virtio_ring", "virtio_console"}, {"cdrom", "sr_mod"}, {"jbd2", "ext4"}} {
		dep, mod := pos(pair[0]), pos(pair[1])
		if dep < 0 || mod < 0 || dep > mod {
			t.Errorf("%s (at %d) must load before %s (at %d): %v", pair[0], dep, pair[1], mod, order)
		}
	}
	// The installed disk's table: an ESP (0xef, not active) from 1 MiB, then the active
	// Linux root right after it.
	mbr := tr.files[MBRImagePath].data
	le := func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24 }
	if len(mbr) != 512 || mbr[510] != 0x55 || mbr[511] != 0xaa || string(mbr[440:444]) != DiskSignature {
		t.Fatalf("MBR template malformed")
	}
	esp, rootp := mbr[446:462], mbr[462:478]
	if esp[0] != 0 || esp[4] != 0xef || le(esp[8:]) != 2048 || le(esp[12:]) != ESPMiB<<11 {
		t.Errorf("ESP entry %x", esp)
	}
	if rootp[0] != 0x80 || rootp[4] != 0x83 || le(rootp[8:]) != 2048+ESPMiB<<11 || le(rootp[12:]) != PartitionMiB<<11 {
		t.Errorf("root entry %x", rootp)
	}
	if (2048+ESPMiB<<11+PartitionMiB<<11)*512 > MinDiskMiB<<20 {
		t.Errorf("partitions end beyond MinDiskMiB")
	}
	if link := tr.files["/usr/local/bin/snofactory"].symlink; link != "/bin/snofactory" {
		t.Errorf("the agent is not at render's AgentBinary path: %q", link)
	}
}

// Every Build of an output takes its lock, whoever calls it (Cached, the
// build-conformance-iso command): one held elsewhere makes Build wait, touching
// nothing, until the holder is done or its own context ends.
func TestBuildWaitsForTheOutputLock(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sub", "c.iso")
	unlock, err := lockOutput(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := &doneWatch{Context: parent, asked: make(chan struct{})}
	result := make(chan error, 1)
	go func() {
		_, err := Build(ctx, Options{Out: out, Log: slog.New(slog.DiscardHandler)})
		result <- err
	}()
	// Nothing before the lock takes the context: the first to ask for its Done channel is
	// the lock wait, after a failed attempt.
	select {
	case <-ctx.asked:
	case err := <-result:
		t.Fatalf("Build returned while the lock is held: %v", err)
	}
	onlyTheLock := func(when string) {
		t.Helper()
		entries, _ := os.ReadDir(filepath.Dir(out))
		for _, e := range entries {
			if e.Name() != "c.iso.lock" {
				t.Errorf("%s: Build wrote %s without the lock", when, e.Name())
			}
		}
	}
	onlyTheLock("waiting")
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("Build while the lock is held: %v, want it to wait until its context ends", err)
	}
	onlyTheLock("cancelled")
	unlock()
	// Released, the lock is free again at once: the first attempt takes it, before a
	// context that has already ended is consulted.
	unlock, err = lockOutput(parent, out)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock()
}

// doneWatch is a context that reports the first time something asks for its Done channel.
type doneWatch struct {
	context.Context
	asked chan struct{}
	once  sync.Once
}

func (c *doneWatch) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}
