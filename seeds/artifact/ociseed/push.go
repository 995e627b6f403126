package ociseed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/snofactory/snofactory/pipeline/ctxio"
	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
)

// Result is what Push did.
type Result struct {
	Location string
	Digest   digest.Digest // of the seed's artifact manifest
	Size     int64         // of that manifest
	Blobs    int           // chunks and config
	Bytes    int64         // their total size
	// Sent is the blob bytes actually sent: 0 when the target had every blob already.
	Sent      int64
	Referrers []digest.Digest
	// Instances are the manifests an image index names (a chunked seed's parts), each of
	// which podman and skopeo expect to be signed too when they copy the whole index.
	Instances []digest.Digest
}

// Push stores the seed directory dir at ref (see ParseLocation). Blobs the target already
// has are not sent again, so an unchanged seed costs no blob bytes and a push that was
// killed resumes: chunks that finished are in the registry (or layout) and are skipped.
// Each file's digest is checked against the seed manifest while it is read; a mismatch
// stops the push before the manifest is written, so no tag points at a broken seed.
func Push(ctx context.Context, dir, ref string, opts ...Option) (*Result, error) {
	o := makeOptions(opts)
	// Nothing a seed file points at is read, let alone sent: only regular files at their
	// declared sizes, and qcow2 disks that name no other file.
	m, err := seed.Check(dir)
	if err != nil {
		return nil, err
	}
	if err := readReferrers(o.referrers); err != nil {
		return nil, err
	}
	cfg, err := os.ReadFile(filepath.Join(dir, seed.ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("reading the seed manifest: %w", err)
	}
	loc, err := ParseLocation(ref, o.insecure)
	if err != nil {
		return nil, err
	}
	inputs := pushInputs(dir, m, o.referrers)
	var res *Result
	switch loc.Transport {
	case TransportOCIArchive:
		// The archive is an output the user names: checked (never the seed's own files, a
		// character device, a read-only file) before any blob is read, and renamed into place
		// only once whole, by the one output rule.
		err = output.Write(loc.Path, 0o644, func(f *os.File) error {
			res, err = pushTo(ctx, newArchiveWriter(f, loc), loc, dir, m, cfg, o)
			return err
		}, inputs...)
	case TransportLayout:
		if err = checkLayoutOutput(dir, loc.Path, inputs); err != nil {
			return nil, err
		}
		fallthrough
	default:
		var t target
		if t, err = openTarget(ctx, loc, o); err == nil {
			res, err = pushTo(ctx, t, loc, dir, m, cfg, o)
		}
	}
	if err != nil {
		return nil, err
	}
	o.logger.InfoContext(ctx, "pushed seed", "to", res.Location, "digest", res.Digest, "blobs", res.Blobs,
		"bytes", res.Bytes, "sent", res.Sent)
	return res, nil
}

// pushInputs are the files a push reads: the seed's declared files and the referrers'.
func pushInputs(dir string, m *seed.Manifest, refs []Referrer) []string {
	inputs := m.Paths(dir)
	for _, r := range refs {
		inputs = append(inputs, r.File)
	}
	return inputs
}

// checkLayoutOutput refuses an oci: layout directory that is, holds or lies inside the seed
// directory (its blobs/ and index.json would land among the seed's files) or that holds
// another input.
func checkLayoutOutput(dir, layout string, inputs []string) error {
	if err := output.CheckDir("the oci: layout", layout, inputs...); err != nil {
		return err
	}
	return output.CheckApart(output.Named{Flag: "the seed directory", Path: dir}, output.Named{Flag: "the oci: layout", Path: layout})
}

// pushTo stores the checked seed in dir (manifest m, seed.json bytes cfg) in t.
func pushTo(ctx context.Context, t target, loc Location, dir string, m *seed.Manifest, cfg []byte, o options) (*Result, error) {
	committed := false
	defer func() {
		if !committed {
			t.abort()
		}
	}()
	p := &progress{f: o.progress}
	res := &Result{Location: loc.String()}
	var raw []byte
	var err error
	if d, ok := chunkedDisk(m); ok {
		raw, err = pushDelta(ctx, t, dir, m, d, cfg, o, p)
	} else {
		raw, err = pushFiles(ctx, t, dir, m, cfg, o, p)
	}
	if err != nil {
		return nil, err
	}
	res.Blobs, res.Bytes = p.done, p.size
	res.Digest, res.Size = digest.FromBytes(raw), int64(len(raw))
	var idx ocispec.Index
	if json.Unmarshal(raw, &idx) == nil && idx.MediaType == ocispec.MediaTypeImageIndex {
		for _, m := range idx.Manifests {
			res.Instances = append(res.Instances, m.Digest)
		}
	}
	subject := manifestDescriptor(raw)
	for _, r := range o.referrers {
		d, err := pushReferrer(ctx, t, subject, r, p)
		if err != nil {
			return nil, err
		}
		res.Referrers = append(res.Referrers, d)
	}
	if err := t.commit(); err != nil {
		return nil, err
	}
	committed = true
	res.Sent = p.moved
	return res, nil
}

// pushFiles stores a seed without a chunked disk: each file cut into fixed-size chunks,
// under one manifest.
func pushFiles(ctx context.Context, t target, dir string, m *seed.Manifest, cfg []byte, o options, p *progress) ([]byte, error) {
	cs := chunks(dir, m, o.chunkSize)
	p.total = len(cs) + 1
	layers, err := pushChunks(ctx, t, cs, o, p)
	if err != nil {
		return nil, err
	}
	config := bytesBlob(seed.MediaTypeManifest, cfg, seed.ManifestFile)
	if err := putBlob(ctx, t, config, p); err != nil {
		return nil, err
	}
	raw, err := seedManifest(m, config, layers, o)
	if err != nil {
		return nil, err
	}
	return raw, t.putManifest(ctx, raw, true)
}

// progress counts finished blobs and reports each, one call at a time.
type progress struct {
	mu    sync.Mutex
	f     func(Progress)
	done  int
	total int
	moved int64
	size  int64 // of every blob finished, sent or not
}

func (p *progress) add(b blob, moved int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.moved += moved
	if b.own > 0 {
		p.size += b.own
	} else {
		p.size += b.desc.Size
	}
	if p.f != nil {
		p.f(Progress{What: b.what, Digest: b.desc.Digest, Size: b.desc.Size, Moved: moved, Done: p.done, Total: p.total})
	}
}

func putBlob(ctx context.Context, t target, b blob, p *progress) error {
	n, err := t.putBlob(ctx, b)
	if err != nil {
		return err
	}
	p.add(b, n)
	return nil
}

// pushChunks reads each file once, in order, hashing every chunk and the whole file, and
// hands each hashed chunk to o.jobs uploaders. A file whose digest is not the manifest's
// fails the push.
func pushChunks(ctx context.Context, t target, cs []chunk, o options, p *progress) ([]blob, error) {
	layers := make([]blob, len(cs))
	work := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	for range o.jobs {
		g.Go(func() error {
			for i := range work {
				if err := putBlob(gctx, t, layers[i], p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(work)
		return hashChunks(gctx, cs, func(i int, b blob) error {
			layers[i] = b
			select {
			case work <- i:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return layers, nil
}

// hashChunks reads the chunks' files sequentially and calls ready with each hashed chunk.
func hashChunks(ctx context.Context, cs []chunk, ready func(int, blob) error) error {
	var f *os.File
	var file digest.Digester
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for i, c := range cs {
		if c.index == 0 {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = os.Open(c.path); err != nil {
				return fmt.Errorf("reading the seed: %w", err)
			}
			if fi, err := f.Stat(); err != nil {
				return fmt.Errorf("reading the seed: %w", err)
			} else if fi.Size() != c.total {
				return &seed.MismatchError{File: c.file, What: "size", Want: c.fileDigest, WantSize: c.total, GotSize: fi.Size()}
			}
			file = digest.SHA256.Digester()
		}
		dg := digest.SHA256.Digester()
		n, err := io.CopyN(io.MultiWriter(dg.Hash(), file.Hash()), ctxio.Reader(ctx, f), c.size)
		if err != nil {
			return fmt.Errorf("hashing %s (%d of %d bytes read): %w", c, n, c.size, err)
		}
		if c.index == c.count-1 && file.Digest() != c.fileDigest {
			return &seed.MismatchError{File: c.file, What: "digest", Want: c.fileDigest, Got: file.Digest(), WantSize: c.total, GotSize: c.total}
		}
		if err := ready(i, c.blob(dg.Digest())); err != nil {
			return err
		}
	}
	return nil
}
