package registry

import (
	"context"
	"testing"
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
