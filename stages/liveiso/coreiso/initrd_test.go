package coreiso

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/zstd"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/test/testbin"
)

func cpioOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := cpio.NewWriter(&b)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := w.WriteHeader(&cpio.Header{Name: name, Mode: cpio.TypeReg | 0o644, Size: int64(len(files[name]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func xzOf(t testing.TB, files map[string]string) []byte {
	in := NewInitrd()
	for k, v := range files {
		in.Set(k, 0o600, []byte(v))
	}
	b, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Concatenated members of every accepted format, with zero padding between
// them; later members win, as when the kernel unpacks them.
func TestParseInitrdFormats(t *testing.T) {
	var area []byte
	area = append(area, gz(t, cpioOf(t, map[string]string{"config.ign": "gzip", "a": "1"}))...)
	area = append(area, make([]byte, 7)...)
	area = append(area, xzOf(t, map[string]string{"b": "2"})...)
	area = append(area, make([]byte, 4)...)
	area = append(area, zst(t, cpioOf(t, map[string]string{"config.ign": "zstd", "./c": "3"}))...)
	area = append(area, cpioOf(t, map[string]string{"d": "4"})...)
	area = append(area, make([]byte, 4096)...)
	in, err := ParseInitrd(area)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"config.ign": "zstd", "a": "1", "b": "2", "c": "3", "d": "4"}
	if got := strings.Join(in.Paths(), ","); got != "a,b,c,config.ign,d" {
		t.Fatalf("paths = %s", got)
	}
	for k, v := range want {
		if d, _ := in.Get(k); string(d) != v {
			t.Errorf("%s = %q, want %q", k, d, v)
		}
	}
}

// Archives written by the real cpio, gzip and zstd tools read back.
func TestParseInitrdFromTools(t *testing.T) {
	testbin.Require(t, "cpio", "cpio")
	testbin.Require(t, "zstd", "zstd")
	testbin.Require(t, "gzip", "gzip")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.ign"), []byte(`{"ignition":{"version":"3.3.0"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "sh", "-c", "echo config.ign | cpio -o -H newc --quiet > a.cpio && gzip -k a.cpio && zstd -q a.cpio")
	for _, f := range []string{"a.cpio", "a.cpio.gz", "a.cpio.zst"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		in, err := ParseInitrd(append(raw, make([]byte, 1024)...))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d, ok := in.Get("config.ign"); !ok || !strings.Contains(string(d), "3.3.0") {
			t.Errorf("%s: config.ign = %q", f, d)
		}
	}
}

func TestEncodeDeterministicAndCRC32(t *testing.T) {
	a := xzOf(t, map[string]string{"config.ign": "{}", "etc/x/y": "z"})
	b := xzOf(t, map[string]string{"etc/x/y": "z", "config.ign": "{}"})
	if !bytes.Equal(a, b) {
		t.Error("encoding depends on insertion order")
	}
	// stream flags byte 7: check type 0x01 = CRC32 (the kernel rejects CRC64)
	if a[7] != 0x01 {
		t.Errorf("xz check type %#x, want CRC32 (0x01)", a[7])
	}
	if enc, _ := NewInitrd().Encode(); enc != nil {
		t.Error("empty initrd must encode to nothing (a zeroed area)")
	}
}

func TestParseInitrdMalformed(t *testing.T) {
	good := cpioOf(t, map[string]string{"config.ign": "{}"})
	traversal := cpioOf(t, map[string]string{"../../etc/passwd": "x"})
	noTrailer := good[:bytes.Index(good, []byte("TRAILER!!!"))-110]
	gzGood := gz(t, good)
	zstGood := zst(t, good)
	xzGood := xzOf(t, map[string]string{"config.ign": "{}"})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown magic", []byte("hello world"), "unknown format"},
		{"cpio bad header", []byte("070701zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"), "cpio"},
		{"cpio truncated", good[:50], "cpio"},
		{"cpio without trailer", noTrailer, "TRAILER"},
		{"cpio path traversal", traversal, "path traversal"},
		{"cpio entry larger than archive", bytes.Replace(good, []byte("00000002"), []byte("0000FFFF"), 1), "claims"},
		{"gzip truncated", gzGood[:len(gzGood)-6], "gzip"},
		{"xz truncated", xzGood[:len(xzGood)-20], "xz"},
		{"xz corrupted", append(append([]byte{}, xzGood[:20]...), bytes.Repeat([]byte{0x55}, len(xzGood)-20)...), "xz"},
		{"zstd truncated", zstGood[:len(zstGood)-3], "zstd"},
		{"gzip holding garbage", gz(t, []byte("not a cpio archive")), "cpio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseInitrd(tt.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}

func BenchmarkEmbedInPlace(b *testing.B) {
	p := coreisotest.Fixture(b, "embed-areas-2023-07.x86_64.iso")
	cfg := testConfig("bench")
	for b.Loop() {
		if _, err := Customize(context.Background(), p, "", Customization{Ignition: cfg, Force: true}); err != nil {
			b.Fatal(err)
		}
	}
}
