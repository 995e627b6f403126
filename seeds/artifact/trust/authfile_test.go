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

// Every certificate and key containers/image would read from a per-host certificate
// directory is read through smallfile first; other files, a missing directory and a
// host entry that is not a directory are left alone, as containers/image leaves them.
func TestCheckCertDirs(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		make       func(p string) error
		want       string
	}{
		{"a CA certificate that is a FIFO", "ca.crt", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"a client certificate that is /dev/zero", "client.cert", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"a key over the cap", "client.key", func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Truncate(p, MaxCertFile+1)
		}, "larger than 1048576 bytes"},
		{"a good CA certificate", "ca.crt", func(p string) error { return os.WriteFile(p, []byte("PEM"), 0o600) }, ""},
		{"a FIFO containers/image does not read", "README", func(p string) error { return syscall.Mkfifo(p, 0o600) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			host := filepath.Join(root, "certs.d", "registry.example.com:5000")
			os.MkdirAll(host, 0o700)
			os.WriteFile(filepath.Join(root, "certs.d", "stray"), nil, 0o600)
			p := filepath.Join(host, tc.file)
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			err := CheckCertDirs([]string{filepath.Join(root, "missing"), filepath.Join(root, "certs.d")})
			if tc.want == "" {
				if err != nil {
					t.Errorf("CheckCertDirs = %v", err)
				}
				return
			}
			if !badinput.Is(err) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckCertDirs = %v; want bad input naming %s and %q", err, p, tc.want)
			}
		})
	}
	if got := CertDirs("/home/u"); len(got) != 3 || got[0] != "/home/u/.config/containers/certs.d" {
		t.Errorf("CertDirs = %v; want the home directory's first, as containers/image looks", got)
	}
}
