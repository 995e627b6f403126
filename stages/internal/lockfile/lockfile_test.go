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

func TestVerifyImageISO(t *testing.T) {
	const u = "image://q/mos@sha256:1#/coreos/coreos-x86_64.iso"
	extracted := LockedISO{URL: u, Path: "iso/live.iso", SHA256: "aa", From: "machine-os-images"}
	tests := []struct {
		name          string
		locked, fresh LockedISO
		want          []string
	}{
		{"same", extracted, extracted, nil},
		{"lock made without extraction", LockedISO{URL: u, From: "machine-os-images"}, extracted, nil},
		{"fresh without extraction", extracted, LockedISO{URL: u, From: "machine-os-images"}, nil},
		{"other content", extracted, LockedISO{URL: u, Path: "iso/live.iso", SHA256: "bb", From: "machine-os-images"},
			[]string{"iso: locked " + u + " (sha256 aa), now " + u + " (sha256 bb)"}},
		{"other image", extracted, LockedISO{URL: "image://q/mos@sha256:2#/coreos/coreos-x86_64.iso", Path: "iso/live.iso", SHA256: "aa", From: "machine-os-images"},
			[]string{"iso: locked " + u + " (sha256 aa), now image://q/mos@sha256:2#/coreos/coreos-x86_64.iso (sha256 aa)"}},
		// Outside image:// a missing sha256 is a difference: the URL alone pins nothing.
		{"url without sha", LockedISO{URL: "https://x/a.iso", SHA256: "aa", From: "blueprint"}, LockedISO{URL: "https://x/a.iso", From: "blueprint"},
			[]string{"iso: locked https://x/a.iso (sha256 aa), now https://x/a.iso (sha256 )"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			locked, fresh := Lock{ISO: &tc.locked}, Lock{ISO: &tc.fresh}
			if got := Verify(&locked, &fresh); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Verify = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseImageURL(t *testing.T) {
	tests := []struct {
		url, ref, name string
		ok             bool
	}{
		{ImageURL("q/mos@sha256:1", "/coreos/coreos-x86_64.iso"), "q/mos@sha256:1", "/coreos/coreos-x86_64.iso", true},
		{"https://x/a.iso", "", "", false},
		{"image://q/mos@sha256:1", "", "", false},
		{"image://q/mos@sha256:1#coreos/a.iso", "", "", false},
		{"image://#/a.iso", "", "", false},
	}
	for _, tc := range tests {
		ref, name, ok := ParseImageURL(tc.url)
		if ref != tc.ref || name != tc.name || ok != tc.ok {
			t.Errorf("ParseImageURL(%q) = %q, %q, %v; want %q, %q, %v", tc.url, ref, name, ok, tc.ref, tc.name, tc.ok)
		}
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
		{"image iso path escapes", `{"schemaVersion":1,"arch":"x86_64","images":[],"iso":{"url":"image://q/m@sha256:1#/coreos/c.iso","path":"../../etc/x","sha256":"aa","from":"machine-os-images"}}`, "leaves the stage output"},
		{"image iso without sha", `{"schemaVersion":1,"arch":"x86_64","images":[],"iso":{"url":"image://q/m@sha256:1#/coreos/c.iso","path":"iso/live.iso","from":"machine-os-images"}}`, "has no sha256"},
		{"bad image url", `{"schemaVersion":1,"arch":"x86_64","images":[],"iso":{"url":"image://q/m@sha256:1","from":"machine-os-images"}}`, "is not image://"},
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
