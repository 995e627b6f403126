package lockfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	base := Lock{SchemaVersion: 1, Arch: "x86_64", Release: LockedRelease{Ref: "r:1", Digest: "sha256:a", Version: "4.16.3"},
		Images:    []LockedImage{{Name: "etcd", Ref: "e@sha256:1", Digest: "sha256:1", Source: "release"}},
		ISO:       &LockedISO{URL: "u", SHA256: "s", From: "coreos-bootimages"},
		Installer: &LockedTool{Ref: "i@sha256:2", Digest: "sha256:2", SHA256: "x"}}
	tests := []struct {
		name   string
		change func(l *Lock)
		want   []string
	}{
		{"same", func(*Lock) {}, nil},
		{"release digest", func(l *Lock) { l.Release.Digest = "sha256:b" }, []string{"release r:1: locked digest sha256:a, now sha256:b"}},
		{"image digest", func(l *Lock) { l.Images[0].Digest = "sha256:9" }, []string{"image etcd (release): locked digest sha256:1, now sha256:9"}},
		{"image added and removed", func(l *Lock) { l.Images[0].Name = "etcd2" }, []string{"image etcd2 (release): not in the lock, now sha256:1", "image etcd (release): in the lock (sha256:1), no longer resolved"}},
		{"iso", func(l *Lock) { l.ISO = &LockedISO{URL: "v", SHA256: "s", From: "coreos-bootimages"} }, []string{"iso: locked u (sha256 s), now v (sha256 s)"}},
		{"installer binary", func(l *Lock) { l.Installer = &LockedTool{Ref: "i@sha256:2", Digest: "sha256:2", SHA256: "y"} }, []string{"openshift-install binary: locked sha256 x, now y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fresh := base
			fresh.Images = append([]LockedImage(nil), base.Images...)
			tc.change(&fresh)
			got := Verify(&base, &fresh)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Verify = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadLock(t *testing.T) {
	good := &Lock{SchemaVersion: SchemaVersion, Arch: "x86_64", Release: LockedRelease{Ref: "r:1", Digest: "sha256:a"},
		Images: []LockedImage{
			{Name: "etcd", Ref: "e@sha256:1", Digest: "sha256:1", Source: SourceRelease},
			{Name: "bundle", Ref: "b@sha256:2", Digest: "sha256:2", Source: SourceOperator + ":lvms-operator"},
		}}
	tests := []struct {
		name    string
		content string // "" writes good with WriteLock
		wantErr string
	}{
		{"written by WriteLock", "", ""},
		{"other schema version", `{"schemaVersion":2,"arch":"x86_64","images":[]}`, "schema version 2"},
		{"unknown field", `{"schemaVersion":1,"arch":"x86_64","images":[],"extra":1}`, "unknown field"},
		{"release without digest", `{"schemaVersion":1,"arch":"x86_64","release":{"ref":"r:1","digest":""},"images":[]}`, "release digest is missing"},
		{"image without digest", `{"schemaVersion":1,"arch":"x86_64","images":[{"name":"etcd","ref":"e:1","digest":"","source":"release"}]}`, "images[0] (etcd)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), File)
			if tc.content == "" {
				if err := WriteLock(path, good); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := ReadLock(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := Verify(good, l); len(d) != 0 {
				t.Errorf("read back differs: %v", d)
			}
			// Canonical: images sorted by source, then name.
			if l.Images[0].Name != "bundle" {
				t.Errorf("images not sorted: %+v", l.Images)
			}
		})
	}
}
