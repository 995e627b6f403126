package registry

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push pushes img to ref (a test registry's host:port/repo:tag) over plain HTTP and returns
// the image pinned, as repository@digest. opts go to remote.Write.
func Push(ctx context.Context, ref string, img v1.Image, opts ...remote.Option) (string, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().String() + "@" + d.String(), nil
}

// PushRandom pushes a small random image (one 256-byte layer) to ref, as a stand-in for an
// extra image a blueprint names.
func PushRandom(ctx context.Context, ref string) (string, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return "", err
	}
	return Push(ctx, ref, img)
}
