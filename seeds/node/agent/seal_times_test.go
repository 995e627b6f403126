package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// A coreos seal with a source date removes Ignition's record of the factory boot and
// leaves no file time after the source date, the marker it writes included; older times
// stay. Without a source date no time is touched.
func TestSealClampsTimes(t *testing.T) {
	date := time.Unix(1700000000, 0)
	old := date.Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		epoch int64
		steps []string // the steps after pull-secret
	}{
		{"with SOURCE_DATE_EPOCH", date.Unix(), []string{"ignition-config", "reconfigure-unit", "ignition-result", "sealed", "clamp-times"}},
		{"without", 0, []string{"ignition-config", "reconfigure-unit", "ignition-result", "sealed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, boot := t.TempDir(), t.TempDir()
			for p, body := range map[string]string{"etc/.ignition-result.json": `{"provisioningBootID":"x"}`, "etc/motd": "hi",
				"usr/bin/busybox": "bb", "var/lib/old": "o"} {
				os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
				os.WriteFile(filepath.Join(root, p), []byte(body), 0o644)
			}
			os.Symlink("busybox", filepath.Join(root, "usr/bin/sh"))
			os.Chtimes(filepath.Join(root, "var/lib/old"), old, old)
			os.MkdirAll(filepath.Join(boot, "ignition"), 0o755)
			os.WriteFile(filepath.Join(boot, "ignition", "config.ign"), []byte(`{}`), 0o600)
			os.WriteFile(filepath.Join(boot, "vmlinuz"), []byte("k"), 0o644)
			req := wire.SealRequest{Version: 1, Target: "coreos", SourceDateEpoch: tc.epoch}
			steps, err := Seal(context.Background(), root, boot, req, func(_ context.Context, name string, args ...string) ([]byte, error) {
				t.Errorf("a coreos seal ran %s %q", name, args)
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range steps {
				names = append(names, s.Name)
			}
			i := slices.Index(names, "pull-secret")
			if i < 0 || !slices.Equal(names[i+1:], tc.steps) {
				t.Errorf("steps %q, want %q after pull-secret", names, tc.steps)
			}
			if _, err := os.Stat(filepath.Join(root, "etc/.ignition-result.json")); !os.IsNotExist(err) {
				t.Errorf("Ignition's result survived the seal: %v", err)
			}
			late := 0
			for _, dir := range []string{root, boot} {
				filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
					if err != nil {
						t.Fatal(err)
					}
					if fi.ModTime().After(date) {
						late++
						if tc.epoch != 0 {
							t.Errorf("%s has mtime %s, after the source date", p, fi.ModTime())
						}
					}
					return nil
				})
			}
			if tc.epoch == 0 && late == 0 {
				t.Error("without a source date, file times were changed")
			}
			if fi, err := os.Stat(filepath.Join(root, "var/lib/old")); err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("a file older than the source date: %v, %v", fi.ModTime(), err)
			}
			if fi, err := os.Lstat(filepath.Join(root, "usr/bin/sh")); tc.epoch != 0 && (err != nil || !fi.ModTime().Equal(date)) {
				t.Errorf("the symbolic link itself: %v, %v", fi.ModTime(), err)
			}
			plan := Sealer{Root: root, BootDir: boot, Request: req}.Plan()
			if len(plan) != len(steps) {
				t.Errorf("ran %d steps, the plan has %d", len(steps), len(plan))
			}
		})
	}
}
