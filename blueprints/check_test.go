package blueprints

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	for _, tc := range []struct {
		file       string
		ok         bool
		wantStdout string
		wantStderr string // a part of it
	}{
		{"demo.yaml", true, "demo.yaml: ok\n", ""},
		{"testdata/bad/firmware-enum.yaml", false, "", "testdata/bad/firmware-enum.yaml:11:15: spec.vm.firmware"},
		{filepath.Join(t.TempDir(), "missing.yaml"), false, "", "missing.yaml"},
		{t.TempDir(), false, "", "not a regular file"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			// Even a file that cannot be read is a problem with the blueprint, reported.
			r, err := CheckFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if r.File != tc.file || r.OK != tc.ok || (len(r.Problems) == 0) != tc.ok {
				t.Errorf("report %+v", r)
			}
			var stdout, stderr bytes.Buffer
			r.WriteText(&stdout, &stderr)
			if stdout.String() != tc.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) || (tc.wantStderr == "") != (stderr.Len() == 0) {
				t.Errorf("stderr %q, want it to hold %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

func TestLockPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"demo.yaml", "demo.lock.json"},
		{"dir/site.yml", "dir/site.lock.json"},
		{"noext", "noext.lock.json"},
		{"a.b/c.yaml", "a.b/c.lock.json"},
	} {
		if got := LockPath(tc.in); got != tc.want {
			t.Errorf("LockPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
