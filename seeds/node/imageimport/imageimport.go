package imageimport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/oci/layout"
	"github.com/containers/image/v5/signature"
	storagetransport "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/seeds/contract/precachedisk"
)

// Options says where the images go.
type Options struct {
	// GraphRoot and RunRoot of the containers-storage (on a node: /var/lib/containers/storage
	// and /run/containers/storage).
	GraphRoot string
	RunRoot   string
	// Driver is the storage driver: "overlay" on a node, "vfs" where overlay cannot mount
	// (tests, rootless). Default overlay.
	Driver string
	// Arch picks the instance of a manifest list (OCI naming, default amd64).
	Arch string
	Log  *slog.Logger
}

// Imported is one image now in containers-storage.
type Imported struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	ID     string `json:"id"`
}

// ImportDisk unpacks the precache disk at device into a scratch directory below scratchDir
// (best on the same filesystem as the storage), imports its images and removes the scratch
// copy.
func ImportDisk(ctx context.Context, device, scratchDir string, opts Options) ([]Imported, error) {
	f, err := os.Open(device)
	if err != nil {
		return nil, fmt.Errorf("opening precache disk: %w", err)
	}
	defer f.Close()
	dir, err := os.MkdirTemp(scratchDir, "precache-")
	if err != nil {
		return nil, fmt.Errorf("creating scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if _, err := precachedisk.Extract(ctx, f, dir); err != nil {
		return nil, fmt.Errorf("%s: %w", device, err)
	}
	return ImportLayout(ctx, dir, opts)
}

// ImportLayout copies every named image of the unpacked precache layout in dir into
// containers-storage.
func ImportLayout(ctx context.Context, dir string, opts Options) ([]Imported, error) {
	index, err := precachedisk.ReadIndex(dir)
	if err != nil {
		return nil, err
	}
	im, err := openImporter(dir, opts)
	if err != nil {
		return nil, err
	}
	defer im.close()
	var out []Imported
	for i, m := range index {
		if m.Ref == "" {
			im.log.Warn("precache layout entry has no name; skipped", "index", i, "digest", m.Digest)
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		id, err := im.image(ctx, m.Ref)
		if err != nil {
			return out, err
		}
		out = append(out, Imported{Ref: m.Ref, Digest: m.Digest.String(), ID: id})
	}
	return out, nil
}

// importer copies images from one layout into one containers-storage.
type importer struct {
	dir   string
	store storage.Store
	pc    *signature.PolicyContext
	sys   *types.SystemContext
	log   *slog.Logger
}

func openImporter(dir string, opts Options) (*importer, error) {
	if opts.Driver == "" {
		opts.Driver = "overlay"
	}
	if opts.Arch == "" {
		opts.Arch = "amd64"
	}
	im := &importer{dir: dir, log: opts.Log, sys: &types.SystemContext{ArchitectureChoice: opts.Arch, OSChoice: "linux"}}
	if im.log == nil {
		im.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	store, err := storage.GetStore(storage.StoreOptions{RunRoot: opts.RunRoot, GraphRoot: opts.GraphRoot, GraphDriverName: opts.Driver})
	if err != nil {
		return nil, fmt.Errorf("opening containers-storage at %s: %w", opts.GraphRoot, err)
	}
	// The layout was verified blob by blob when it was made and when it was unpacked; it is
	// our own content, so no signature policy applies on the node.
	pc, err := signature.NewPolicyContext(&signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		store.Shutdown(false)
		return nil, fmt.Errorf("import signature policy: %w", err)
	}
	im.store, im.pc = store, pc
	return im, nil
}

func (im *importer) close() {
	im.pc.Destroy()
	im.store.Shutdown(false)
}

// image copies the layout's image named ref into the storage under the same name and returns
// its storage ID.
func (im *importer) image(ctx context.Context, ref string) (string, error) {
	src, err := layout.NewReference(im.dir, ref)
	if err != nil {
		return "", fmt.Errorf("precache image %s: %w", ref, err)
	}
	dst, err := storagetransport.Transport.ParseStoreReference(im.store, ref)
	if err != nil {
		return "", fmt.Errorf("precache image %s: %w", ref, err)
	}
	// An agent restarted mid-import finds the images it already imported.
	if img, err := storagetransport.Transport.GetStoreImage(im.store, dst); err == nil {
		im.log.Info("image already in containers-storage", "ref", ref, "id", img.ID)
		return img.ID, nil
	}
	manifest, err := copy.Image(ctx, im.pc, dst, src, &copy.Options{SourceCtx: im.sys, DestinationCtx: im.sys})
	if err != nil {
		return "", fmt.Errorf("importing %s into containers-storage: %w", ref, err)
	}
	img, err := storagetransport.Transport.GetStoreImage(im.store, dst)
	if err != nil {
		return "", fmt.Errorf("importing %s: %w", ref, err)
	}
	im.log.Info("imported image", "ref", ref, "id", img.ID, "manifest", digest.FromBytes(manifest))
	return img.ID, nil
}
