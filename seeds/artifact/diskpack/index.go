package diskpack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// IndexVersion is the index format this package writes. Version 2 adds each chunk's
// Check, version 3 its Group, version 4 the PackBlobs of a grouped disk; older indexes
// (seeds sealed before them) are still read, each chunk of a version 1 or 2 index its own
// group, and a push of a version 3 index hashes its pack blobs itself.
const IndexVersion = 4

// CheckAlgorithm is the hash of a chunk's Check: BLAKE3, which this machine's cores run
// six times faster than sha256 (no SHA extensions), so a write or pull that checks every
// chunk is no longer bound by the hash.
const CheckAlgorithm = "blake3"

// Algorithm names the chunker: desync's buzhash over a 48-byte window.
const Algorithm = "desync-buzhash"

// CompressionZstd is how every chunk is stored.
const CompressionZstd = "zstd"

// Limits that bound what reading an index or a chunk may cost, whoever wrote it.
const (
	// MaxDiskSize bounds the raw size of a disk any seed may declare: 64 TiB, hundreds of
	// times what a single-node cluster's disk holds. A declared size is believed only up to
	// it, so a crafted index cannot set a verify hashing exabytes of zeros.
	MaxDiskSize = 64 << 40
	// MaxIndexSize bounds the index file: about 170,000 chunks of a version 3 index (a line
	// of about 380 bytes each), a disk with 340 GiB of data at 2 MiB chunks.
	MaxIndexSize = 64 << 20
	// HeapLimit is the heap a process packing, moving or writing a disk keeps to
	// (debug.SetMemoryLimit): what they hold at once is bounded (a few chunks per core),
	// but left to itself the collector lets the garbage of multi-MiB chunks grow to several
	// times that.
	HeapLimit = 128 << 20
	// MaxChunkSize bounds Params.Max, and so every chunk's raw size in memory.
	MaxChunkSize = 16 << 20
	// minChunkSize is the chunker's own floor (its window) rounded up.
	minChunkSize = 4 << 10
)

// Params are the chunk sizes: no chunk is shorter than Min (except at the end of a data
// range) or longer than Max, and on average Avg long.
type Params struct {
	Min int64 `json:"min"`
	Avg int64 `json:"avg"`
	Max int64 `json:"max"`
}

// DefaultParams: chunks of a quarter MiB on average. A rebuild of the demo seed after a
// one-file change shares 97.6% of its stored bytes at this size, 92.6% at 512 KiB.
func DefaultParams() Params { return Params{Min: 64 << 10, Avg: 256 << 10, Max: 1 << 20} }

// ParamsFor picks the chunk sizes for a disk of size bytes: DefaultParams up to 2 GiB,
// then twice the average for each doubling of the disk, up to 2 MiB (a 16 GiB disk and
// larger). The size is the disk's virtual size, which the blueprint fixes, so every
// rebuild of a seed chunks alike and can share chunks with the last. Larger disks get
// larger chunks because registries pay per blob: the test registry here spends about
// 10 ms on each upload whatever its size, which at a quarter MiB would cost a 6 GiB disk
// four minutes; at 2 MiB, a 40 GB disk still makes about 20,000 chunks.
//
// The longest chunk stays at 4 MiB: desync's chunker reads ten of them ahead, and a
// packing process must stay within HeapLimit.
func ParamsFor(size int64) Params {
	p := DefaultParams()
	for limit := int64(2 << 30); size > limit && p.Avg < 2<<20; limit *= 2 {
		p = Params{Min: p.Min * 2, Avg: p.Avg * 2, Max: min(p.Max*2, 4<<20)}
	}
	return p
}

func (p Params) validate() error {
	if p.Min < minChunkSize || p.Min > p.Avg || p.Avg > p.Max || p.Max > MaxChunkSize {
		return fmt.Errorf("chunk sizes min %d, avg %d, max %d: want %d <= min <= avg <= max <= %d",
			p.Min, p.Avg, p.Max, minChunkSize, MaxChunkSize)
	}
	return nil
}

// Chunk is one stored piece of the disk.
type Chunk struct {
	// Offset of the chunk on the raw disk.
	Offset int64 `json:"offset"`
	// Size of its raw bytes.
	Size int64 `json:"size"`
	// ID is the sha256 of its raw bytes.
	ID digest.Digest `json:"id"`
	// Blob is the sha256 of its compressed bytes, as stored in the pack and a registry.
	Blob digest.Digest `json:"blob"`
	// Stored is the size of its compressed bytes.
	Stored int64 `json:"stored"`
	// Check is the BLAKE3 hash of its compressed bytes ("blake3:" and 64 hex digits), what
	// a write or a pull checks them against. Version 2 on; in a version 1 index, Blob is
	// the check.
	Check string `json:"check,omitempty"`
	// Group is the sha256 of the group the chunk is stored in (version 3 on), the registry
	// blob that holds it at At, its stored bytes' offset inside the group.
	Group digest.Digest `json:"group,omitempty"`
	At    int64         `json:"at,omitempty"`
}

