package trust

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/badinput"
)

// The auth file REGISTRY_AUTH_FILE names is read through smallfile before the signature
// check hands it to containers/image: a special or huge file is bad input naming it and
// the cap; a missing one is no credentials, as containers/image takes it.
func TestCheckAuthFile(t *testing.T) {
	dir := t.TempDir()
	fifo, huge, good := filepath.Join(dir, "fifo"), filepath.Join(dir, "huge"), filepath.Join(dir, "auth.json")
	syscall.Mkfifo(fifo, 0o600)
	os.WriteFile(huge, nil, 0o600)
	os.Truncate(huge, MaxAuthFile+1)
	os.WriteFile(good, []byte(`{"auths":{}}`), 0o600)
	for _, tc := range []struct{ file, want string }{
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
		{huge, "larger than 1048576 bytes"},
		{good, ""},
		{filepath.Join(dir, "missing"), ""},
		{"", ""},
	} {
		got, err := checkAuthFile(tc.file)
		if tc.want == "" {
			if err != nil || got != tc.file {
				t.Errorf("checkAuthFile(%q) = %q, %v; want it handed on", tc.file, got, err)
			}
			continue
		}
		if !badinput.Is(err) || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkAuthFile(%q) = %v; want bad input naming it and %q", tc.file, err, tc.want)
		}
	}
}
