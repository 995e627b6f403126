package seedref_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/pipeline/badinput"
	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

// Each kind of bad argument is the caller's input, with a message naming it.
func TestOpenRefusesBadArguments(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct{ ref, want string }{
		{empty, "is not a seed directory: it holds no " + seed.ManifestFile},
		{"./nope", "no such seed directory: ./nope"},
		{"oci:" + filepath.Join(empty, "none"), "no such OCI layout directory"},
		{"oci-archive:" + filepath.Join(empty, "none.tar"), "no such OCI archive"},
		{"seeds/du:1", "names no registry"},
	} {
		_, err := seedref.Open(context.Background(), tc.ref)
		var ie *badinput.Error
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an input error saying %q", tc.ref, err, tc.want)
		}
	}
}

// A local seed is used where it is; with RemoteOnly the same path is read as a reference.
func TestOpenLocal(t *testing.T) {
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}})
	s, err := seedref.Open(context.Background(), dir)
	if err != nil || !s.Local() || s.Registry() {
		t.Fatalf("Open(%s) = %+v, %v", dir, s, err)
	}
	got, done, err := s.Dir(context.Background())
	if err != nil || got != dir || done() != nil {
		t.Errorf("Dir = %s, %v", got, err)
	}
	if _, err := seedref.Open(context.Background(), dir, seedref.RemoteOnly()); err == nil {
		t.Error("RemoteOnly took a directory")
	}
}

// A seed refused by the trust policy is refused before anything is staged or pulled.
func TestPolicyBeforeUse(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}})
	layout := "oci:" + filepath.Join(t.TempDir(), "layout")
	if _, err := ociseed.Push(ctx, src, layout); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(t.TempDir(), "policy.json")
	os.WriteFile(policy, []byte(`{"default":[{"type":"reject"}]}`), 0o644)
	staging := filepath.Join(t.TempDir(), "staging")
	pulled := filepath.Join(t.TempDir(), "pulled")
	s, err := seedref.Open(ctx, layout, seedref.WithPolicy(trust.Policy{File: policy}), seedref.WithStagingDir(staging))
	if err != nil {
		t.Fatal(err)
	}
	var ie *badinput.Error
	if _, _, err := s.Dir(ctx); !errors.As(err, &ie) || !errors.Is(err, trust.ErrUntrusted) {
		t.Errorf("Dir under a rejecting policy: %v", err)
	}
	if _, err := s.Pull(ctx, pulled); !errors.As(err, &ie) || !errors.Is(err, trust.ErrUntrusted) {
		t.Errorf("Pull under a rejecting policy: %v", err)
	}
	for _, p := range []string{staging, pulled} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was made for a refused seed", p)
		}
	}
	// Metadata is read without the policy: inspecting a seed is how one learns why.
	if m, _, err := s.Inspect(ctx, nil); err != nil || m == nil {
		t.Errorf("Inspect: %v", err)
	}
	accept := filepath.Join(t.TempDir(), "accept.json")
	os.WriteFile(accept, []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o644)
	s, err = seedref.Open(ctx, layout, seedref.WithPolicy(trust.Policy{File: accept}), seedref.WithStagingDir(staging))
	if err != nil {
		t.Fatal(err)
	}
	dir, done, err := s.Dir(ctx)
	if err != nil || dir != staging {
		t.Fatalf("Dir under an accepting policy = %s, %v", dir, err)
	}
	if err := done(); err != nil {
		t.Error(err)
	}
	if _, err := seed.Check(dir); err != nil {
		t.Errorf("the staged seed: %v", err)
	}
}

// A policy named for the command is read through smallfile whatever the seed, a local
// directory (which it does not apply to) included: a FIFO, /dev/zero or a huge file given
// as --policy is bad input naming it, never ignored and never blocking.
func TestOpenReadsTheNamedPolicy(t *testing.T) {
	local := t.TempDir()
	seedtest.Write(t, local, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}})
	for _, tc := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"/dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file"},
		{"over the cap", func(p string) error { return os.Truncate(p, trust.MaxPolicyFile+1) }, "larger than 1048576 bytes"},
		{"malformed", func(p string) error { return os.WriteFile(p, []byte(`{"default":[}`), 0o600) }, "the trust policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "policy.json")
			os.WriteFile(p, nil, 0o600)
			if tc.name != "over the cap" {
				os.Remove(p)
			}
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			_, err := seedref.Open(context.Background(), local, seedref.WithPolicy(trust.Policy{File: p}))
			if !badinput.Is(err) || !strings.Contains(fmt.Sprint(err), p) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("Open = %v; want bad input naming %s and saying %q", err, p, tc.want)
			}
		})
	}
}
