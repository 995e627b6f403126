package precache

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containers/image/v5/docker/reference"
	"github.com/opencontainers/go-digest"

	"github.com/snofactory/snofactory/pipeline/blobstore"
)

// A manifest from a registry is decoded strictly: a key named twice or data after it is
// refused, naming the manifest, the place and the key.
func TestLoadManifestStrict(t *testing.T) {
	for _, tc := range []struct{ name, manifest, want string }{
		{"duplicate at depth", `{"schemaVersion":2,"config":{"digest":"sha256:a",` + "\n" + `"digest":"sha256:b"}}`, `line 2, column 1: duplicate key "digest" (first at line 1, column 30)`},
		{"data after it", `{"schemaVersion":2}` + "\n{}", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := blobstore.Open(filepath.Join(t.TempDir(), "blobs"))
			if err != nil {
				t.Fatal(err)
			}
			d := digest.FromString(tc.manifest)
			if err := st.Put(d, []byte(tc.manifest)); err != nil {
				t.Fatal(err)
			}
			named, _ := reference.ParseNormalizedNamed("registry.example/a/b")
			_, _, _, err = loadManifest(context.Background(), nil, st, Image{Ref: "registry.example/a/b@" + d.String()}, named, d)
			if err == nil || !strings.Contains(err.Error(), "manifest "+d.String()) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadManifest = %v, want the manifest and %q", err, tc.want)
			}
		})
	}
}
