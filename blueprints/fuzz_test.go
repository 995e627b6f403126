package blueprints

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader, seeded with the examples and the malformed
// corpus. The loader must never panic (Parse turns a panic into an internal-error problem,
// which fails here), must return either a blueprint or a *ValidationErrors whose every
// problem names the file, and must never print the test pull secret.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("*.yaml")
	bad, _ := filepath.Glob("testdata/bad/*.yaml")
	for _, p := range append(seeds, bad...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Parse relative to testdata/bad so the corpus's file references resolve.
	name := filepath.Join("testdata", "bad", "fuzz.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		bp, err := Parse(data, name)
		if err == nil {
			if bp == nil {
				t.Fatal("nil blueprint without error")
			}
			return
		}
		var ve *ValidationErrors
		if !errors.As(err, &ve) {
			t.Fatalf("error is %T, not *ValidationErrors: %v", err, err)
		}
		if len(ve.Problems) == 0 {
			t.Fatal("no problems")
		}
		for _, p := range ve.Problems {
			if strings.HasPrefix(p.Message, internalErrorPrefix) {
				t.Fatalf("loader bug: %v", p)
			}
			if p.File != name || p.Message == "" {
				t.Fatalf("incomplete problem: %#v", p)
			}
		}
		if msg := err.Error(); strings.Contains(msg, "SUPERSECRET") {
			t.Fatalf("pull secret content in the error: %s", msg)
		}
	})
}
