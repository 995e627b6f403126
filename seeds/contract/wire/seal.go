package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/snofactory/snofactory/pipeline/strictjson"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
)

// SealDiskSerial is the serial of the small disk the seal stage attaches to ask a booted
// node to seal itself: its first bytes are a SealRequest (JSON, NUL-padded). A disk, like
// the precache data disk, because the agent channel only goes from guest to host.
const SealDiskSerial = "snofactory-seal"

// PhaseSealed ends a seal boot: the node prepared itself for relocation (its details name
// each step) and powers off next. Status failed carries the error.
const PhaseSealed = "sealed"

// SealedFile, under the node's root, marks a sealed seed: its reconfiguration hook runs on
// the next boot. It holds the SealRequest.
const SealedFile = "/etc/snofactory/sealed.json"

// SealRequestVersion is the SealRequest format.
const SealRequestVersion = 1

// SealRequest is what the seal stage asks of the node.
type SealRequest struct {
	Version int `json:"version"`
	// Target is coreos (the conformance OS) or openshift: it picks the steps.
	Target oskind.Kind `json:"target"`
	// KeepPullSecret keeps the build-time pull secret on the node (the blueprint asked).
	KeepPullSecret bool `json:"keepPullSecret,omitempty"`
	// SiteConfigTimeout is how long the seed waits at the site for its site-config medium
	// (a Go duration; "" for the hook's default). SealedFile keeps it for the hook.
	SiteConfigTimeout string `json:"siteConfigTimeout,omitempty"`
	// RequiredFiles must exist under the root before anything is sealed: the relocation
	// configuration (render's MachineConfigs) in place.
	RequiredFiles []string `json:"requiredFiles,omitempty"`
	// RecertImage and EtcdImage are the pinned images an OpenShift seed's reconfiguration
	// runs; Seal writes them to ReconfigureImagesFile for the hook.
	RecertImage string `json:"recertImage,omitempty"`
	EtcdImage   string `json:"etcdImage,omitempty"`
	// SourceDateEpoch is the build's SOURCE_DATE_EPOCH in Unix seconds (0: none). A coreos
	// seal clamps the file times of the root to it, so rebuilds of one lock match.
	SourceDateEpoch int64 `json:"sourceDateEpoch,omitempty"`
	// Seed is the seed's name (its blueprint's metadata.name). SealedFile keeps it, so the
	// hook refuses a site-config medium bound to another seed.
	Seed string `json:"seed,omitempty"`
	// SiteIdentity is the age identity (a secret) that opens the sealed secrets of the
	// seed's site media: Seal places it 0600 at the siteconfig package's NodeIdentityFile
	// and never keeps it in SealedFile. It travels in the request, not in the node's
	// install config, so that no install cache entry or OpenShift manifest carries it.
	SiteIdentity string `json:"siteIdentity,omitempty"`
	// Fit is what a site must match (the seed manifest's siteFit): SealedFile keeps it,
	// so the hook refuses a site the seed cannot serve before it changes anything.
	Fit *seedfit.Record `json:"fit,omitempty"`
}

// Public is the request without its secrets: what SealedFile keeps and a log may show.
func (r SealRequest) Public() SealRequest {
	r.SiteIdentity = ""
	return r
}

// ReconfigureImagesFile, under the node's root, names the pinned recert and etcd images
// (JSON: recertImage, etcdImage) for the reconfiguration hook (seeds/node/reconfigure reads it).
const ReconfigureImagesFile = "/etc/snofactory/reconfigure-images.json"

// maxSealRequest bounds what ReadSealRequest reads off the disk.
const maxSealRequest = 64 << 10

// EncodeSealRequest is the seal disk's content: the request, NUL-padded to a MiB.
func EncodeSealRequest(req SealRequest) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(b) >= maxSealRequest {
		return nil, fmt.Errorf("seal request is %d bytes, more than %d", len(b), maxSealRequest)
	}
	return append(b, make([]byte, 1<<20-len(b))...), nil
}

// ReadSealRequest reads the request off the seal disk at path, refusing what
// EncodeSealRequest does not write.
func ReadSealRequest(path string) (SealRequest, error) {
	var req SealRequest
	f, err := os.Open(path)
	if err != nil {
		return req, fmt.Errorf("reading the seal request: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSealRequest))
	if err != nil {
		return req, fmt.Errorf("reading the seal request from %s: %w", path, err)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if err := strictjson.Decode(b, &req); err != nil {
		return req, fmt.Errorf("seal request on %s: %w", path, err)
	}
	switch {
	case req.Version != SealRequestVersion:
		return req, fmt.Errorf("seal request version %d, this agent reads %d", req.Version, SealRequestVersion)
	case !slices.Contains(oskind.All(), req.Target):
		return req, fmt.Errorf("seal request target %q, want %s", req.Target, oskind.Names())
	case req.Fit != nil:
		if err := req.Fit.Validate(); err != nil {
			return req, fmt.Errorf("seal request fit: %w", err)
		}
	}
	return req, nil
}
