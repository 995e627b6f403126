package diskpack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

var small = Params{Min: 16 << 10, Avg: 64 << 10, Max: 256 << 10}

// content is disk-like data: random runs, text-like runs and zeros.
func content(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for off := 0; off < n; off += 96 << 10 {
		end := min(off+64<<10, n)
		if r.IntN(2) == 0 {
			for i := off; i < end; i++ {
				b[i] = byte(r.Uint32())
			}
		} else {
			words := []string{"etc ", "usr ", "lib64 ", "systemd ", "kubelet ", "\n"}
			for i := off; i < end; {
				i += copy(b[i:end], words[r.IntN(len(words))])
			}
		}
	}
	return b
}

// sparseFile writes b at off in a file of size bytes, leaving the rest a hole.
func sparseFile(t *testing.T, size int64, parts map[int64][]byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, b := range parts {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func pack(t *testing.T, f *os.File, size int64, p Params) (*Index, []byte) {
	t.Helper()
	var buf bytes.Buffer
	res, err := Pack(context.Background(), f, size, &buf, p, 2, WithGroupChunks(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.PackDigest != sha256Of(buf.Bytes()) || res.PackSize != int64(buf.Len()) || res.RawDigest != sha256Of(rawOf(t, f, size)) {
		t.Errorf("Pack's sums: pack %s (%d bytes), raw %s", res.PackDigest, res.PackSize, res.RawDigest)
	}
	return res.Index, buf.Bytes()
}

func rawOf(t *testing.T, f *os.File, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// A packed disk reads back byte for byte; holes and zero runs are not stored; the index
// survives its own encoding.
func TestPackRoundTrip(t *testing.T) {
	const size = 64 << 20
	data := content(6<<20, 1)
	f := sparseFile(t, size, map[int64][]byte{0: data[:2<<20], 20 << 20: data[2<<20:], 40 << 20: make([]byte, 4<<20)})
	x, p := pack(t, f, size, small)
	if got, want := x.DataBytes(), int64(len(data)); got < want || got > want+2*small.Max {
		t.Errorf("chunks cover %d bytes, the disk holds %d of data", got, want)
	}
	blobs, packSize := x.Blobs()
	if packSize != int64(len(p)) || len(blobs) == 0 {
		t.Fatalf("pack is %d bytes, the index says %d", len(p), packSize)
	}
	if packSize >= int64(len(data)) {
		t.Errorf("pack of %d bytes for %d of data: nothing was compressed", packSize, len(data))
	}
	b, err := x.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	y, err := ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(p), y, "pack")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	if n, err := r.WriteTo(context.Background(), &out); err != nil || n != size {
		t.Fatalf("WriteTo = %d, %v", n, err)
	}
	if sha256.Sum256(out.Bytes()) != sha256.Sum256(rawOf(t, f, size)) {
		t.Error("the assembled disk differs from the original")
	}
}

// Content-defined chunks: bytes inserted near the start shift everything after them, yet
// almost every chunk is shared; one changed byte changes one chunk or two.
func TestChangesCostFewChunks(t *testing.T) {
	data := content(8<<20, 2)
	base := sparseFile(t, int64(len(data)), map[int64][]byte{0: data})
	x, _ := pack(t, base, int64(len(data)), small)

	shifted := append(append(append([]byte{}, data[:100<<10]...), []byte("inserted bytes")...), data[100<<10:]...)
	fs := sparseFile(t, int64(len(shifted)), map[int64][]byte{0: shifted})
	xs, _ := pack(t, fs, int64(len(shifted)), small)
	if d := Compare(x, xs); d.SharedBytes < d.Bytes*95/100 {
		t.Errorf("after an insertion %d of %d bytes are shared", d.SharedBytes, d.Bytes)
	}
	// Groups cut where chunks' digests say: the insertion changes the groups around it.
	if d := Compare(x, xs); d.Groups-d.SharedGroups > 2 || d.Groups < 10 || d.PushStored > d.Stored/5 {
		t.Errorf("after an insertion %d of %d groups changed, a push sends %d of %d bytes", d.Groups-d.SharedGroups, d.Groups, d.PushStored, d.Stored)
	}

	changed := append([]byte{}, data...)
	changed[5<<20] ^= 0xff
	fc := sparseFile(t, int64(len(changed)), map[int64][]byte{0: changed})
	xc, _ := pack(t, fc, int64(len(changed)), small)
	if d := Compare(x, xc); d.Chunks-d.SharedChunks > 2 || d.Chunks-d.SharedChunks < 1 {
		t.Errorf("one changed byte changed %d of %d chunks", d.Chunks-d.SharedChunks, d.Chunks)
	}
	if d := Compare(x, xc); d.Groups-d.SharedGroups > 2 || d.Groups-d.SharedGroups < 1 {
		t.Errorf("one changed byte changed %d of %d groups", d.Groups-d.SharedGroups, d.Groups)
	}
}

// An earlier disk, packed or raw, gives the very stored bytes of the chunks it shares; a
// damaged copy is named and not used.
func TestOld(t *testing.T) {
	data := content(4<<20, 3)
	size := int64(len(data))
	f := sparseFile(t, size, map[int64][]byte{0: data})
	x, p := pack(t, f, size, small)

	next := append([]byte{}, data...)
	copy(next[1<<20:], bytes.Repeat([]byte("new "), 4096))
	fn := sparseFile(t, size, map[int64][]byte{0: next})
	xn, _ := pack(t, fn, size, small)

	fromPack, err := OldPack(bytes.NewReader(p), x, "old pack")
	if err != nil {
		t.Fatal(err)
	}
	defer fromPack.Close()
	fromRaw, err := OldRaw(context.Background(), f, size, small, "old disk")
	if err != nil {
		t.Fatal(err)
	}
	defer fromRaw.Close()
	for _, old := range []*Old{fromPack, fromRaw} {
		found, missing := 0, 0
		for _, c := range xn.Chunks {
			b, err := old.Stored(c)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", old.Name(), err)
			case b == nil:
				missing++
			case sha256Of(b) != c.Blob:
				t.Fatalf("%s gave bytes that are not blob %s", old.Name(), c.Blob)
			default:
				found++
			}
		}
		if found == 0 || missing == 0 || found < 3*missing {
			t.Errorf("%s: %d chunks found, %d missing", old.Name(), found, missing)
		}
	}

	// Damage the old pack's first chunk: it is named, not used.
	bad := append([]byte{}, p...)
	bad[x.Chunks[0].Stored/2] ^= 0xff
	damaged, err := OldPack(bytes.NewReader(bad), x, "damaged pack")
	if err != nil {
		t.Fatal(err)
	}
	defer damaged.Close()
	_, err = damaged.Stored(x.Chunks[0])
	var ce *ChunkError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "damaged pack") {
		t.Errorf("a damaged chunk gave %v", err)
	}
	// And a reader of the damaged pack refuses it as it assembles.
	r, err := NewReader(bytes.NewReader(bad), x, "damaged pack")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.WriteTo(context.Background(), io.Discard); !errors.As(err, &ce) {
		t.Errorf("assembling a damaged pack: %v", err)
	}
}

func TestValidate(t *testing.T) {
	good := func() *Index {
		id, blob, check := sha256Of([]byte("a")), sha256Of([]byte("b")), checkOf([]byte("b"))
		return &Index{Version: IndexVersion, Size: 1 << 20, Algorithm: Algorithm, Params: small, Compression: CompressionZstd, GroupChunks: 2,
			PackBlobs: []PackBlob{{Offset: 0, Size: 50, Digest: blob}},
			Chunks: []Chunk{{Offset: 0, Size: 100, ID: id, Blob: blob, Stored: 50, Check: check, Group: blob},
				{Offset: 4096, Size: 100, ID: id, Blob: blob, Stored: 50, Check: check, Group: blob}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Index)
		want   string
	}{
		{"version", func(x *Index) { x.Version = IndexVersion + 1 }, fmt.Sprintf("version %d", IndexVersion+1)},
		{"no check", func(x *Index) { x.Chunks[0].Check = "" }, "check"},
		{"check not blake3", func(x *Index) { x.Chunks[0].Check = string(sha256Of([]byte("b"))) }, "check"},
		{"check not hex", func(x *Index) { x.Chunks[0].Check = "blake3:" + strings.Repeat("G", 64) }, "check"},
		{"check upper case", func(x *Index) { x.Chunks[0].Check = strings.ToUpper(x.Chunks[0].Check) }, "check"},
		{"check in version 1", func(x *Index) { x.Version = 1 }, "version 1 index has no check"},
		{"group in version 2", func(x *Index) { x.Version = 2 }, "version 2 index has no groups"},
		{"no group", func(x *Index) { x.Chunks[0].Group = "" }, "group"},
		{"blob of two checks", func(x *Index) { x.Chunks[1].Check = checkOf([]byte("c")) }, "other content"},
		{"algorithm", func(x *Index) { x.Algorithm = "fastcdc" }, "algorithm"},
		{"compression", func(x *Index) { x.Compression = "xz" }, "compression"},
		{"params", func(x *Index) { x.Params.Min = 1 }, "chunk sizes"},
		{"overlap", func(x *Index) { x.Chunks[1].Offset = 50 }, "overlaps"},
		{"too long", func(x *Index) { x.Chunks[0].Size = small.Max + 1 }, "size"},
		{"past the end", func(x *Index) { x.Chunks[1].Offset = x.Size }, "ends past"},
		{"stored too large", func(x *Index) { x.Chunks[0].Stored = 1 << 30 }, "stored size"},
		{"bad digest", func(x *Index) { x.Chunks[0].ID = "md5:abc" }, "sha256"},
		{"blob of two contents", func(x *Index) { x.Chunks[1].Size = 99 }, "other content"},
		{"blob of two ids", func(x *Index) { x.Chunks[1].ID = sha256Of([]byte("z")) }, fmt.Sprintf(
			"chunks[1] at offset 4096: blob %[1]s is also chunks[0], a chunk with other content or place: id %[2]s (100 bytes, 50 stored, group %[1]s at 0) there, id %[3]s (100 bytes, 50 stored, group %[1]s at 0) here",
			sha256Of([]byte("b")), sha256Of([]byte("a")), sha256Of([]byte("z")))},
		{"blob in two places", func(x *Index) { x.Chunks[1].At = 50 }, "other content or place"},
		{"id of two blobs", func(x *Index) { x.Chunks[1].Blob = sha256Of([]byte("y")) }, fmt.Sprintf(
			"chunks[1] at offset 4096: id %s disagrees with its blob: chunks[0] has the same id with blob %s (100 bytes), this chunk blob %s (100 bytes)",
			sha256Of([]byte("a")), sha256Of([]byte("b")), sha256Of([]byte("y")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := good()
			tc.change(x)
			if err := x.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParseIndex([]byte(`{"version":1,"extra":true}`)); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// Chunks grow with the disk, in powers of two, from the default up to 2 MiB; every size
// they pick is valid.
func TestParamsFor(t *testing.T) {
	for _, tc := range []struct {
		size int64
		avg  int64
	}{
		{0, 256 << 10},
		{1 << 20, 256 << 10},
		{2 << 30, 256 << 10}, // the demo disk
		{2<<30 + 1, 512 << 10},
		{8 << 30, 1 << 20},
		{16 << 30, 2 << 20}, // the bench disk
		{120 << 30, 2 << 20},
		{1 << 50, 2 << 20},
	} {
		p := ParamsFor(tc.size)
		if p.Avg != tc.avg || p.Min != p.Avg/4 || p.Max != min(p.Avg*4, 4<<20) {
			t.Errorf("ParamsFor(%d) = %+v, want average %d", tc.size, p, tc.avg)
		}
		if err := p.validate(); err != nil {
			t.Errorf("ParamsFor(%d): %v", tc.size, err)
		}
	}
}

// Every chunk of a new index carries the BLAKE3 check of its stored bytes. An index of
// version 1 (no checks: a seed sealed before them) still reads, its chunks checked by
// their blob digests, and a damaged chunk is refused by either check.
func TestChecksAndVersion1(t *testing.T) {
	data := content(3<<20, 4)
	size := int64(len(data))
	f := sparseFile(t, size, map[int64][]byte{0: data})
	x, p := pack(t, f, size, small)
	if x.Version != IndexVersion {
		t.Fatalf("Pack wrote version %d", x.Version)
	}
	blobs, _ := x.Blobs()
	for _, b := range blobs {
		if want := checkOf(p[b.Offset : b.Offset+b.Size]); b.Check != want {
			t.Fatalf("blob at %d: check %s, its bytes are %s", b.Offset, b.Check, want)
		}
	}
	v1 := *x
	v1.Version, v1.GroupChunks, v1.PackBlobs = 1, 0, nil
	v1.Chunks = nil
	for _, c := range x.Chunks {
		c.Check, c.Group, c.At = "", "", 0
		v1.Chunks = append(v1.Chunks, c)
	}
	enc, err := v1.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	old, err := ParseIndex(enc)
	if err != nil {
		t.Fatalf("a version 1 index: %v", err)
	}
	bad := append([]byte{}, p...)
	bad[blobs[1].Offset+blobs[1].Size/2] ^= 0x01
	for _, tc := range []struct {
		x    *Index
		what string
	}{{x, "blake3 check mismatch"}, {old, "blob digest mismatch"}} {
		r, err := NewReader(bytes.NewReader(p), tc.x, "pack")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := r.WriteTo(context.Background(), &out); err != nil || !bytes.Equal(out.Bytes(), data) {
			t.Errorf("version %d: WriteTo = %v, same bytes %v", tc.x.Version, err, bytes.Equal(out.Bytes(), data))
		}
		r.Close()
		r, err = NewReader(bytes.NewReader(bad), tc.x, "damaged pack")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.WriteTo(context.Background(), io.Discard)
		var ce *ChunkError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.what) {
			t.Errorf("version %d, a damaged chunk: %v, want %q", tc.x.Version, err, tc.what)
		}
		r.Close()
	}
}

// gatedPack lets reads of the first chunk through and holds every other one until
// release closes.
type gatedPack struct {
	r       io.ReaderAt
	held    atomic.Int32
	release chan struct{}
}

func (g *gatedPack) ReadAt(p []byte, off int64) (int, error) {
	if off > 0 {
		g.held.Add(1)
		<-g.release
	}
	return g.r.ReadAt(p, off)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// whileReadsHeld packs 8 MiB of content(seed) and, in a synctest bubble, reads it through a
// gatedPack: start begins what is tested on the reader (in a goroutine of its own) and
// returns where its result comes. Once every goroutine is blocked (the reads of all but
// the first chunk are held) it must not have returned; the reads are then released, and
// its result is returned once the reader is closed.
func whileReadsHeld(t *testing.T, seed uint64, what string, start func(t *testing.T, r *Reader) <-chan error) error {
	const size = 8 << 20
	f := sparseFile(t, size, map[int64][]byte{0: content(size, seed)})
	x, p := pack(t, f, size, small)
	var result error
	synctest.Test(t, func(t *testing.T) {
		g := &gatedPack{r: bytes.NewReader(p), release: make(chan struct{})}
		r, err := NewReader(g, x, "pack")
		if err != nil {
			t.Fatal(err)
		}
		returned := start(t, r)
		synctest.Wait()
		select {
		case err := <-returned:
			t.Fatalf("%s returned (%v) while %d chunk reads were still held", what, err, g.held.Load())
		default:
		}
		close(g.release)
		result = <-returned
		r.Close()
	})
	return result
}

// WriteTo returns only after every chunk decoder it started has finished: the caller
// closes the shared zstd decoder next, and a decoder still running then panics.
func TestWriteToWaitsForItsDecoders(t *testing.T) {
	err := whileReadsHeld(t, 3, "WriteTo", func(_ *testing.T, r *Reader) <-chan error {
		returned := make(chan error, 1)
		go func() {
			_, err := r.WriteTo(context.Background(), failingWriter{})
			returned <- err
		}()
		return returned
	})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteTo = %v, want the writer's error", err)
	}
}

// Closing a stream part-way returns only once its chunk decoders have finished, so that
// closing the reader right after is safe.
func TestStreamCloseWaitsForItsDecoders(t *testing.T) {
	whileReadsHeld(t, 4, "Close", func(t *testing.T, r *Reader) <-chan error {
		s := r.Stream(context.Background())
		if _, err := io.ReadFull(s, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		return closed
	})
}
