package registry

import (
	"context"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// StartT starts a registry for one test and stops it in t.Cleanup. A missing
// binary fails the test with the apt package to install, never skips it.
func StartT(t testing.TB, opts Options) *Registry {
	t.Helper()
	// A missing binary is ErrNotInstalled, whose text names the apt package.
	r, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("test registry: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop test registry: %v", err)
		}
	})
	return r
}

// PushT pushes img to ref (a test registry's host:port/repo:tag) and returns the image
// pinned, as repository@digest. opts go to remote.Write, e.g. remote.WithAuth for a
// registry with Username set.
func PushT(t testing.TB, ref string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	pinned, err := Push(context.Background(), ref, img, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return pinned
}
