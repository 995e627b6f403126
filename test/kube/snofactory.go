package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SnofactoryRepo is the name the snofactory image is loaded under; its tag is the hash of
// the image's inputs.
const SnofactoryRepo = "localhost/snofactory-test/snofactory"

// baseImage is the local Debian base `make image` builds on (test/image/build-base.sh).
const baseImage = "localhost/snofactory-base:bookworm"

// SnofactoryImage builds this checkout's snofactory image the way `make image` does (the
// Containerfile, buildah, the local Debian base) and returns its reference and an OCI
// archive of it. The archive is kept in build/kube/images under the hash of the image's
// inputs (the binary, the Containerfile, the base image's ID), so it is built again only
// when one of them changes; the package layers come from buildah's layer cache. dir is
// scratch space for the build context.
func SnofactoryImage(ctx context.Context, dir string) (ref, archive string, err error) {
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	bin := ImageBinary(dir)
	bctx := filepath.Join(dir, "image-context")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w",
		"-tags=containers_image_openpgp,exclude_graphdriver_btrfs", "-o", bin, "./cmd/snofactory")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building snofactory for its image: %w: %s", err, out)
	}
	for _, f := range []string{"Containerfile", ".containerignore"} {
		if err := copyFile(filepath.Join(root, f), filepath.Join(bctx, f)); err != nil {
			return "", "", err
		}
	}
	if err := run(ctx, filepath.Join(root, "test", "image", "build-base.sh"), baseImage); err != nil {
		return "", "", err
	}
	baseID, err := exec.CommandContext(ctx, "buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}", baseImage).Output()
	if err != nil {
		return "", "", fmt.Errorf("buildah inspect %s: %w", baseImage, err)
	}
	tag, err := hashFiles(string(baseID), bin, filepath.Join(bctx, "Containerfile"))
	if err != nil {
		return "", "", err
	}
	ref = SnofactoryRepo + ":" + tag
	images := filepath.Join(root, "build", "kube", "images")
	archive = filepath.Join(images, "snofactory-"+tag+".tar")
	if _, err := os.Stat(archive); err == nil {
		return ref, archive, nil
	}
	if err := os.MkdirAll(images, 0o755); err != nil {
		return "", "", err
	}
	return ref, archive, buildImage(ctx, bctx, ref, archive)
}

// ImageBinary is where SnofactoryImage(ctx, dir) left the snofactory binary its image
// carries, for the host side of a test to run the same code.
func ImageBinary(dir string) string {
	return filepath.Join(dir, "image-context", "build", "snofactory")
}

// buildImage runs the Makefile's image recipe with the test's tag, writes the image as an
// OCI archive and drops the tag from buildah's store; older archives go.
func buildImage(ctx context.Context, bctx, ref, archive string) error {
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if err := run(ctx, "buildah", "bud", "--isolation", "chroot", "--layers", "--force-rm", "--pull=never",
		"--build-arg", "BASE_IMAGE="+baseImage, "--build-arg", "VERSION=test-"+tag, "--build-arg", "REVISION="+tag,
		"-f", filepath.Join(bctx, "Containerfile"), "-t", ref, bctx); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(filepath.Dir(archive), "snofactory-*.tar"))
	// The archive's index names the image by ref (org.opencontainers.image.ref.name), which
	// ctr's import keeps under --base-name SnofactoryRepo.
	if err := run(ctx, "buildah", "push", ref, "oci-archive:"+archive+".tmp:"+ref); err != nil {
		return err
	}
	if err := os.Rename(archive+".tmp", archive); err != nil {
		return err
	}
	for _, f := range old {
		os.Remove(f)
	}
	return run(ctx, "buildah", "rmi", ref)
}

// hashFiles is a short hex digest of s and the files' contents.
func hashFiles(s string, files ...string) (string, error) {
	h := sha256.New()
	h.Write([]byte(s))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// ImportArchive loads an OCI archive written by buildah push into the cluster's
// containerd, keeping the names under baseName its index carries.
func (c *Cluster) ImportArchive(ctx context.Context, archive, baseName string) error {
	return importImage(ctx, c.Socket, snapshotter, archive, "--base-name", baseName)
}
