package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// File is one file of an image: a regular file copied from Source, or a symlink to Link.
type File struct {
	Path, Source, Link string
}

// Image is a local image: its files and entrypoint. Every image the cluster runs is one of
// these, imported into containerd, so no pod ever asks a registry for anything.
type Image struct {
	Ref        string // e.g. localhost/snofactory-test/busybox:1 (a tag, never latest: pulled only if absent)
	Files      []File
	Entrypoint []string
}

func digestOf(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// layer is an uncompressed tar of the image's files, each dated at the epoch.
func (im Image) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range im.Files {
		for d := filepath.Dir(f.Path); d != "/" && d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		name := strings.TrimPrefix(f.Path, "/")
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
			continue
		}
		b, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("reading %s for image %s: %w", f.Source, im.Ref, err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), tw.Close()
}

// writeArchive writes im as an OCI image-layout tar whose index names it with the
// annotation containerd's importer reads (containerd images/archive/importer.go,
// ImportIndex: io.containerd.image.name).
func (im Image) writeArchive(path string) error {
	layer, err := im.layer()
	if err != nil {
		return err
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": im.Entrypoint, "Env": []string{"PATH=/bin:/usr/bin:/ko-app"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
	})
	desc := func(mt string, b []byte) map[string]any {
		return map[string]any{"mediaType": mt, "digest": digestOf(b), "size": len(b)}
	}
	manifest, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar", layer)}})
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{"io.containerd.image.name": im.Ref}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{md}})

	out, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	entries := []struct {
		name string
		b    []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}}
	for _, b := range [][]byte{layer, config, manifest} {
		entries = append(entries, struct {
			name string
			b    []byte
		}{"blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:"), b})
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.b)), ModTime: time.Unix(0, 0)}); err != nil {
			out.Close()
			return err
		}
		if _, err := tw.Write(e.b); err != nil {
			out.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// importImage loads an image archive into containerd's CRI namespace, as kind does
// (ctr -n k8s.io images import), unpacked for the snapshotter the CRI plugin uses; flags
// are ctr's import flags.
func importImage(ctx context.Context, socket, snapshotter, archive string, flags ...string) error {
	args := append([]string{"--address", socket, "--namespace", "k8s.io", "images", "import", "--snapshotter", snapshotter}, flags...)
	out, err := exec.CommandContext(ctx, "ctr", append(args, archive)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", filepath.Base(archive), err, out)
	}
	return nil
}

// Busybox is Debian's busybox-static with a link for each of its applets in /bin: the
// shell image Tekton's place-scripts init container runs sh, cat, chmod and mkdir from
// (pkg/pod/script.go, convertScripts), and a tiny image for test steps.
func Busybox(ref string) (Image, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return Image{}, fmt.Errorf("busybox (Debian package busybox-static): %w: run `make deps`", err)
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return Image{}, fmt.Errorf("busybox --list: %w", err)
	}
	im := Image{Ref: ref, Files: []File{{Path: "/bin/busybox", Source: bb}}, Entrypoint: []string{"/bin/sh"}}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			im.Files = append(im.Files, File{Path: "/bin/" + applet, Link: "busybox"})
		}
	}
	return im, nil
}
