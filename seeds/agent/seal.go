package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	Target string `json:"target"`
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
	case req.Target != "coreos" && req.Target != "openshift":
		return req, fmt.Errorf("seal request target %q, want coreos or openshift", req.Target)
	}
	return req, nil
}

// SealStep is one thing Seal did, for the report.
type SealStep struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// Runner runs a command on the node (systemctl, crictl); tests record the calls.
type Runner func(ctx context.Context, name string, args ...string) error

// ExecRunner runs commands for real.
func ExecRunner(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pullSecretPaths are where a node keeps the build-time pull secret: the kubelet's and
// CRI-O's global pull secret, and the registry auth files of root.
func pullSecretPaths() []string {
	return []string{"/var/lib/kubelet/config.json", "/root/.docker/config.json", "/run/containers/0/auth.json", "/etc/containers/auth.json"}
}

// perNodeState is what belongs to this one boot of this one machine and must not ship.
func perNodeState() []string {
	return []string{"/var/log", "/var/tmp", "/var/lib/kubelet/pods", "/var/lib/cni/networks", "/var/lib/ovn-ic/etc"}
}

// Seal prepares the installed system under root for relocation: for OpenShift it stops
// and disables kubelet and CRI-O after removing the pod sandboxes, and enables the
// reconfiguration service; for every target it clears per-node state, logs, the machine-id
// and SSH host keys (regenerated at the site), removes the pull secret unless the request
// keeps it, removes the first-boot Ignition config under bootDir (it may embed secrets; ""
// for none), and writes SealedFile. Each step is safe to repeat.
func Seal(ctx context.Context, root, bootDir string, req SealRequest, run Runner) ([]SealStep, error) {
	var steps []SealStep
	var missing []string
	for _, p := range req.RequiredFiles {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the relocation configuration is not in place (were its MachineConfigs applied?): missing %s", strings.Join(missing, ", "))
	}
	if len(req.RequiredFiles) > 0 {
		steps = append(steps, SealStep{"relocation-config", fmt.Sprintf("%d files in place", len(req.RequiredFiles))})
	}
	if req.Target == "openshift" {
		s, err := sealServices(ctx, run)
		if err != nil {
			return steps, err
		}
		steps = append(steps, s...)
	}
	n, err := clearTrees(root, perNodeState())
	if err != nil {
		return steps, err
	}
	steps = append(steps, SealStep{"per-node-state", fmt.Sprintf("%d entries removed under %s", n, strings.Join(perNodeState(), ", "))})
	if err := truncateIfExists(filepath.Join(root, "etc/machine-id")); err != nil {
		return steps, err
	}
	steps = append(steps, SealStep{"machine-id", "emptied: the site's first boot makes a new one"})
	keys, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if err := removeAll(keys); err != nil {
		return steps, err
	}
	steps = append(steps, SealStep{"ssh-host-keys", fmt.Sprintf("%d removed", len(keys))})
	ps, err := sealPullSecret(root, req)
	if err != nil {
		return steps, err
	}
	steps = append(steps, ps)
	if bootDir != "" {
		cfg := filepath.Join(bootDir, "ignition", "config.ign")
		if err := shred(cfg); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return steps, fmt.Errorf("removing the first-boot Ignition config: %w", err)
		}
		steps = append(steps, SealStep{"ignition-config", "removed " + cfg})
	}
	if req.RecertImage != "" {
		imgs, err := json.Marshal(map[string]string{"recertImage": req.RecertImage, "etcdImage": req.EtcdImage})
		if err != nil {
			return steps, err
		}
		if err := writeUnder(root, ReconfigureImagesFile, imgs); err != nil {
			return steps, err
		}
		steps = append(steps, SealStep{"reconfigure-images", ReconfigureImagesFile})
	}
	b, err := json.Marshal(req)
	if err != nil {
		return steps, err
	}
	marker := filepath.Join(root, SealedFile)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return steps, fmt.Errorf("writing %s: %w", SealedFile, err)
	}
	if err := os.WriteFile(marker, append(b, '\n'), 0o644); err != nil {
		return steps, fmt.Errorf("writing %s: %w", SealedFile, err)
	}
	return append(steps, SealStep{"sealed", SealedFile}), nil
}

// sealServices stops the cluster on an OpenShift node so nothing runs or writes when the
// disk is copied, and leaves it to the reconfiguration service to start at the site.
func sealServices(ctx context.Context, run Runner) ([]SealStep, error) {
	cmds := []struct {
		step string
		argv []string
	}{
		{"pods", []string{"crictl", "rmp", "--all", "--force"}},
		{"kubelet", []string{"systemctl", "disable", "--now", "kubelet.service"}},
		{"crio", []string{"systemctl", "disable", "--now", "crio.service"}},
		{"reconfigure-service", []string{"systemctl", "enable", "snofactory-reconfigure.service"}},
	}
	var steps []SealStep
	for _, c := range cmds {
		if err := run(ctx, c.argv[0], c.argv[1:]...); err != nil {
			return steps, fmt.Errorf("seal step %s: %w", c.step, err)
		}
		steps = append(steps, SealStep{c.step, strings.Join(c.argv, " ")})
	}
	return steps, nil
}

// sealPullSecret removes the pull secret files unless the request keeps them.
func sealPullSecret(root string, req SealRequest) (SealStep, error) {
	if req.KeepPullSecret {
		return SealStep{"pull-secret", "kept: the blueprint keeps it"}, nil
	}
	var removed []string
	for _, p := range pullSecretPaths() {
		err := shred(filepath.Join(root, p))
		switch {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, fs.ErrNotExist):
			return SealStep{}, fmt.Errorf("removing the pull secret: %w", err)
		}
	}
	if len(removed) == 0 {
		return SealStep{"pull-secret", "none on the node"}, nil
	}
	return SealStep{"pull-secret", "removed " + strings.Join(removed, ", ")}, nil
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