// Index describes a packed disk. Chunks are in disk order and do not overlap; what no
// chunk covers holds zeros.
type Index struct {
	Version     int    `json:"version"`
	Size        int64  `json:"size"`
	Algorithm   string `json:"algorithm"`
	Params      Params `json:"params"`
	Compression string `json:"compression"`
	// GroupChunks is the mean number of chunks a group was cut for (version 3 on).
	GroupChunks int `json:"groupChunks,omitempty"`
	// PackBlobs are the blobs a first push sends the pack as (version 4 on, a disk whose
	// chunks are grouped), in order, tiling the pack.
	PackBlobs []PackBlob `json:"packBlobs,omitempty"`
	Chunks    []Chunk    `json:"chunks"`
}

// Blob is one distinct chunk as stored in the pack.
type Blob struct {
	Digest digest.Digest // of the compressed bytes
	Size   int64         // compressed
	Offset int64         // in the pack
	ID     digest.Digest // of the raw bytes
	Raw    int64         // raw size
	Check  string        // the chunk's Check
	Group  digest.Digest // the chunk's Group (version 3 on)
	At     int64         // its offset in the group
}

// Blobs lists the distinct chunks in pack order (the order they first occur on the disk)
// with their offsets in the pack, and the pack's size.
func (x *Index) Blobs() ([]Blob, int64) {
	seen := make(map[digest.Digest]bool, len(x.Chunks))
	var out []Blob
	var off int64
	for _, c := range x.Chunks {
		if seen[c.Blob] {
			continue
		}
		seen[c.Blob] = true
		out = append(out, Blob{Digest: c.Blob, Size: c.Stored, Offset: off, ID: c.ID, Raw: c.Size, Check: c.Check, Group: c.Group, At: c.At})
		off += c.Stored
	}
	return out, off
}

// DataBytes is the raw bytes the chunks cover: the disk less its zero ranges.
func (x *Index) DataBytes() int64 {
	var n int64
	for _, c := range x.Chunks {
		n += c.Size
	}
	return n
}

// maxStored bounds a chunk's compressed size: zstd never grows data by more than a few
// bytes per 128 KiB block plus its frame header.
func maxStored(raw int64) int64 { return raw + raw>>7 + 1024 }

