package coreiso

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Paths inside the embed initrd.
const (
	IgnitionPath = "config.ign"
	NetworkDir   = "etc/coreos-firstboot-network"
)

// maxInitrdSize bounds decompressed data, so a decompression bomb in an ISO
// cannot exhaust memory. Real embed payloads are a config and a few keyfiles.
const maxInitrdSize = 128 << 20

// Initrd is the content of an embed area: regular files by path.
type Initrd struct {
	files map[string]initrdFile
}

type initrdFile struct {
	mode uint32 // permission bits
	data []byte
}

// NewInitrd returns an empty initrd.
func NewInitrd() *Initrd { return &Initrd{files: map[string]initrdFile{}} }

// Get returns the contents of path.
func (in *Initrd) Get(p string) ([]byte, bool) {
	f, ok := in.files[p]
	return f.data, ok
}

// Set stores a file with the given permission bits.
func (in *Initrd) Set(p string, perm uint32, data []byte) {
	in.files[p] = initrdFile{mode: perm & 0o7777, data: data}
}

// Remove deletes a file.
func (in *Initrd) Remove(p string) { delete(in.files, p) }

// Paths lists the files, sorted.
func (in *Initrd) Paths() []string {
	out := make([]string, 0, len(in.files))
	for p := range in.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Files under dir (one level), sorted.
func (in *Initrd) filesUnder(dir string) []string {
	var out []string
	for _, p := range in.Paths() {
		if path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	return out
}

// Empty reports whether the initrd holds no files.
func (in *Initrd) Empty() bool { return len(in.files) == 0 }

// Encode writes the initrd the way the kernel and coreos-installer expect:
// a newc cpio archive (parent directories 040755 first) compressed with xz
// using CRC32 checks, since the kernel's xz decoder rejects CRC64. An empty
// initrd encodes to nothing (a zeroed area). The output is deterministic.
func (in *Initrd) Encode() ([]byte, error) {
	if in.Empty() {
		return nil, nil
	}
	var archive bytes.Buffer
	cw := cpio.NewWriter(&archive)
	dirs := map[string]bool{}
	for _, p := range in.Paths() {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents sort before children
	for _, d := range dirList {
		if err := cw.WriteHeader(&cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755, Links: 2}); err != nil {
			return nil, fmt.Errorf("writing cpio directory %s: %w", d, err)
		}
	}
	for _, p := range in.Paths() {
		f := in.files[p]
		if err := cw.WriteHeader(&cpio.Header{Name: p, Mode: cpio.TypeReg | cpio.FileMode(f.mode), Size: int64(len(f.data))}); err != nil {
			return nil, fmt.Errorf("writing cpio header for %s: %w", p, err)
		}
		if _, err := cw.Write(f.data); err != nil {
			return nil, fmt.Errorf("writing cpio data for %s: %w", p, err)
		}
	}
	if err := cw.Close(); err != nil {
		return nil, fmt.Errorf("closing cpio archive: %w", err)
	}
	// A dictionary larger than the input buys nothing and costs allocation
	// time on every embed (and on every later read), so size it to the input.
	dict := min(max(archive.Len(), 64<<10), 8<<20)
	var buf bytes.Buffer
	xw, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: dict}.NewWriter(&buf)
	if err != nil {
		return nil, fmt.Errorf("creating xz writer: %w", err)
	}
	if _, err := xw.Write(archive.Bytes()); err != nil {
		return nil, fmt.Errorf("compressing the initrd: %w", err)
	}
	if err := xw.Close(); err != nil {
		return nil, fmt.Errorf("closing xz stream: %w", err)
	}
	return buf.Bytes(), nil
}

// ParseInitrd reads an embed area: any sequence of gzip, xz, zstd or plain
// newc cpio members, separated or followed by zero padding. Later members
// override earlier ones, as when the kernel unpacks them.
func ParseInitrd(data []byte) (*Initrd, error) {
	in := NewInitrd()
	total := 0
	for member := 0; ; member++ {
		// skip zero padding
		i := 0
		for i < len(data) && data[i] == 0 {
			i++
		}
		data = data[i:]
		if len(data) == 0 {
			return in, nil
		}
		var (
			archive []byte
			rest    []byte
			err     error
		)
		switch {
		case hasPrefix(data, "\x1f\x8b"):
			archive, rest, err = gunzipOne(data)
		case hasPrefix(data, "\xfd7zXZ\x00"):
			archive, rest, err = unxzOne(data)
		case hasPrefix(data, "\x28\xb5\x2f\xfd"):
			archive, rest, err = unzstdOne(data)
		case hasPrefix(data, "07070"):
			archive, rest = data, nil
		default:
			n := min(len(data), 8)
			return nil, fmt.Errorf("%w: initrd member %d: unknown format (starts with % x); want gzip, xz, zstd or newc cpio", ErrMalformed, member, data[:n])
		}
		if err != nil {
			return nil, fmt.Errorf("initrd member %d: %w", member, err)
		}
		if rest != nil {
			total += len(archive)
		}
		if total > maxInitrdSize || len(archive) > maxInitrdSize {
			return nil, fmt.Errorf("%w: initrd decompresses to more than %d bytes", ErrMalformed, maxInitrdSize)
		}
		used, err := readCpio(archive, in)
		if err != nil {
			return nil, fmt.Errorf("initrd member %d: %w", member, err)
		}
		if rest == nil {
			// plain cpio: the next member follows the trailer
			rest = archive[used:]
		} else if bytes.ContainsFunc(archive[used:], func(r rune) bool { return r != 0 }) {
			// compressed members may hold several cpio archives back to back
			more, err := ParseInitrd(archive[used:])
			if err != nil {
				return nil, fmt.Errorf("initrd member %d: %w", member, err)
			}
			for p, f := range more.files {
				in.files[p] = f
			}
		}
		data = rest
	}
}

// readCpio reads one newc archive up to its trailer into in and returns the
// bytes consumed.
func readCpio(archive []byte, in *Initrd) (int, error) {
	br := bytes.NewReader(archive)
	r := cpio.NewReader(br)
	for {
		hdr, err := r.Next()
		if errors.Is(err, io.EOF) {
			// the library stops on the trailer name without consuming its padding
			used := len(archive) - br.Len()
			if used == 0 || !bytes.Contains(archive[:used], []byte("TRAILER!!!")) {
				return 0, fmt.Errorf("%w: cpio archive ends without a TRAILER!!! entry", ErrMalformed)
			}
			return used, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%w: cpio archive: %v", ErrMalformed, err)
		}
		name, err := cleanMemberPath(hdr.Name)
		if err != nil {
			return 0, err
		}
		if hdr.Mode&^cpio.ModePerm != cpio.TypeReg {
			continue // directories are implied; other types are not ours to carry
		}
		if hdr.Size > int64(br.Len()) {
			return 0, fmt.Errorf("%w: cpio entry %q claims %d bytes but only %d remain", ErrMalformed, hdr.Name, hdr.Size, br.Len())
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(r, data); err != nil {
			return 0, fmt.Errorf("%w: cpio entry %q: %v", ErrMalformed, hdr.Name, err)
		}
		if name == "" {
			continue
		}
		in.files[name] = initrdFile{mode: uint32(hdr.Mode.Perm()), data: data}
	}
}

// cleanMemberPath normalizes an archive member name and rejects ones that
// would escape the unpack root.
func cleanMemberPath(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: cpio entry name %q contains NUL", ErrMalformed, name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: cpio entry %q escapes the archive root (path traversal)", ErrMalformed, name)
		}
	}
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/"), nil
}

