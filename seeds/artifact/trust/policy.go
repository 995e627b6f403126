package trust

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/oci/archive"
	"github.com/containers/image/v5/oci/layout"
	"github.com/containers/image/v5/signature"
	"github.com/containers/image/v5/types"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/pipeline/netlimit"
)

// The files podman and skopeo read when none is named.
const (
	DefaultPolicy        = "/etc/containers/policy.json"
	DefaultRegistriesDir = "/etc/containers/registries.d"
)

// Policy says which trust policy a seed is checked against.
type Policy struct {
	// File is a containers-policy.json(5); empty: DefaultPolicy, and no check at all when
	// that file does not exist (a warning says so).
	File string
	// RegistriesDir holds containers-registries.d(5) files, which say where a registry's
	// signatures are (use-sigstore-attachments); empty: DefaultRegistriesDir.
	RegistriesDir string
	// Insecure allows plain HTTP and unverified certificates.
	Insecure bool
}

// ErrUntrusted is what every refusal by the policy wraps.
var ErrUntrusted = errors.New("the seed is not trusted")

// UntrustedError says why the policy refused a seed.
type UntrustedError struct {
	Ref, Policy string
	Reason      error
}

func (e *UntrustedError) Error() string {
	msg := fmt.Sprintf("%s is refused by the trust policy %s: %v", e.Ref, e.Policy, e.Reason)
	if strings.Contains(e.Reason.Error(), "no signature exists") {
		msg += " (if the seed is signed, the registries.d configuration must say use-sigstore-attachments: true for its registry)"
	}
	return msg
}

func (e *UntrustedError) Unwrap() []error { return []error{ErrUntrusted, e.Reason} }

// Check evaluates the policy for the seed at ref, as podman and skopeo would for an image,
// and returns the digest of the manifest it accepted: pull that digest, not the tag, so
// what is pulled is what was checked. ref is in containers-transports(5) form:
// docker://registry/repository:tag (docker:// may be left out), oci:DIR:TAG or
// oci-archive:FILE:TAG (no signatures can be attached to these: a policy that requires
// one refuses them). It returns "" and no error when no policy applies.
func Check(ctx context.Context, ref string, p Policy) (digest.Digest, error) {
	file := p.File
	if file == "" {
		if _, err := os.Stat(DefaultPolicy); errors.Is(err, os.ErrNotExist) {
			slog.WarnContext(ctx, "no trust policy: the seed's signatures are not checked", "policy", DefaultPolicy, "seed", ref)
			return "", nil
		}
		file = DefaultPolicy
	}
	b, err := readPolicy(file)
	if err != nil {
		return "", err
	}
	pol, err := signature.NewPolicyFromBytes(b)
	if err != nil {
		return "", badinput.Errorf("the trust policy %s: %w", file, err)
	}
	if acceptsAnything(b) {
		// Debian's default policy: nothing to check, so nothing to read.
		slog.DebugContext(ctx, "the trust policy accepts anything", "policy", file, "seed", ref)
		return "", nil
	}
	if err := checkPolicyFiles(file, b); err != nil {
		return "", err
	}
	pc, err := signature.NewPolicyContext(pol)
	if err != nil {
		return "", badinput.Errorf("the trust policy %s: %w", file, err)
	}
	defer pc.Destroy()
	dref, err := parseRef(ref)
	if err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	dir := p.RegistriesDir
	if dir == "" {
		dir = DefaultRegistriesDir
	}
	if err := checkRegistriesDir(dir); err != nil {
		return "", err
	}
	// The signature check reads the registry with the credentials the seed's own reads use:
	// containers/image reads REGISTRY_AUTH_FILE only when told (podman's CLI does it), so
	// without this a registry that needs a login refused the check, not the pull.
	auth, err := checkAuthFile(os.Getenv("REGISTRY_AUTH_FILE"))
	if err != nil {
		return "", err
	}
	home, _ := os.UserHomeDir()
	if err := CheckCertDirs(CertDirs(home)); err != nil {
		return "", err
	}
	sys := &types.SystemContext{RegistriesDirPath: dir, AuthFilePath: auth}
	if p.Insecure || loopback(dref) {
		sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	}
	ctx, cancel := boundCheck(ctx, dref)
	defer cancel()
	return checkSource(ctx, dref, sys, pc, ref, file)
}

// checkSource reads the seed and its signatures and asks pc whether it may run. Once the
// deadline boundCheck set has passed, any failure is reported as its cause, which names
// the registry and the limit (containers/image does not always wrap the context's error).
func checkSource(ctx context.Context, dref types.ImageReference, sys *types.SystemContext, pc *signature.PolicyContext, ref, file string) (digest.Digest, error) {
	stalled := func() error {
		if se := (*netlimit.StallError)(nil); errors.As(context.Cause(ctx), &se) {
			return fmt.Errorf("checking the signatures of %s: %w", ref, se)
		}
		return nil
	}
	src, err := dref.NewImageSource(ctx, sys)
	if err != nil {
		return "", cmp.Or(stalled(), fmt.Errorf("reading %s to check its signatures: %w", ref, err))
	}
	defer src.Close()
	img := image.UnparsedInstance(src, nil)
	if _, err := pc.IsRunningImageAllowed(ctx, img); err != nil {
		return "", cmp.Or(stalled(), error(&UntrustedError{Ref: ref, Policy: file, Reason: err}))
	}
	raw, _, err := img.Manifest(ctx)
	if err != nil {
		return "", cmp.Or(stalled(), fmt.Errorf("reading %s: %w", ref, err))
	}
	return manifest.Digest(raw)
}

// boundCheck bounds the signature check of a registry's seed by the stall timeout.
// containers/image's client takes no transport of ours, so its progress cannot be
// watched; every answer the check reads is small (containers/image's iolimits cap a
// manifest or signature at 4 MiB), so the whole check gets the time one stalled answer
// would.
func boundCheck(ctx context.Context, dref types.ImageReference) (context.Context, context.CancelFunc) {
	if dref.Transport().Name() != docker.Transport.Name() || dref.DockerReference() == nil {
		return ctx, func() {}
	}
	limit := netlimit.StallTimeout(ctx)
	return context.WithTimeoutCause(ctx, limit, &netlimit.StallError{Kind: "registry",
		Peer: reference.Domain(dref.DockerReference()), Limit: limit, What: "answers the signature check reads"})
}

// acceptsAnything tells whether every requirement of the policy (already parsed, so
// well-formed) is insecureAcceptAnything.
func acceptsAnything(policy []byte) bool {
	var p struct {
		Default    []struct{ Type string }                       `json:"default"`
		Transports map[string]map[string][]struct{ Type string } `json:"transports"`
	}
	if json.Unmarshal(policy, &p) != nil {
		return false
	}
	reqs := p.Default
	for _, scopes := range p.Transports {
		for _, r := range scopes {
			reqs = append(reqs, r...)
		}
	}
	for _, r := range reqs {
		if r.Type != "insecureAcceptAnything" {
			return false
		}
	}
	return true
}

func parseRef(ref string) (types.ImageReference, error) {
	switch {
	case strings.HasPrefix(ref, "oci:"):
		return layout.ParseReference(strings.TrimPrefix(ref, "oci:"))
	case strings.HasPrefix(ref, "oci-archive:"):
		return archive.ParseReference(strings.TrimPrefix(ref, "oci-archive:"))
	}
	return docker.ParseReference("//" + strings.TrimPrefix(ref, "docker://"))
}

func loopback(ref types.ImageReference) bool {
	n := ref.DockerReference()
	if n == nil {
		return false
	}
	host := reference.Domain(n)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
