package ociseed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// Media types of the layers.
const (
	MediaTypeDiskChunk   = "application/vnd.snofactory.seed.disk.chunk.v1"
	MediaTypeCredentials = "application/vnd.snofactory.seed.credentials.v1"
	// MediaTypeSBOM is SPDX JSON's: the seed's SBOM file, chunked like the others.
	MediaTypeSBOM = "application/spdx+json"
)

// Annotations on the layers (each a chunk of a file) and on the artifact manifest.
const (
	AnnotationChunkIndex  = "io.snofactory.seed.chunk.index"  // 0-based, decimal
	AnnotationChunkOffset = "io.snofactory.seed.chunk.offset" // in the file, bytes, decimal
	AnnotationChunkCount  = "io.snofactory.seed.chunk.count"  // chunks of the file
	AnnotationFileSize    = "io.snofactory.seed.file.size"
	AnnotationFileDigest  = "io.snofactory.seed.file.digest"

	AnnotationTarget          = "io.snofactory.seed.target"
	AnnotationFirmware        = "io.snofactory.seed.firmware"
	AnnotationBlueprintDigest = "io.snofactory.seed.blueprint.digest"
	AnnotationLockDigest      = "io.snofactory.seed.lock.digest"
	AnnotationReconfiguration = "io.snofactory.seed.reconfiguration.apiversion"
	AnnotationChunkSize       = "io.snofactory.seed.chunk.size"
)

// blob is one blob to store: its descriptor and how to read its bytes.
type blob struct {
	desc ocispec.Descriptor
	open func() (io.ReadCloser, error)
	what string // for errors and logs: "disk.qcow2 chunk 3"
	// own is the bytes of this seed the blob holds where that is less than its size:
	// another seed's pack, of which this seed uses some groups. 0: all of it.
	own int64
}

func bytesBlob(mediaType string, b []byte, what string) blob {
	return blob{
		desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))},
		open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		what: what,
	}
}

// chunk is a piece of a seed file, not yet hashed.
type chunk struct {
	file, path          string
	mediaType           string
	index, count        int
	offset, size, total int64
	fileDigest          digest.Digest
}

func (c chunk) String() string { return fmt.Sprintf("%s chunk %d", c.file, c.index) }

// chunks cuts every file of the seed into pieces of chunkSize.
func chunks(dir string, m *seed.Manifest, chunkSize int64) []chunk {
	type file struct {
		name, mediaType string
		size            int64
		digest          digest.Digest
	}
	var files []file
	for _, d := range m.Disks {
		files = append(files, file{d.File, MediaTypeDiskChunk, d.Size, d.Digest})
	}
	if c := m.Credentials; c != nil {
		files = append(files, file{c.File, MediaTypeCredentials, c.Size, c.Digest})
	}
	if x := m.SBOM; x != nil {
		files = append(files, file{x.File, MediaTypeSBOM, x.Size, x.Digest})
	}
	var out []chunk
	for _, f := range files {
		n := int((f.size + chunkSize - 1) / chunkSize)
		for i := range n {
			off := int64(i) * chunkSize
			out = append(out, chunk{file: f.name, path: filepath.Join(dir, f.name), mediaType: f.mediaType,
				index: i, count: n, offset: off, size: min(chunkSize, f.size-off), total: f.size, fileDigest: f.digest})
		}
	}
	return out
}

// open reads the chunk's bytes from its file.
func (c chunk) open() (io.ReadCloser, error) {
	f, err := os.Open(c.path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, c.offset, c.size), f}, nil
}

// blob is the chunk as a layer, once its digest is known.
func (c chunk) blob(d digest.Digest) blob {
	return blob{
		desc: ocispec.Descriptor{MediaType: c.mediaType, Digest: d, Size: c.size, Annotations: map[string]string{
			ocispec.AnnotationTitle: c.file,
			AnnotationChunkIndex:    strconv.Itoa(c.index),
			AnnotationChunkOffset:   strconv.FormatInt(c.offset, 10),
			AnnotationChunkCount:    strconv.Itoa(c.count),
			AnnotationFileSize:      strconv.FormatInt(c.total, 10),
			AnnotationFileDigest:    c.fileDigest.String(),
		}},
		open: c.open,
		what: c.String(),
	}
}