func gunzipOne(data []byte) (archive, rest []byte, err error) {
	br := bytes.NewReader(data)
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(io.LimitReader(zr, maxInitrdSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
	}
	return out, data[len(data)-br.Len():], nil
}

// unxzOne decompresses the xz stream at the start of data. The stream's end
// is found from its footer (CRC32-protected, "YZ" magic, 4-byte aligned), so
// members after it can be read too.
func unxzOne(data []byte) (archive, rest []byte, err error) {
	end := -1
	for p := 12; p+12 <= len(data); p += 4 {
		f := data[p : p+12]
		if f[10] == 'Y' && f[11] == 'Z' && binary.LittleEndian.Uint32(f[0:4]) == crc32.ChecksumIEEE(f[4:10]) &&
			bytes.Equal(f[8:10], data[6:8]) {
			end = p + 12
			break
		}
	}
	if end < 0 {
		return nil, nil, fmt.Errorf("%w: xz stream is truncated (no stream footer)", ErrMalformed)
	}
	zr, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(data[:end]))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: xz: %v", ErrMalformed, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxInitrdSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: xz: %v", ErrMalformed, err)
	}
	return out, data[end:], nil
}

// unzstdOne decompresses the zstd frame at the start of data; the frame's
// length comes from walking its block headers.
func unzstdOne(data []byte) (archive, rest []byte, err error) {
	n, err := zstdFrameLen(data)
	if err != nil {
		return nil, nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxInitrdSize))
	if err != nil {
		return nil, nil, fmt.Errorf("creating zstd decoder: %w", err)
	}
	defer dec.Close()
	out, err := dec.DecodeAll(data[:n], nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
	}
	return out, data[n:], nil
}

func zstdFrameLen(data []byte) (int, error) {
	trunc := fmt.Errorf("%w: zstd frame is truncated", ErrMalformed)
	if len(data) < 5 {
		return 0, trunc
	}
	fhd := data[4]
	if fhd&0x08 != 0 {
		return 0, fmt.Errorf("%w: zstd frame header has the reserved bit set", ErrMalformed)
	}
	single := fhd&0x20 != 0
	p := 5
	if !single {
		p++ // window descriptor
	}
	p += []int{0, 1, 2, 4}[fhd&0x03] // dictionary id
	fcs := []int{0, 2, 4, 8}[fhd>>6]
	if fcs == 0 && single {
		fcs = 1
	}
	p += fcs
	for {
		if p+3 > len(data) {
			return 0, trunc
		}
		bh := uint32(data[p]) | uint32(data[p+1])<<8 | uint32(data[p+2])<<16
		p += 3
		last := bh&1 != 0
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte on disk
			size = 1
		case 3:
			return 0, fmt.Errorf("%w: zstd frame has a reserved block type", ErrMalformed)
		}
		p += size
		if p > len(data) {
			return 0, trunc
		}
		if last {
			break
		}
	}
	if fhd&0x04 != 0 { // content checksum
		p += 4
		if p > len(data) {
			return 0, trunc
		}
	}
	return p, nil
}