// Validate reports every problem of the index at once.
func (x *Index) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if x.Version < 1 || x.Version > IndexVersion {
		bad("version %d is not within 1..%d", x.Version, IndexVersion)
	}
	if x.Algorithm != Algorithm {
		bad("algorithm %q is not %q", x.Algorithm, Algorithm)
	}
	if x.Compression != CompressionZstd {
		bad("compression %q is not %q", x.Compression, CompressionZstd)
	}
	if err := x.Params.validate(); err != nil {
		bad("%v", err)
	}
	if x.Size <= 0 || x.Size > MaxDiskSize {
		bad("size %d is not within 1..%d (64 TiB)", x.Size, int64(MaxDiskSize))
	}
	type indexed struct {
		Chunk
		index int
	}
	blobs, ids := map[digest.Digest]indexed{}, map[digest.Digest]indexed{}
	var end int64
	for i, c := range x.Chunks {
		if len(errs) > 20 {
			bad("and more")
			break
		}
		switch {
		case c.Offset < end:
			bad("chunks[%d]: offset %d overlaps the chunk before, which ends at %d", i, c.Offset, end)
		case c.Size <= 0 || c.Size > x.Params.Max || c.Size > MaxChunkSize:
			bad("chunks[%d]: size %d is not within 1..%d", i, c.Size, x.Params.Max)
		case c.Offset > x.Size-c.Size:
			bad("chunks[%d]: ends past the disk's %d bytes", i, x.Size)
		case c.Stored <= 0 || c.Stored > maxStored(c.Size):
			bad("chunks[%d]: stored size %d is not within 1..%d", i, c.Stored, maxStored(c.Size))
		case !sha256Digest(c.ID) || !sha256Digest(c.Blob):
			bad("chunks[%d]: id %q and blob %q must be sha256 digests", i, c.ID, c.Blob)
		case x.Version == 1 && c.Check != "":
			bad("chunks[%d]: a version 1 index has no check", i)
		case x.Version > 1 && !validCheck(c.Check):
			bad("chunks[%d]: check %q is not %s: and 64 hex digits", i, c.Check, CheckAlgorithm)
		case x.Version < 3 && (c.Group != "" || c.At != 0):
			bad("chunks[%d]: a version %d index has no groups", i, x.Version)
		case x.Version >= 3 && (!sha256Digest(c.Group) || c.At < 0 || c.At > MaxGroupSize):
			bad("chunks[%d]: group %q must be a sha256 digest and at %d within 0..%d", i, c.Group, c.At, MaxGroupSize)
		}
		if first, ok := blobs[c.Blob]; ok && (first.ID != c.ID || first.Size != c.Size || first.Stored != c.Stored || first.Check != c.Check ||
			first.Group != c.Group || first.At != c.At) {
			bad("chunks[%d] at offset %d: blob %s is also chunks[%d], a chunk with other content or place: id %s (%d bytes, %d stored, group %s at %d) there, id %s (%d bytes, %d stored, group %s at %d) here",
				i, c.Offset, c.Blob, first.index, first.ID, first.Size, first.Stored, first.Group, first.At, c.ID, c.Size, c.Stored, c.Group, c.At)
		} else if !ok {
			blobs[c.Blob] = indexed{c, i}
		}
		// An id names raw bytes, which pack to one blob: an id given with two blobs
		// disagrees with one of them, and a reader taking the chunk by id (a delta from an
		// old disk) would take other bytes than one taking it by blob.
		if first, ok := ids[c.ID]; ok && (first.Blob != c.Blob || first.Size != c.Size) {
			bad("chunks[%d] at offset %d: id %s disagrees with its blob: chunks[%d] has the same id with blob %s (%d bytes), this chunk blob %s (%d bytes)",
				i, c.Offset, c.ID, first.index, first.Blob, first.Size, c.Blob, c.Size)
		} else if !ok {
			ids[c.ID] = indexed{c, i}
		}
		end = c.Offset + max(c.Size, 0)
	}
	if x.Version < 4 && len(x.PackBlobs) > 0 {
		bad("packBlobs: a version %d index has none", x.Version)
	}
	switch {
	case x.Version >= 3 && len(errs) == 0:
		if errs = x.validateGroups(); len(errs) == 0 {
			errs = x.validatePackBlobs(x.Groups())
		}
	case x.Version < 3 && x.GroupChunks != 0:
		bad("groupChunks %d: a version %d index has no groups", x.GroupChunks, x.Version)
	}
	return errors.Join(errs...)
}

func sha256Digest(d digest.Digest) bool {
	return d.Validate() == nil && d.Algorithm() == digest.SHA256
}

// Marshal encodes the index as it is stored: compact JSON with a trailing newline, one
// chunk per line so that two indexes diff line by line.
func (x *Index) Marshal() ([]byte, error) {
	head := *x
	head.Chunks = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return nil, fmt.Errorf("encoding the disk index: %w", err)
	}
	var buf bytes.Buffer
	buf.Write(b[:len(b)-len(`"chunks":null}`)])
	buf.WriteString("\"chunks\":[")
	for i, c := range x.Chunks {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
		cb, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encoding the disk index: %w", err)
		}
		buf.Write(cb)
	}
	buf.WriteString("\n]}\n")
	return buf.Bytes(), nil
}

// ParseIndex decodes and validates an index; unknown fields, duplicate keys and anything
// after the index are refused.
func ParseIndex(b []byte) (*Index, error) {
	if len(b) > MaxIndexSize {
		return nil, fmt.Errorf("the disk index is %d bytes, more than the %d allowed", len(b), MaxIndexSize)
	}
	var x Index
	if err := strictjson.Decode(b, &x); err != nil {
		return nil, fmt.Errorf("decoding the disk index: %w", err)
	}
	if err := x.Validate(); err != nil {
		return nil, fmt.Errorf("invalid disk index:\n%w", err)
	}
	return &x, nil
}

// Gaps returns the ranges of the disk that no chunk covers (zeros), in order, as
// [offset, end) pairs.
func (x *Index) Gaps() [][2]int64 {
	var gaps [][2]int64
	var at int64
	for _, c := range x.Chunks {
		if c.Offset > at {
			gaps = append(gaps, [2]int64{at, c.Offset})
		}
		at = c.Offset + c.Size
	}
	if at < x.Size {
		gaps = append(gaps, [2]int64{at, x.Size})
	}
	return gaps
}
