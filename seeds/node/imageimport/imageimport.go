package imageimport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

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
	// Root is the node's root directory ("/" on a node). Its /etc/containers/storage.conf
	// says where and how the store is, as CRI-O reads it (driver, roots, driver options such
	// as mountopt and additionalimagestores), each path taken below Root; its /etc/selinux
	// says whether the import relabels what it wrote. "" reads nothing of a node: GraphRoot
	// and RunRoot then say everything.
	Root string
	// GraphRoot and RunRoot, as this process sees them, and Driver override storage.conf's.
	GraphRoot string
	RunRoot   string
	Driver    string
	// ScratchDir holds what containers/image stages while it writes one image (at most that
	// image's layers); default /var/tmp, best on the storage's filesystem.
	ScratchDir string
	// Arch picks the instance of a manifest list (OCI naming, default amd64).
	Arch string
	Log  *slog.Logger

	// scratchProbe (tests) is called, with the name of the image being copied, whenever
	// the scratch space may be at its fullest.
	scratchProbe func(ref string)
	// selinuxFS (tests) replaces /sys/fs/selinux.
	selinuxFS string
}

// Imported is one image now in containers-storage.
type Imported struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	ID     string `json:"id"`
}

// Report is what an import did: the agent prints it as JSON.
type Report struct {
	Images  []Imported    `json:"images"`
	Storage StorageReport `json:"storage"`
	SELinux SELinuxReport `json:"selinux"`
}

// scratchName is the import's directory below Options.ScratchDir. A fixed name, so an import
// killed half-way (the node rebooted under it) leaves nothing the next one does not remove.
const scratchName = "snofactory-import"

// ImportDisk copies the images of the precache disk at device into containers-storage one at
// a time, straight off the device (each blob checked against its digest), then relabels the
// store for SELinux where the node has it. Images already in the store (or in one of its
// additional image stores) are kept, so an import that was interrupted is finished by running
// it again.
func ImportDisk(ctx context.Context, device string, opts Options) (Report, error) {
	f, err := os.Open(device)
	if err != nil {
		return Report{}, fmt.Errorf("opening precache disk: %w", err)
	}
	defer f.Close()
	disk, err := precachedisk.Open(ctx, f)
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", device, err)
	}
	return run(ctx, disk.Images(), opts, func(im precachedisk.Image, probe func(string)) (types.ImageReference, error) {
		return diskRef{disk: disk, image: im, onBlobDone: probe}, nil
	})
}

// ImportLayout copies every named image of the unpacked precache layout in dir into
// containers-storage.
func ImportLayout(ctx context.Context, dir string, opts Options) (Report, error) {
	index, err := precachedisk.ReadIndex(dir)
	if err != nil {
		return Report{}, err
	}
	return run(ctx, index, opts, func(im precachedisk.Image, _ func(string)) (types.ImageReference, error) {
		return layout.NewReference(dir, im.Ref)
	})
}

// sourceFunc is where image im is copied from.
type sourceFunc func(im precachedisk.Image, probe func(string)) (types.ImageReference, error)

func run(ctx context.Context, index []precachedisk.Image, opts Options, source sourceFunc) (Report, error) {
	im, err := openImporter(opts)
	if err != nil {
		return Report{}, err
	}
	defer im.close()
	rep := Report{Storage: im.storage, Images: []Imported{}}
	for i, m := range index {
		if m.Ref == "" {
			im.log.Warn("precache layout entry has no name; skipped", "index", i, "digest", m.Digest)
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		src, err := source(m, opts.scratchProbe)
		if err != nil {
			return rep, fmt.Errorf("precache image %s: %w", m.Ref, err)
		}
		id, err := im.image(ctx, src, m.Ref)
		if err != nil {
			return rep, err
		}
		rep.Images = append(rep.Images, Imported{Ref: m.Ref, Digest: m.Digest.String(), ID: id})
	}
	// Every image is in; a relabel is idempotent, so a resumed import relabels them all.
	rep.SELinux, err = relabel(ctx, im.opts, im.storage.GraphRoot)
	return rep, err
}

// importer copies images into one containers-storage.
type importer struct {
	opts    Options
	store   storage.Store
	storage StorageReport
	scratch string
	pc      *signature.PolicyContext
	sys     *types.SystemContext
	log     *slog.Logger
}

func openImporter(opts Options) (*importer, error) {
	if opts.Arch == "" {
		opts.Arch = "amd64"
	}
	if opts.ScratchDir == "" {
		opts.ScratchDir = "/var/tmp"
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	so, rep, err := storeOptions(opts)
	if err != nil {
		return nil, err
	}
	im := &importer{opts: opts, storage: rep, log: opts.Log, scratch: filepath.Join(opts.ScratchDir, scratchName)}
	if err := im.resetScratch(); err != nil {
		return nil, err
	}
	im.sys = &types.SystemContext{ArchitectureChoice: opts.Arch, OSChoice: "linux", BigFilesTemporaryDir: im.scratch}
	store, err := storage.GetStore(so)
	if err != nil {
		return nil, fmt.Errorf("opening containers-storage at %s (%s): %w", so.GraphRoot, describeConf(rep), err)
	}
	// The disk was verified blob by blob when it was made and is again as it is read; it is
	// our own content, so no signature policy applies on the node.
	pc, err := signature.NewPolicyContext(&signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		store.Shutdown(false)
		return nil, fmt.Errorf("import signature policy: %w", err)
	}
	im.store, im.pc = store, pc
	return im, nil
}

func describeConf(rep StorageReport) string {
	if rep.Config == "" {
		return "no storage.conf"
	}
	return "configured by " + rep.Config
}

// resetScratch empties the import's scratch directory: what a killed import staged there is
// of no use to this one.
func (im *importer) resetScratch() error {
	if err := os.RemoveAll(im.scratch); err != nil {
		return fmt.Errorf("clearing the import's scratch directory: %w", err)
	}
	if err := os.MkdirAll(im.scratch, 0o700); err != nil {
		return fmt.Errorf("creating the import's scratch directory: %w", err)
	}
	return nil
}

func (im *importer) close() {
	im.pc.Destroy()
	im.store.Shutdown(false)
	os.RemoveAll(im.scratch)
}

// image copies src into the storage under the name ref and returns its storage ID.
func (im *importer) image(ctx context.Context, src types.ImageReference, ref string) (string, error) {
	dst, err := storagetransport.Transport.ParseStoreReference(im.store, ref)
	if err != nil {
		return "", fmt.Errorf("precache image %s: %w", ref, err)
	}
	// An import restarted after an interruption finds the images it already imported.
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
