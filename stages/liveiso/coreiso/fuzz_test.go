package coreiso

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/snofactory/snofactory/test/testbin"
)

// miniLiveISO builds a small live ISO (Rock Ridge, igninfo/kargs/features
// JSON, an embed area and a boot config with a karg area) with xorriso, as a
// fuzz seed far smaller than the fixtures.
func miniLiveISO(t testing.TB) []byte {
	t.Helper()
	testbin.Require(t, "xorriso", "xorriso")
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	kargs := "console=ttyS0 ignition.firstboot"
	area := kargs + "\n" + string(bytes.Repeat([]byte("#"), 64-len(kargs)-1))
	files := map[string]string{
		"coreos/igninfo.json":  `{"file": "images/ignition.img"}`,
		"coreos/kargs.json":    `{"default": "` + kargs + `", "files": [{"path": "EFI/fedora/grub.cfg", "offset": 12, "pad": "#", "end": "\n"}], "size": 64}`,
		"coreos/features.json": `{"live-initrd-network": true}`,
		"EFI/fedora/grub.cfg":  "linux /vmlnz" + area + "\ninitrd /images/ignition.img\n",
		"images/ignition.img":  string(make([]byte, 1024)),
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "mini.iso")
	run(t, dir, "xorriso", "-as", "mkisofs", "-quiet", "-R", "-no-pad", "-o", out, root)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The mini ISO is a valid live ISO for the whole library, so the fuzz seed
// exercises every path.
func TestMiniLiveISO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mini.iso")
	if err := os.WriteFile(p, miniLiveISO(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if k, err := ShowKargs(p, false); err != nil || k != "console=ttyS0 ignition.firstboot" {
		t.Fatalf("kargs = %q, %v", k, err)
	}
	iso, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	if iso.Layout.Ignition.Length != 1024 || !iso.Layout.LiveInitrdNetwork() {
		t.Fatalf("layout = %+v", iso.Layout)
	}
}

// FuzzISO feeds images to the reader. The input is the image after the
// 32 KiB System Area (the harness prepends zeros), which halves what the
// engine must mutate and minimize. Minimizing a new input of this size takes
// a while; -fuzzminimizetime=5s gives more mutations per minute.
func FuzzISO(f *testing.F) {
	mini := miniLiveISO(f)
	f.Add(mini[systemAreaSize:])
	f.Add(mini[systemAreaSize : systemAreaSize+(len(mini)-systemAreaSize)/2])
	// and one with a config embedded
	embedded := append([]byte{}, mini...)
	fs, err := openISOFS("mini.iso", bytes.NewReader(embedded), int64(len(embedded)))
	if err != nil {
		f.Fatal(err)
	}
	img, err := fs.lookup("images/ignition.img")
	if err != nil {
		f.Fatal(err)
	}
	copy(embedded[img.Offset:], xzOf(f, map[string]string{"config.ign": "{}"}))
	f.Add(embedded[systemAreaSize:])
	f.Fuzz(func(t *testing.T, tail []byte) {
		data := append(make([]byte, systemAreaSize, systemAreaSize+len(tail)), tail...)
		fs, err := openISOFS("fuzz.iso", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		l, err := readLayout(fs)
		if err != nil {
			return
		}
		a := l.Ignition
		if a.Offset < 0 || a.Length <= 0 || a.Offset+a.Length > int64(len(data)) {
			t.Fatalf("embed area %+v outside the %d-byte image", a, len(data))
		}
		_, _ = ParseInitrd(data[a.Offset : a.Offset+a.Length])
		if l.Kargs != nil {
			for _, k := range l.Kargs.Areas {
				if k.Offset < 0 || k.Offset+int64(l.Kargs.Size) > int64(len(data)) {
					t.Fatalf("karg area %+v outside the image", k)
				}
			}
			_, _ = currentKargs("fuzz.iso", bytes.NewReader(data), l.Kargs)
		}
		_, _ = fs.walk()
	})
}

func FuzzInitrd(f *testing.F) {
	plain := cpioOf(f, map[string]string{"config.ign": "{}", "etc/coreos-firstboot-network/eth0.nmconnection": "[connection]\n"})
	f.Add(plain)
	f.Add(gz(f, plain))
	f.Add(zst(f, plain))
	f.Add(xzOf(f, map[string]string{"config.ign": `{"ignition":{"version":"3.3.0"}}`}))
	f.Add(append(append(gz(f, plain), make([]byte, 8)...), plain...))
	f.Add([]byte("070701"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ParseInitrd(data)
		if err != nil {
			return
		}
		// whatever we accept, we can write back and read back identically
		enc, err := in.Encode()
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		again, err := ParseInitrd(enc)
		if err != nil {
			t.Fatalf("reading our own encoding: %v", err)
		}
		if len(again.files) != len(in.files) {
			t.Fatalf("round trip has %d files, want %d", len(again.files), len(in.files))
		}
		for p, f := range in.files {
			g, ok := again.files[p]
			if !ok || !bytes.Equal(g.data, f.data) || g.mode != f.mode {
				t.Fatalf("round trip changed %q", p)
			}
		}
	})
}

func FuzzKargsJSON(f *testing.F) {
	f.Add([]byte(`{"default": "mitigations=auto,nosmt coreos.liveiso=fedora-coreos-38.20230718.dev.0 ignition.firstboot ignition.platform.id=metal", "files": [{"end": "\n", "offset": 970, "pad": "#", "path": "EFI/fedora/grub.cfg"}, {"end": "\n", "offset": 1869, "pad": "#", "path": "isolinux/isolinux.cfg"}], "size": 1139}`))
	f.Add([]byte(`{"default": "a b", "files": [{"end": "\u0000", "offset": 66688, "pad": "\u0000", "path": "images/cdboot.img"}], "size": 896}`))
	f.Add([]byte(`{"default": "", "files": [{"offset": 0, "path": "x"}], "size": 1}`))
	f.Add([]byte(`{"size": -1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kl, err := ParseKargsJSON(data)
		if err != nil {
			return
		}
		if kl.Size <= 0 || kl.Size > maxKargsSize || len(kl.Default) >= kl.Size || len(kl.Areas) == 0 {
			t.Fatalf("accepted an inconsistent layout: %+v", kl)
		}
		for _, a := range kl.Areas {
			b, err := encodeKargsArea(kl.Default, kl.Size, a.Pad, a.End)
			if err != nil {
				t.Fatalf("default kargs do not fit their own area: %v", err)
			}
			if len(b) != kl.Size {
				t.Fatalf("area is %d bytes, want %d", len(b), kl.Size)
			}
			_, _ = decodeKargsArea(b, a.Pad, a.End)
		}
		_, _ = KargsEdit{Append: []string{"x=1"}, Delete: SplitKargs(kl.Default)}.Apply(kl.Default)
	})
}
