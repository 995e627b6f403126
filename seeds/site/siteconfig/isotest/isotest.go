// Package isotest writes ISO 9660 images by hand for tests: a site-config medium or an
// image-based installer's config image with exactly the files a test gives, bypassing
// every check the real writer makes, as a hand-made or tampered medium would be.
package isotest

import (
	"os"
	"strings"
	"testing"

	"github.com/kdomanski/iso9660"
)

// Write writes an ISO 9660 image labelled label to path, holding files (path on the
// image → content), and returns path.
func Write(t testing.TB, path, label string, files map[string]string) string {
	t.Helper()
	w, err := iso9660.NewWriter()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cleanup()
	for name, body := range files {
		if err := w.AddFile(strings.NewReader(body), name); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := w.WriteTo(f, label); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
