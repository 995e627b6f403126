package imports

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/oci/layout"
	"github.com/containers/image/v5/signature"
	storagetransport "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"
)

// refNameAnnotation names an image in an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

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

type index struct {
	Manifests []struct {
		MediaType   string            `json:"mediaType"`
		Digest      digest.Digest     `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	} `json:"manifests"`
}

// ImportLayout copies every named image of the OCI layout in dir into containers-storage.
func ImportLayout(ctx context.Context, dir string, opts Options) ([]Imported, error) {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, fmt.Errorf("reading precache layout: %w", err)
	}
	var idx index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("precache layout index.json: %w", err)
	}
	if opts.Driver == "" {
		opts.Driver = "overlay"
	}
	if opts.Arch == "" {
		opts.Arch = "amd64"
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	store, err := storage.GetStore(storage.StoreOptions{RunRoot: opts.RunRoot, GraphRoot: opts.GraphRoot, GraphDriverName: opts.Driver})
	if err != nil {
		return nil, fmt.Errorf("opening containers-storage at %s: %w", opts.GraphRoot, err)
	}
	defer store.Shutdown(false)
	// The layout was verified blob by blob when it was made and when it was unpacked; it is
	// our own content, so no signature policy applies on the node.
	pc, err := signature.NewPolicyContext(&signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		return nil, err
	}
	defer pc.Destroy()
	sys := &types.SystemContext{ArchitectureChoice: opts.Arch, OSChoice: "linux"}
	var out []Imported
	for i, m := range idx.Manifests {
		name := m.Annotations[refNameAnnotation]
		if name == "" {
			log.Warn("precache layout entry has no name; skipped", "index", i, "digest", m.Digest)
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		src, err := layout.NewReference(dir, name)
		if err != nil {
			return out, fmt.Errorf("precache image %s: %w", name, err)
		}
		dst, err := storagetransport.Transport.ParseStoreReference(store, name)
		if err != nil {
			return out, fmt.Errorf("precache image %s: %w", name, err)
		}
		// An agent restarted mid-import finds the images it already imported.
		if img, err := storagetransport.Transport.GetStoreImage(store, dst); err == nil {
			log.Info("image already in containers-storage", "ref", name, "id", img.ID)
			out = append(out, Imported{Ref: name, Digest: m.Digest.String(), ID: img.ID})
			continue
		}
		manifest, err := copy.Image(ctx, pc, dst, src, &copy.Options{SourceCtx: sys, DestinationCtx: sys})
		if err != nil {
			return out, fmt.Errorf("importing %s into containers-storage: %w", name, err)
		}
		img, err := storagetransport.Transport.GetStoreImage(store, dst)
		if err != nil {
			return out, fmt.Errorf("importing %s: %w", name, err)
		}
		log.Info("imported image", "ref", name, "id", img.ID, "manifest", digest.FromBytes(manifest))
		out = append(out, Imported{Ref: name, Digest: m.Digest.String(), ID: img.ID})
	}
	return out, nil
}

// layoutName matches the files a precache disk may hold.
var layoutName = regexp.MustCompile(`^(oci-layout|index\.json|blobs/sha256/[0-9a-f]{64})$`)

// ExtractDisk unpacks a precache data disk (a raw tar of an OCI layout) read from r into dir,
// checking every blob against its digest. Padding after the archive is ignored.
func ExtractDisk(ctx context.Context, r io.Reader, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading precache disk: %w", err)
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		if hdr.Typeflag != tar.TypeReg || !layoutName.MatchString(hdr.Name) {
			return fmt.Errorf("precache disk holds unexpected entry %q", hdr.Name)
		}
		if err := extractOne(tr, hdr, dir); err != nil {
			return err
		}
		seen[hdr.Name] = true
	}
	if !seen["index.json"] || !seen["oci-layout"] {
		return fmt.Errorf("precache disk is not an OCI layout (no index.json or oci-layout)")
	}
	return nil
}

func extractOne(r io.Reader, hdr *tar.Header, dir string) error {
	dst := filepath.Join(dir, filepath.FromSlash(hdr.Name))
	f, err := os.CreateTemp(filepath.Dir(dst), ".extract-*")
	if err != nil {
		return fmt.Errorf("extracting %s: %w", hdr.Name, err)
	}
	defer os.Remove(f.Name())
	var v digest.Verifier
	w := io.Writer(f)
	if filepath.Dir(hdr.Name) == "blobs/sha256" {
		v = digest.NewDigestFromEncoded(digest.SHA256, filepath.Base(hdr.Name)).Verifier()
		w = io.MultiWriter(f, v)
	}
	if _, err := io.Copy(w, r); err != nil {
		f.Close()
		return fmt.Errorf("extracting %s: %w", hdr.Name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("extracting %s: %w", hdr.Name, err)
	}
	if v != nil && !v.Verified() {
		return fmt.Errorf("precache disk is corrupt: %s does not match its digest", hdr.Name)
	}
	return os.Rename(f.Name(), dst)
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
	if err := ExtractDisk(ctx, f, dir); err != nil {
		return nil, fmt.Errorf("%s: %w", device, err)
	}
	return ImportLayout(ctx, dir, opts)
}
