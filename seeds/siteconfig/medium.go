package siteconfig

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/kdomanski/iso9660"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline/output"
)

// VolumeLabel is the ISO 9660 volume identifier of every site-config medium: the
// reconfiguration hook finds the medium by it (/dev/disk/by-label/SNOSITE). ISO 9660
// d-characters only (A-Z, 0-9, _), at most 32.
const VolumeLabel = "SNOSITE"

// ConfigFileName is the self-contained site config on a medium, in the root directory.
// ISO 9660 names have no '-' (the writer would turn site-config.yaml into this anyway), and
// Linux shows level-1 names in lowercase, as here.
const ConfigFileName = "site_config.yaml"

// Normalized returns the self-contained form of a loaded site config, the document a medium
// carries: file references replaced by the content Load read (pullSecretFile by pullSecret,
// extraManifests by manifests). It holds the pull secret in clear when the site gave one.
func (sc *SiteConfig) Normalized() ([]byte, error) {
	n := *sc
	n.Spec.PullSecretFile = ""
	n.Spec.ExtraManifests = nil
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encoding the site config %s: %w", sc.Metadata.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding the site config %s: %w", sc.Metadata.Name, err)
	}
	return b.Bytes(), nil
}

// Write writes the medium for sc to isoPath: an ISO 9660 image labelled VolumeLabel holding
// ConfigFileName. A block device (a USB stick) is written in place; a file is replaced
// atomically, mode 0600 when it carries a pull secret, 0644 otherwise. What output.Check
// refuses (a directory, a character device, a read-only file, a mounted device, one of
// inputs) is an *output.Error or *output.MountedError.
func Write(ctx context.Context, sc *SiteConfig, isoPath string, inputs ...string) error {
	data, err := sc.Normalized()
	if err != nil {
		return err
	}
	w, err := iso9660.NewWriter()
	if err != nil {
		return fmt.Errorf("staging the site-config medium: %w", err)
	}
	defer w.Cleanup()
	if err := w.AddFile(bytes.NewReader(data), ConfigFileName); err != nil {
		return fmt.Errorf("staging %s for the site-config medium: %w", ConfigFileName, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("writing the site-config medium %s: %w", isoPath, err)
	}
	// 0600 always: besides a pull secret, a medium can carry signer keys, the kubeadmin
	// password hash and Secret manifests.
	if err := output.Write(isoPath, 0o600, func(f *os.File) error {
		if err := w.WriteTo(f, VolumeLabel); err != nil {
			return fmt.Errorf("writing the site-config medium %s: %w", isoPath, err)
		}
		return nil
	}, inputs...); err != nil {
		return err
	}
	slog.InfoContext(ctx, "site-config medium written", "path", isoPath, "site", sc.Metadata.Name,
		"hostname", sc.Spec.Hostname, "pullSecret", sc.Spec.PullSecret != "")
	return nil
}

// ReadMedium reads the site config from a medium, an ISO 9660 image file or a block device,
// and validates it again as a self-contained site config (no file references). Problems in
// it name the medium as PATH:site_config.yaml. A medium in the image-based installer's
// config-ISO layout (label cluster-config) is read and converted as well.
func ReadMedium(path string) (*SiteConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the site-config medium: %w", err)
	}
	defer f.Close()
	img, err := iso9660.OpenImage(f)
	if err != nil {
		return nil, fmt.Errorf("reading the site-config medium %s: not an ISO 9660 image: %w", path, err)
	}
	label, err := img.Label()
	if err != nil {
		return nil, fmt.Errorf("reading the site-config medium %s: %w", path, err)
	}
	switch strings.TrimSpace(label) {
	case VolumeLabel:
	case ImageBasedVolumeLabel, legacyImageBasedLabel:
		return readImageBased(img, path)
	default:
		return nil, fmt.Errorf("%s is not a site-config medium: volume label %q, want %q (or the image-based installer's %q)", path, label, VolumeLabel, ImageBasedVolumeLabel)
	}
	data, err := readRootFile(img, ConfigFileName)
	if err != nil {
		return nil, fmt.Errorf("reading %s from the site-config medium %s: %w", ConfigFileName, path, err)
	}
	return Parse(data, path+":"+ConfigFileName, "")
}

func readRootFile(img *iso9660.Image, name string) ([]byte, error) {
	root, err := img.RootDir()
	if err != nil {
		return nil, err
	}
	children, err := root.GetChildren()
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		if c.IsDir() || !strings.EqualFold(c.Name(), name) {
			continue
		}
		if c.Size() > MaxFileSize {
			return nil, fmt.Errorf("%w: larger than %d bytes", errTooLarge, MaxFileSize)
		}
		return io.ReadAll(io.LimitReader(c.Reader(), MaxFileSize))
	}
	return nil, os.ErrNotExist
}
