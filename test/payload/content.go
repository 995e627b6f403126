package payload

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is the timestamp of every file and image, so content is
// reproducible.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// file is one entry of a layer.
type file struct {
	Name string // relative, no leading slash
	Mode int64
	Data []byte
}

// blob is a compressed layer (or a config) with its digests. It implements
// v1.Layer so go-containerregistry can upload it as is.
type blob struct {
	data      []byte // as pushed (gzip for layers)
	digest    v1.Hash
	diffID    v1.Hash // sha256 of the uncompressed tar
	mediaType types.MediaType
	rawSize   int64 // uncompressed size
}

func (b *blob) Digest() (v1.Hash, error)             { return b.digest, nil }
func (b *blob) DiffID() (v1.Hash, error)             { return b.diffID, nil }
func (b *blob) Size() (int64, error)                 { return int64(len(b.data)), nil }
func (b *blob) MediaType() (types.MediaType, error)  { return b.mediaType, nil }
func (b *blob) Compressed() (io.ReadCloser, error)   { return io.NopCloser(bytes.NewReader(b.data)), nil }
func (b *blob) Uncompressed() (io.ReadCloser, error) { return gzip.NewReader(bytes.NewReader(b.data)) }
func (b *blob) descriptor(mt types.MediaType) v1.Descriptor {
	return v1.Descriptor{MediaType: mt, Size: int64(len(b.data)), Digest: b.digest}
}

func sha(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", s[:])}
}

// buildLayer writes files into a deterministic tar (sorted, parent
// directories first, fixed owner and times) and gzips it.
func buildLayer(files []file) (*blob, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	// The tar streams into gzip and the diffID hash at once, so the
	// uncompressed layer is never held in memory.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	diff := sha256.New()
	raw := &countWriter{}
	tw := tar.NewWriter(io.MultiWriter(zw, diff, raw))
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.Name); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o755, ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}); err != nil {
				return nil, fmt.Errorf("payload: tar %s: %w", parents[i], err)
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("payload: tar %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("payload: tar %s: %w", f.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("payload: tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("payload: gzip: %w", err)
	}
	diffID := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diff.Sum(nil))}
	return &blob{data: gz.Bytes(), digest: sha(gz.Bytes()), diffID: diffID, mediaType: types.DockerLayer, rawSize: raw.n}, nil
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// rngFor derives an independent generator for one named piece of content,
// so adding a component does not change the bytes of the others.
func rngFor(seed int64, name string) *rand.Rand {
	h := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", seed, name)))
	return rand.New(rand.NewPCG(binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:16])))
}

var words = strings.Fields(`the node cluster operator release image layer config manifest registry
kube api server etcd network route ingress monitor metric alert storage volume claim secret token
certificate signer controller daemon deployment replica pod container runtime crio kubelet systemd
journal log error warning info debug version build commit source location vendor license`)

// fill makes n bytes that look like a mix of binaries and text: 4 KiB
// blocks, about half random (incompressible) and half words.
func fill(r *rand.Rand, n int64) []byte {
	out := make([]byte, 0, n)
	block := make([]byte, 4096)
	for int64(len(out)) < n {
		want := min(int64(len(block)), n-int64(len(out)))
		b := block[:want]
		if r.IntN(2) == 0 {
			for i := 0; i < len(b); i += 8 {
				var w [8]byte
				binary.LittleEndian.PutUint64(w[:], r.Uint64())
				copy(b[i:], w[:])
			}
		} else {
			i := 0
			for i < len(b) {
				w := words[r.IntN(len(words))]
				i += copy(b[i:], w)
				if i < len(b) {
					if r.IntN(12) == 0 {
						b[i] = '\n'
					} else {
						b[i] = ' '
					}
					i++
				}
			}
		}
		out = append(out, b...)
	}
	return out
}

// filler splits size bytes of content into files under dir, none larger
// than maxFile.
func filler(r *rand.Rand, dir, stem string, size, maxFile int64) []file {
	var files []file
	for i := 0; size > 0; i++ {
		n := min(size, maxFile)
		size -= n
		files = append(files, file{Name: fmt.Sprintf("%s/%s-%d.so.%d", dir, stem, i, 1+r.IntN(9)), Mode: 0o755, Data: fill(r, n)})
	}
	return files
}
