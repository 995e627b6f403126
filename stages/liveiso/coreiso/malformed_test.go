package coreiso

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
)

// patchISOFile overwrites the contents of an ISO file (same length, padded
// with spaces, which JSON ignores).
func patchISOFile(t *testing.T, isoPath, file, content string) {
	t.Helper()
	data, err := os.ReadFile(isoPath)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := openISOFS(isoPath, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.lookup(file)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(content)) > f.Length {
		t.Fatalf("patch for %s is %d bytes, the file only %d", file, len(content), f.Length)
	}
	content += strings.Repeat(" ", int(f.Length)-len(content))
	copy(data[f.Offset:], content)
	if err := os.WriteFile(isoPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func patchBytes(t *testing.T, p string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// modern is the fixture the broken ISOs are made from, unless they say otherwise.
const modern = "embed-areas-2023-07.x86_64.iso"

// modernWithBytes makes a broken ISO: the modern fixture with b written at off.
func modernWithBytes(off int64, b []byte) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := coreisotest.Fixture(t, modern)
		patchBytes(t, p, off, b)
		return p
	}
}

// modernWithFile makes a broken ISO: the modern fixture with file's contents replaced.
func modernWithFile(file, content string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := coreisotest.Fixture(t, modern)
		patchISOFile(t, p, file, content)
		return p
	}
}

// A table of broken ISOs: each gives a clear error that names the file and
// the problem, never a panic.
func TestMalformedISOs(t *testing.T) {
	truncatedXZ := xzOf(t, map[string]string{"config.ign": "{}"})[:40]
	traversal := cpioOf(t, map[string]string{"../../../etc/shadow": "x"})
	tests := []struct {
		name   string
		make   func(t *testing.T, dir string) string
		op     string // "open" (default), "show", "kargs"
		want   error
		detail string
	}{
		{"empty file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "empty.iso")
			os.WriteFile(p, nil, 0o644)
			return p
		}, "", ErrNotISO, "too small"},
		{"zeros", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "zeros.iso")
			os.WriteFile(p, make([]byte, 1<<20), 0o644)
			return p
		}, "", ErrNotISO, "CD001"},
		{"directory", func(t *testing.T, dir string) string { return dir }, "", ErrNotISO, "regular file"},
		{"missing", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope.iso") }, "", os.ErrNotExist, "no such file"},
		{"truncated", func(t *testing.T, dir string) string {
			p := coreisotest.Fixture(t, modern)
			os.Truncate(p, 40<<10)
			return p
		}, "", ErrMalformed, "outside"},
		{"wrong magic", modernWithBytes(16*2048+1, []byte("XXXXX")), "", ErrNotISO, "CD001"},
		{"broken root record", modernWithBytes(16*2048+156, []byte{5}), "", ErrMalformed, "root record"},
		{"root directory extent outside the image", modernWithBytes(16*2048+156+2, []byte{0xff, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff}), "", ErrMalformed, "outside"},
		{"bogus igninfo.json", modernWithFile("coreos/igninfo.json", `{"file": [1,2`), "", ErrMalformed, "igninfo.json"},
		{"igninfo names a missing file", modernWithFile("coreos/igninfo.json", `{"file":"images/nope.img"}`), "", ErrMalformed, "not in the image"},
		{"igninfo area outside its file", modernWithFile("coreos/igninfo.json", `{"file":"zipl.prm","offset":999}`), "", ErrMalformed, "lies outside"},
		{"bogus kargs.json", modernWithFile("coreos/kargs.json", `{"default":"a","files":[],"size":100}`), "", ErrMalformed, "kargs.json"},
		{"kargs.json size too big", modernWithFile("coreos/kargs.json", `{"default":"a","files":[{"path":"zipl.prm","offset":0}],"size":99999}`), "", ErrMalformed, "size"},
		{"kargs.json area outside its file", modernWithFile("coreos/kargs.json", `{"default":"a","files":[{"path":"zipl.prm","offset":0}],"size":1000}`), "", ErrMalformed, "outside"},
		{"kargs.json bad pad", modernWithFile("coreos/kargs.json", `{"default":"a","files":[{"path":"zipl.prm","offset":0,"pad":"##"}],"size":10}`), "", ErrMalformed, "pad"},
		{"bogus features.json", modernWithFile("coreos/features.json", `[`), "", ErrMalformed, "features.json"},
		{"coreiso+ header outside the image", func(t *testing.T, dir string) string {
			p := coreisotest.Fixture(t, "embed-areas-2020-09.iso")
			data, _ := os.ReadFile(p)
			hideIgnitionImg(t, data)
			binary.LittleEndian.PutUint64(data[legacyIgnHeaderOffset+8:], 1<<40)
			os.WriteFile(p, data, 0o644)
			return p
		}, "", ErrMalformed, "coreiso+"},
		{"coreKarg header area outside the image", func(t *testing.T, dir string) string {
			p := coreisotest.Fixture(t, "embed-areas-2021-01.iso")
			patchBytes(t, p, legacyKargsHeaderOffset+24, binary.LittleEndian.AppendUint64(nil, 1<<40))
			return p
		}, "", ErrMalformed, "coreKarg"},
		{"no embed area at all", func(t *testing.T, dir string) string {
			return coreisotest.Fixture(t, "synthetic.iso")
		}, "", ErrNoEmbedArea, "coreiso+"},
		{"garbage in the embed area", modernWithBytes(139264, []byte("garbage!")), "show", ErrMalformed, "unknown format"},
		{"truncated xz in the embed area", modernWithBytes(139264, truncatedXZ), "show", ErrMalformed, "xz"},
		{"path traversal in the embed area", modernWithBytes(139264, traversal), "show", ErrMalformed, "path traversal"},
		{"karg areas disagree", modernWithBytes(137037, []byte("Z")), "kargs", ErrMalformed, "disagree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.make(t, t.TempDir())
			err := readBroken(tt.op, p)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.detail) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error = %q\nwant %v, mentioning %q and the file", err, tt.want, tt.detail)
			}
			t.Log(err)
			if !IsBadInput(err) {
				t.Errorf("IsBadInput(%v) = false", err)
			}
		})
	}
}

// readBroken does op ("open", "show", "kargs") on the broken ISO at p.
func readBroken(op, p string) error {
	switch op {
	case "show":
		if _, err := ShowIgnition(p); err != nil {
			return err
		}
		_, err := Customize(context.Background(), p, "", Customization{Ignition: []byte("{}"), Force: true})
		return err
	case "kargs":
		_, err := ShowKargs(p, false)
		return err
	}
	iso, err := Open(p)
	if err == nil {
		iso.Close()
	}
	return err
}

// hideIgnitionImg hides images/ignition.img from the directory of the image
// in data: IGNITION.IMG becomes IGNITIOX.IMG, its Rock Ridge name ignitiox.img.
func hideIgnitionImg(t *testing.T, data []byte) {
	t.Helper()
	i := bytes.Index(data, []byte("IGNITION.IMG;1"))
	if i < 0 {
		t.Fatal("IGNITION.IMG record not found")
	}
	data[i+7] = 'X'
	for j := 0; ; j++ {
		k := bytes.Index(data[j:], []byte("ignition.img"))
		if k < 0 {
			return
		}
		j += k
		if j >= 5 && string(data[j-5:j-3]) == "NM" {
			data[j+7] = 'x'
		}
	}
}
