package precachedisk

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/pipeline/strictjson"
)

// Image is one named image of a disk: an entry of the layout's index.json.
type Image struct {
	// Ref is the pinned reference the node stores the image under (repo@sha256:...); "" for
	// an entry without a name.
	Ref string `json:"ref"`
	// MediaType, Digest and Size describe the image's top manifest or manifest list.
	MediaType string        `json:"mediaType"`
	Digest    digest.Digest `json:"digest"`
	Size      int64         `json:"size"`
}

// maxIndex bounds index.json as the reader loads it into memory: a payload of thousands of
// images has an index of a few MiB at most.
const maxIndex = 64 << 20

// entryName matches every file a disk may hold, and nothing else: the writer refuses to pack
// and the reader refuses to unpack any other name (so no entry can escape the directory).
var entryName = regexp.MustCompile(`^(oci-layout|index\.json|agent/snofactory|blobs/sha256/[0-9a-f]{64})$`)

// AgentEntry is the node agent's entry. It comes right after oci-layout, so a node that
// only needs the agent (an OpenShift node's phase reporting) stops reading the disk there.
// The agent travels on the data disk rather than in Ignition because it is tens of MiB and
// an Ignition config is held in memory and embedded in the ISO's initrd area.
const AgentEntry = "agent/snofactory"

// AnnotationAgentDigest, on index.json, is the sha256 of AgentEntry: the reader checks the
// agent against it, as it checks every blob against its name.
const AnnotationAgentDigest = "io.snofactory.precache.agent.digest"

// CreateLayout makes dir an empty layout: its oci-layout file and blob directory.
func CreateLayout(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, ocispec.ImageBlobsDir, digest.SHA256.String()), 0o755); err != nil {
		return fmt.Errorf("creating OCI layout %s: %w", dir, err)
	}
	b, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageLayoutFile), b, 0o644); err != nil {
		return fmt.Errorf("creating OCI layout %s: %w", dir, err)
	}
	return nil
}

// BlobPath is where the blob with digest d goes in the layout dir.
func BlobPath(dir string, d digest.Digest) string {
	return filepath.Join(dir, ocispec.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}

// WriteIndex writes the layout's index.json: one entry per image, in order, named by its Ref.
func WriteIndex(dir string, images []Image) error {
	idx := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{},
	}
	for _, im := range images {
		d := ocispec.Descriptor{MediaType: im.MediaType, Digest: im.Digest, Size: im.Size}
		if im.Ref != "" {
			d.Annotations = map[string]string{ocispec.AnnotationRefName: im.Ref}
		}
		idx.Manifests = append(idx.Manifests, d)
	}
	return writeIndexFile(dir, idx)
}

func writeIndexFile(dir string, idx ocispec.Index) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageIndexFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing OCI layout index: %w", err)
	}
	return nil
}

// AddAgent copies the agent binary at src into the layout in dir (after WriteIndex) and
// records its digest in the index.
func AddAgent(dir, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("adding the agent to the precache layout: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.FromSlash(AgentEntry))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("adding the agent to the precache layout: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("adding the agent to the precache layout: %w", err)
	}
	dg := digest.SHA256.Digester()
	_, err = io.Copy(io.MultiWriter(out, dg.Hash()), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying the agent %s into the precache layout: %w", src, err)
	}
	return annotateIndex(dir, AnnotationAgentDigest, dg.Digest().String())
}

// annotateIndex sets one annotation of the layout's index.json.
func annotateIndex(dir, key, value string) error {
	p := filepath.Join(dir, ocispec.ImageIndexFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading the precache layout index: %w", err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("precache layout %s: %w", ocispec.ImageIndexFile, err)
	}
	if idx.Annotations == nil {
		idx.Annotations = map[string]string{}
	}
	idx.Annotations[key] = value
	return writeIndexFile(dir, idx)
}

// ReadIndex reads the images of the unpacked layout in dir, after checking its version.
func ReadIndex(dir string) ([]Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, ocispec.ImageLayoutFile))
	if err != nil {
		return nil, fmt.Errorf("reading precache layout: %w", err)
	}
	if err := checkLayoutFile(b); err != nil {
		return nil, err
	}
	b, err = os.ReadFile(filepath.Join(dir, ocispec.ImageIndexFile))
	if err != nil {
		return nil, fmt.Errorf("reading precache layout: %w", err)
	}
	return parseIndex(b)
}

// checkLayoutFile accepts the oci-layout file of the one layout version we write.
func checkLayoutFile(b []byte) error {
	var l ocispec.ImageLayout
	if err := strictjson.DecodeOpen(b, &l); err != nil {
		return fmt.Errorf("precache layout %s: %w", ocispec.ImageLayoutFile, err)
	}
	if l.Version != ocispec.ImageLayoutVersion {
		return fmt.Errorf("precache layout version %q is not supported (want %s)", l.Version, ocispec.ImageLayoutVersion)
	}
	return nil
}

func parseIndex(b []byte) ([]Image, error) {
	_, images, err := parseIndexAgent(b)
	return images, err
}

// parseIndexAgent also returns the agent digest the index records ("" for none).
func parseIndexAgent(b []byte) (digest.Digest, []Image, error) {
	var idx ocispec.Index
	if err := strictjson.DecodeOpen(b, &idx); err != nil {
		return "", nil, fmt.Errorf("precache layout %s: %w", ocispec.ImageIndexFile, err)
	}
	if idx.SchemaVersion != 2 {
		return "", nil, fmt.Errorf("precache layout %s: schema version %d is not supported", ocispec.ImageIndexFile, idx.SchemaVersion)
	}
	out := make([]Image, 0, len(idx.Manifests))
	for i, m := range idx.Manifests {
		if err := m.Digest.Validate(); err != nil {
			return "", nil, fmt.Errorf("precache layout %s entry %d: %w", ocispec.ImageIndexFile, i, err)
		}
		out = append(out, Image{Ref: m.Annotations[ocispec.AnnotationRefName], MediaType: m.MediaType, Digest: m.Digest, Size: m.Size})
	}
	agent := digest.Digest(idx.Annotations[AnnotationAgentDigest])
	if agent != "" {
		if err := agent.Validate(); err != nil {
			return "", nil, fmt.Errorf("precache layout %s: agent digest: %w", ocispec.ImageIndexFile, err)
		}
	}
	return agent, out, nil
}
