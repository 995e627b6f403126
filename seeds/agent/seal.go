package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/snofactory/snofactory/seeds/target"
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
	Target target.Target `json:"target"`
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
}

// ReconfigureImagesFile, under the node's root, names the pinned recert and etcd images
// (JSON: recertImage, etcdImage) for the reconfiguration hook (seeds/reconfigure reads it).
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
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("seal request on %s: %w", path, err)
	}
	switch {
	case req.Version != SealRequestVersion:
		return req, fmt.Errorf("seal request version %d, this agent reads %d", req.Version, SealRequestVersion)
	case !slices.Contains(target.All(), req.Target):
		return req, fmt.Errorf("seal request target %q, want %s", req.Target, target.Names())
	}
	return req, nil
}

// clearTrees removes what is inside each directory (not the directory: its owner and mode
// are part of the OS) and returns how many entries went.
func clearTrees(root string, dirs []string) (int, error) {
	n := 0
	for _, d := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, d))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("clearing %s: %w", d, err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(root, d, e.Name())); err != nil {
				return n, fmt.Errorf("clearing %s: %w", d, err)
			}
			n++
		}
	}
	return n, nil
}

// writeUnder writes a small file at p under root, creating its directory.
func writeUnder(root, p string, b []byte) error {
	dst := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if err := os.WriteFile(dst, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	return nil
}

func truncateIfExists(p string) error {
	if err := os.Truncate(p, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emptying %s: %w", p, err)
	}
	return nil
}

// shred overwrites a file with zeros in place, syncs it and removes it: removing alone
// leaves the content in the free blocks of the disk, which the seed would then carry.
func shred(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().IsRegular() {
		_, err = f.Write(make([]byte, fi.Size()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("overwriting %s: %w", p, err)
	}
	return os.Remove(p)
}

func removeAll(paths []string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SealDetails are the sealed report's details: one per step.
func SealDetails(steps []SealStep) map[string]string {
	d := map[string]string{}
	for _, s := range steps {
		d["step."+s.Name] = s.Detail
	}
	return d
}
