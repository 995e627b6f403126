package registries

import (
	"context"
	"fmt"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/signature"
	"github.com/containers/image/v5/types"
)

// Policy is a containers signature policy (policy.json) to check images against before
// anything of them is used. A nil *Policy (no policy configured) allows every image.
type Policy struct {
	policy *signature.Policy
	sys    *types.SystemContext
}

// OpenPolicy reads the signature policy sys names (Config.PolicyFile); nil when it names none.
func OpenPolicy(sys *types.SystemContext) (*Policy, error) {
	if sys == nil || sys.SignaturePolicyPath == "" {
		return nil, nil
	}
	p, err := signature.NewPolicyFromFile(sys.SignaturePolicyPath)
	if err != nil {
		return nil, fmt.Errorf("reading signature policy %s: %w", sys.SignaturePolicyPath, err)
	}
	return &Policy{policy: p, sys: sys}, nil
}

// Allow checks the image src reads against the policy; ref names it in the error. The
// signatures are those of the manifest src returns for no instance: the one ref names.
func (p *Policy) Allow(ctx context.Context, src types.ImageSource, ref string) error {
	if p == nil {
		return nil
	}
	// A PolicyContext refuses concurrent use; one per check keeps callers free to check in
	// parallel, and costs nothing the check itself does not.
	pc, err := signature.NewPolicyContext(p.policy)
	if err != nil {
		return fmt.Errorf("signature policy: %w", err)
	}
	defer pc.Destroy()
	if _, err := pc.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, nil)); err != nil {
		return fmt.Errorf("signature policy rejects %s: %w", ref, err)
	}
	return nil
}

// AllowRef opens the registry image ref to check it, for callers that fetch the image's
// content by other means.
func (p *Policy) AllowRef(ctx context.Context, ref string) error {
	if p == nil {
		return nil
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	dref, err := docker.NewReference(named)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	src, err := dref.NewImageSource(ctx, p.sys)
	if err != nil {
		return fmt.Errorf("checking signatures of %s: %w", ref, err)
	}
	defer src.Close()
	return p.Allow(ctx, src, ref)
}