// seedManifest builds the artifact manifest. Nothing in it depends on when or where it is
// pushed, so an unchanged seed gives the same digest.
func seedManifest(m *seed.Manifest, config blob, layers []blob, o options) ([]byte, error) {
	ann := seedAnnotations(m, o)
	ann[AnnotationChunkSize] = strconv.FormatInt(o.chunkSize, 10)
	man := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: seed.ArtifactType,
		Config:       config.desc,
		Annotations:  ann,
	}
	for _, l := range layers {
		man.Layers = append(man.Layers, l.desc)
	}
	b, err := json.Marshal(man)
	if err != nil {
		return nil, fmt.Errorf("encoding the seed's OCI manifest: %w", err)
	}
	return b, nil
}

// seedAnnotations say what the seed is on its top manifest or index.
func seedAnnotations(m *seed.Manifest, o options) map[string]string {
	ann := map[string]string{
		ocispec.AnnotationCreated: m.Created.UTC().Format(time.RFC3339),
		ocispec.AnnotationTitle:   m.Name,
		AnnotationTarget:          string(m.Target),
		AnnotationFirmware:        m.Firmware,
		AnnotationBlueprintDigest: m.BlueprintDigest.String(),
		AnnotationLockDigest:      m.LockDigest.String(),
		AnnotationReconfiguration: m.ReconfigurationAPIVersion,
	}
	if m.ReleaseVersion != "" {
		ann[ocispec.AnnotationVersion] = m.ReleaseVersion
	}
	if o.source != "" {
		ann[ocispec.AnnotationSource] = o.source
	}
	return ann
}

// fileChunks is what a pull reassembles: each file's chunks in order.
type fileChunks struct {
	name   string
	size   int64
	chunks []ocispec.Descriptor
}

// parseSeedManifest checks that raw is a seed artifact and returns it.
func parseSeedManifest(raw []byte) (*ocispec.Manifest, error) {
	var man ocispec.Manifest
	if err := strictjson.DecodeOpen(raw, &man); err != nil {
		return nil, fmt.Errorf("decoding the OCI manifest: %w", err)
	}
	if man.ArtifactType != seed.ArtifactType || man.Config.MediaType != seed.MediaTypeManifest {
		return nil, fmt.Errorf("not a seed: artifactType %q, config %q (want %q, %q)",
			man.ArtifactType, man.Config.MediaType, seed.ArtifactType, seed.MediaTypeManifest)
	}
	return &man, nil
}

// layout groups the layers by file and checks that they tile each file of the seed
// manifest exactly: indices 0..n-1, contiguous offsets, sizes adding up.
func layoutFiles(man *ocispec.Manifest, m *seed.Manifest) ([]fileChunks, error) {
	want := map[string]int64{}
	for _, d := range m.Disks {
		if d.Format != seed.FormatChunked { // its chunks are in the disk index
			want[d.File] = d.Size
		}
	}
	if c := m.Credentials; c != nil {
		want[c.File] = c.Size
	}
	if x := m.SBOM; x != nil {
		want[x.File] = x.Size
	}
	byFile := map[string][]ocispec.Descriptor{}
	for _, l := range man.Layers {
		switch l.MediaType {
		case MediaTypeDiskIndex, MediaTypeDiskChunk2, MediaTypeDiskGroup, MediaTypeDiskPack:
			continue
		}
		f := l.Annotations[ocispec.AnnotationTitle]
		if _, ok := want[f]; !ok {
			return nil, fmt.Errorf("layer %s names %q, which is not a file of the seed", l.Digest, f)
		}
		byFile[f] = append(byFile[f], l)
	}
	var out []fileChunks
	for name, size := range want {
		ls := byFile[name]
		sort.SliceStable(ls, func(i, j int) bool { return chunkIndex(ls[i]) < chunkIndex(ls[j]) })
		var off int64
		for i, l := range ls {
			if chunkIndex(l) != i || l.Annotations[AnnotationChunkOffset] != strconv.FormatInt(off, 10) {
				return nil, fmt.Errorf("%s: chunk %d (%s) is not at index %d, offset %d", name, chunkIndex(l), l.Digest, i, off)
			}
			off += l.Size
		}
		if off != size {
			return nil, fmt.Errorf("%s: the chunks hold %d bytes, the seed manifest says %d", name, off, size)
		}
		out = append(out, fileChunks{name: name, size: size, chunks: ls})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func chunkIndex(l ocispec.Descriptor) int {
	i, err := strconv.Atoi(l.Annotations[AnnotationChunkIndex])
	if err != nil {
		return -1
	}
	return i
}
