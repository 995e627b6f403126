package precache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestStorePut(t *testing.T) {
	manifest := []byte(`{"schemaVersion":2}`)
	d := digest.FromBytes(manifest)
	tests := []struct {
		name    string
		d       digest.Digest
		data    []byte
		times   int
		wantErr bool
	}{
		{"stored read-only", d, manifest, 1, false},
		{"stored twice", d, manifest, 2, false},
		{"content does not match its digest", d, []byte(`{"schemaVersion":1}`), 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for range tc.times {
				err = st.Put(tc.d, tc.data)
			}
			var de *digestError
			if tc.wantErr != errors.As(err, &de) {
				t.Fatalf("err = %v, want a digest error: %v", err, tc.wantErr)
			}
			ents, _ := os.ReadDir(filepath.Join(st.Dir(), "sha256"))
			if tc.wantErr {
				if len(ents) != 0 {
					t.Errorf("rejected content left %v in the store", ents)
				}
				return
			}
			// Only the blob itself: no temporary file is left beside it.
			if len(ents) != 1 || ents[0].Name() != d.Encoded() {
				t.Fatalf("store holds %v, want only %s", ents, d.Encoded())
			}
			fi, _ := os.Stat(st.Path(d))
			if fi.Mode().Perm() != 0o444 {
				t.Errorf("stored manifest mode %v, want 0444", fi.Mode().Perm())
			}
			if b, _ := st.Read(d); string(b) != string(manifest) {
				t.Errorf("stored %q", b)
			}
		})
	}
}
