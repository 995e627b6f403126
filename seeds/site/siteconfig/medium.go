package siteconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/kdomanski/iso9660"
	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/pipeline/output"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
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

// NodeKeysDir holds, on a seed's node, the public keys its site-config media must be signed
// by (the blueprint's spec.relocation.siteConfigKeys), one PEM file FINGERPRINT.pub each.
// Without it the reconfiguration hook accepts unsigned media.
const NodeKeysDir = "/etc/snofactory/site-keys"

// Files of a signed medium, beside ConfigFileName in the root directory.
const (
	// SignatureFileName holds the signature of ConfigFileName's bytes as `cosign sign-blob`
	// writes it (base64 ASN.1 ECDSA over their sha256): `cosign verify-blob --key SITE.pub
	// --signature site_config.sig site_config.yaml` checks a medium with no snofactory at hand.
	SignatureFileName = "site_config.sig"
	// SignerFileName names the signing key by its fingerprint (trust.PublicKey.Fingerprint).
	// It is a hint for the message that refuses a medium, never trusted: only the signature
	// decides.
	SignerFileName = "signer.txt"
	// maxSignatureFile bounds the signature files read from a medium.
	maxSignatureFile = 4 << 10
)

// MediumOptions say how WriteMedium makes a medium.
type MediumOptions struct {
	// Signer, when set, signs the site config: SignatureFileName and SignerFileName go on
	// the medium beside it.
	Signer *trust.Signer
	// Inputs are files the medium must not overwrite (output.Check).
	Inputs []string
}

// Write writes the unsigned medium for sc to isoPath (WriteMedium).
func Write(ctx context.Context, sc *SiteConfig, isoPath string, inputs ...string) error {
	return WriteMedium(ctx, sc, isoPath, MediumOptions{Inputs: inputs})
}

// WriteMedium writes the medium for sc to isoPath: an ISO 9660 image labelled VolumeLabel
// holding ConfigFileName and, signed, its signature. The signature covers ConfigFileName's
// bytes exactly as the hook reads them: the self-contained site config (Normalized), with
// the pull secret and every manifest inlined, so nothing the hook applies is outside it. A
// block device (a USB stick) is written in place; a file is replaced atomically, mode 0600.
// What output.Check refuses (a directory, a character device, a read-only file, a mounted
// device, one of o.Inputs) is an *output.Error or *output.MountedError.
func WriteMedium(ctx context.Context, sc *SiteConfig, isoPath string, o MediumOptions) error {
	data, err := sc.Normalized()
	if err != nil {
		return err
	}
	files := []mediumFile{{ConfigFileName, data}}
	signedBy := ""
	if o.Signer != nil {
		sig, err := o.Signer.SignBlob(data)
		if err != nil {
			return fmt.Errorf("signing the site config %s: %w", sc.Metadata.Name, err)
		}
		pub, err := o.Signer.PublicKey()
		if err != nil {
			return err
		}
		signedBy = pub.Fingerprint
		files = append(files, mediumFile{SignatureFileName, []byte(sig)}, mediumFile{SignerFileName, []byte(signedBy + "\n")})
	}
	w, err := iso9660.NewWriter()
	if err != nil {
		return fmt.Errorf("staging the site-config medium: %w", err)
	}
	defer w.Cleanup()
	for _, f := range files {
		if err := w.AddFile(bytes.NewReader(f.data), f.name); err != nil {
			return fmt.Errorf("staging %s for the site-config medium: %w", f.name, err)
		}
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
	}, o.Inputs...); err != nil {
		return err
	}
	slog.InfoContext(ctx, "site-config medium written", "path", isoPath, "site", sc.Metadata.Name,
		"hostname", sc.Spec.Hostname, "pullSecret", sc.Spec.PullSecret != "", "signedBy", signedBy)
	return nil
}

type mediumFile struct {
	name string
	data []byte
}

// Medium is a site-config medium as read, before anything on it is trusted: the hook checks
// its signature (Verify) before it parses the site config (SiteConfig).
type Medium struct {
	// Path is the image file or device it was read from; Label its volume label.
	Path, Label string
	// Config is the site config document: ConfigFileName's bytes, exactly what a signature
	// covers. For the image-based installer's medium, the site config made from its files.
	Config []byte
	// Signature is SignatureFileName's content, nil when the medium has none.
	Signature []byte
	// SignedBy is the fingerprint SignerFileName claims ("" when absent or not a
	// fingerprint): a hint for messages only.
	SignedBy string
	// ImageBased: the image-based installer's medium, which carries no signature.
	ImageBased bool
	name       string // how problems name Config
}

var fingerprintRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// OpenMedium reads a medium, an ISO 9660 image file or a block device: its site config
// document and signature files, each bounded. Nothing in them is checked yet.
func OpenMedium(path string) (*Medium, error) {
	// A drive is a block device; a FIFO or a character device would block or never end.
	f, err := smallfile.OpenOrBlockDevice(path)
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
	m := &Medium{Path: path, Label: strings.TrimSpace(label)}
	switch m.Label {
	case VolumeLabel:
	case ImageBasedVolumeLabel, legacyImageBasedLabel:
		if m.Config, err = imageBasedDocument(img, path); err != nil {
			return nil, err
		}
		m.ImageBased, m.name = true, path+":"+imageBasedManifest+" (as a site config)"
		return m, nil
	default:
		return nil, fmt.Errorf("%s is not a site-config medium: volume label %q, want %q (or the image-based installer's %q)", path, label, VolumeLabel, ImageBasedVolumeLabel)
	}
	m.name = path + ":" + ConfigFileName
	if m.Config, err = readRootFile(img, ConfigFileName, MaxFileSize); err != nil {
		return nil, fmt.Errorf("reading %s from the site-config medium %s: %w", ConfigFileName, path, err)
	}
	if m.Signature, err = readRootFile(img, SignatureFileName, maxSignatureFile); errors.Is(err, os.ErrNotExist) {
		m.Signature = nil
	} else if err != nil {
		return nil, fmt.Errorf("reading %s from the site-config medium %s: %w", SignatureFileName, path, err)
	}
	if b, err := readRootFile(img, SignerFileName, maxSignatureFile); err == nil && fingerprintRE.Match(bytes.TrimSpace(b)) {
		m.SignedBy = string(bytes.TrimSpace(b))
	}
	return m, nil
}

// ReadMedium reads the site config from a medium, an ISO 9660 image file or a block device,
// and validates it again as a self-contained site config (no file references). Problems in
// it name the medium as PATH:site_config.yaml. A medium in the image-based installer's
// config-ISO layout (label cluster-config) is read and converted as well. Its signature, if
// any, is not checked: see OpenMedium and Verify.
func ReadMedium(path string) (*SiteConfig, error) {
	m, err := OpenMedium(path)
	if err != nil {
		return nil, err
	}
	return m.SiteConfig()
}

// SiteConfig parses and validates the medium's site config.
func (m *Medium) SiteConfig() (*SiteConfig, error) {
	return Parse(m.Config, m.name, "")
}

// Digest identifies what is on the medium (its site config and signature): a medium the
// hook refused is known again by it.
func (m *Medium) Digest() string {
	h := sha256.New()
	for _, b := range [][]byte{[]byte(m.Label), m.Config, m.Signature} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ErrRefused is what every refusal by Verify wraps.
var ErrRefused = errors.New("the site-config medium is refused")

// RefusedError is a medium Verify refused: why, and what to do, for the technician.
type RefusedError struct {
	Path, Msg string
	// Reason wraps trust.ErrBlobUnsigned, trust.ErrBlobSignatureMalformed or
	// trust.ErrBlobNoKey.
	Reason error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the site-config medium %s is refused: %s", e.Path, e.Msg)
}

func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Reason} }

// Verify checks that one of keys signed the medium's site config and returns that key's
// fingerprint. A refusal is a *RefusedError.
func (m *Medium) Verify(keys []trust.PublicKey) (string, error) {
	fps := make([]string, len(keys))
	for i, k := range keys {
		fps[i] = trust.ShortFingerprint(k.Fingerprint)
	}
	trusted := fmt.Sprintf("this seed accepts only media signed by one of its site keys (%s)", strings.Join(fps, ", "))
	const remake = "make the medium with snofactory site-config create --sign-by KEY"
	refuse := func(reason error, format string, a ...any) error {
		return &RefusedError{Path: m.Path, Msg: fmt.Sprintf(format, a...), Reason: reason}
	}
	if m.ImageBased {
		return "", refuse(trust.ErrBlobUnsigned, "it is the image-based installer's medium (label %s), which carries no signature, and %s; %s", m.Label, trusted, remake)
	}
	fp, err := trust.VerifyBlob(keys, m.Config, m.Signature)
	switch {
	case err == nil:
		return fp, nil
	case errors.Is(err, trust.ErrBlobUnsigned):
		return "", refuse(err, "it is not signed (no %s), and %s; %s", SignatureFileName, trusted, remake)
	case errors.Is(err, trust.ErrBlobSignatureMalformed):
		return "", refuse(err, "its signature (%s) is unusable (%v); %s", SignatureFileName, err, remake)
	case errors.Is(err, trust.ErrBlobNoKey) && m.SignedBy != "" && slices.ContainsFunc(keys, func(k trust.PublicKey) bool { return k.Fingerprint == m.SignedBy }):
		return "", refuse(err, "it changed after it was signed: the signature by site key %s does not match %s; %s",
			trust.ShortFingerprint(m.SignedBy), ConfigFileName, remake)
	case errors.Is(err, trust.ErrBlobNoKey) && m.SignedBy != "":
		return "", refuse(err, "it is signed by key %s, and %s; sign it with one of those", trust.ShortFingerprint(m.SignedBy), trusted)
	case errors.Is(err, trust.ErrBlobNoKey):
		return "", refuse(err, "no site key of this seed (%s) verifies its signature: another key made it, or the medium changed after it was signed; %s",
			strings.Join(fps, ", "), remake)
	default:
		return "", refuse(err, "%v", err)
	}
}

func readRootFile(img *iso9660.Image, name string, limit int64) ([]byte, error) {
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
		if c.Size() > limit {
			return nil, fmt.Errorf("%w: larger than %d bytes", errTooLarge, limit)
		}
		return io.ReadAll(io.LimitReader(c.Reader(), limit))
	}
	return nil, os.ErrNotExist
}
