package ociseed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// What a registry, an OCI layout or an auth file gives is decoded strictly: a key named
// twice (which two readers may take differently) or anything after the document is
// refused with the input, the place and the key named, before anything is fetched.
func TestStrictRegistryJSON(t *testing.T) {
	const manifest = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"artifactType":"application/vnd.snofactory.seed.v1","config":{"mediaType":"x","digest":"sha256:` +
		`e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":0},"layers":[]}`
	dupManifest := strings.Replace(manifest, `"artifactType"`, "\n"+`"artifactType":"other","artifactType"`, 1)
	index := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`
	dupIndex := strings.Replace(index, `"manifests"`, `"manifests":[{"digest":"a","digest":"b"}],`+"\n"+`"manifests"`, 1)
	readIndex := func(b string) error {
		_, err := readParts(context.Background(), nil, []byte(b))
		return err
	}
	layoutIndex := func(t *testing.T, b string) (string, error) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "index.json"), []byte(b), 0o644)
		_, err := (&layoutStore{dir: dir}).index()
		return filepath.Join(dir, "index.json"), err
	}
	authFile := func(t *testing.T, b string) (string, error) {
		f := filepath.Join(t.TempDir(), "auth.json")
		os.WriteFile(f, []byte(b), 0o600)
		t.Setenv("REGISTRY_AUTH_FILE", f)
		_, err := containersKeychain{}.Resolve(name.MustParseReference("registry.example/seeds/a:1").Context())
		return f, err
	}
	for _, tc := range []struct {
		name string
		read func(t *testing.T) (input string, err error)
		want string
	}{
		{"manifest: duplicated key", func(*testing.T) (string, error) {
			_, err := parseSeedManifest([]byte(dupManifest))
			return "the OCI manifest", err
		}, `line 2, column 24: duplicate key "artifactType" (first at line 2, column 1)`},
		{"manifest: data after it", func(*testing.T) (string, error) {
			_, err := parseSeedManifest([]byte(manifest + "\n{}"))
			return "the OCI manifest", err
		}, "line 2, column 1: data after the JSON document"},
		{"index: duplicate at depth", func(*testing.T) (string, error) {
			return "the OCI index", readIndex(dupIndex)
		}, `line 1, column 101: duplicate key "digest" (first at line 1, column 88)`},
		{"index: data after it", func(*testing.T) (string, error) { return "the OCI index", readIndex(index + " []") }, "line 1, column 90: data after the JSON document"},
		{"layout index: duplicated key", func(t *testing.T) (string, error) {
			return layoutIndex(t, strings.Replace(index, `"mediaType"`, `"schemaVersion":2,"mediaType"`, 1))
		}, `line 1, column 20: duplicate key "schemaVersion" (first at line 1, column 2)`},
		{"layout index: data after it", func(t *testing.T) (string, error) { return layoutIndex(t, index+"\n"+index) }, "line 2, column 1: data after the JSON document"},
		{"auth file: duplicated key", func(t *testing.T) (string, error) {
			return authFile(t, `{"auths":{"registry.example":{"auth":"YTpi"},`+"\n"+`"registry.example":{"auth":"Yzpk"}}}`)
		}, `line 2, column 1: duplicate key "registry.example" (first at line 1, column 11)`},
		{"auth file: data after it", func(t *testing.T) (string, error) { return authFile(t, `{"auths":{}}{"auths":{}}`) }, "line 1, column 13: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input, err := tc.read(t)
			if err == nil || !strings.Contains(err.Error(), input) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to name %q and say %q", err, input, tc.want)
			}
			if strings.Contains(err.Error(), "YTpi") || strings.Contains(err.Error(), "Yzpk") {
				t.Errorf("a credential is quoted back: %v", err)
			}
		})
	}
}
