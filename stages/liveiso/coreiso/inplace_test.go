package coreiso

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snofactory/snofactory/stages/liveiso/coreiso/coreisotest"
	"github.com/snofactory/snofactory/test/testbin"
)

// strategies are the two ways an embed reaches an ISO; changing a file in
// place must mean the same for both.
var strategies = []struct {
	name Strategy
	cfg  func() []byte
}{
	{StrategyPatch, func() []byte { return testConfig("in-place") }},
	{StrategyRebuild, func() []byte { return bigConfig(400 << 10) }},
}

// embedInPlace embeds cfg into the ISO at p in place and checks the strategy.
func embedInPlace(t *testing.T, p string, cfg []byte, want Strategy) {
	t.Helper()
	rep, err := Customize(context.Background(), p, "", Customization{Ignition: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Strategy != want || !rep.InPlace {
		t.Fatalf("report %+v, want %s in place", rep, want)
	}
}

func statT(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t)
}

// TestInPlaceKeepsTheFile: in place means the file the user named, on both
// strategies: a symlink's target is written and the link stays, a hard link
// keeps sharing the inode, and mode and owner are kept.
func TestInPlaceKeepsTheFile(t *testing.T) {
	testbin.Require(t, "xorriso", "xorriso")
	for _, s := range strategies {
		t.Run(string(s.name)+"/symlink", func(t *testing.T) {
			target := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
			link := filepath.Join(t.TempDir(), "link.iso")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			cfg := s.cfg()
			embedInPlace(t, link, cfg, s.name)
			if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("the symlink was replaced: %v, %v", st.Mode(), err)
			}
			if got, err := ShowIgnition(target); err != nil || !bytes.Equal(got, cfg) {
				t.Fatalf("the link's target does not hold the config: %d bytes, %v", len(got), err)
			}
			assertNoLeftovers(t, filepath.Dir(target), filepath.Dir(link))
		})
		t.Run(string(s.name)+"/hard link", func(t *testing.T) {
			a := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
			b := filepath.Join(filepath.Dir(a), "other-name.iso")
			if err := os.Link(a, b); err != nil {
				t.Fatal(err)
			}
			ino := statT(t, a).Ino
			cfg := s.cfg()
			embedInPlace(t, a, cfg, s.name)
			if st := statT(t, a); st.Ino != ino || st.Nlink != 2 {
				t.Fatalf("inode %d with %d links, want %d with 2: the hard link was split", st.Ino, st.Nlink, ino)
			}
			if got, err := ShowIgnition(b); err != nil || !bytes.Equal(got, cfg) {
				t.Fatalf("the other name does not see the config: %d bytes, %v", len(got), err)
			}
		})
		for _, mode := range []os.FileMode{0o640, 0o444} { // 0444 is writable only for root
			t.Run(fmt.Sprintf("%s/mode %o and owner", s.name, mode), func(t *testing.T) {
				if mode == 0o444 && os.Geteuid() != 0 {
					t.Skip("refused for users: TestInPlaceReadOnly")
				}
				p := coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso")
				uid, gid := os.Geteuid(), os.Getegid()
				if uid == 0 {
					uid, gid = 65534, 65534 // root may give the file away; keeping it is the point
					if err := os.Chown(p, uid, gid); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
				embedInPlace(t, p, s.cfg(), s.name)
				if st, _ := os.Stat(p); st.Mode().Perm() != mode {
					t.Errorf("mode %v after the embed, want %v", st.Mode().Perm(), mode)
				}
				if sys := statT(t, p); int(sys.Uid) != uid || int(sys.Gid) != gid {
					t.Errorf("owner %d:%d after the embed, want %d:%d", sys.Uid, sys.Gid, uid, gid)
				}
			})
		}
	}
}

// assertNoLeftovers fails if a rebuild left work files in dirs.
func assertNoLeftovers(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name()[0] == '.' {
				t.Errorf("left behind in %s: %s", d, e.Name())
			}
		}
	}
}

// readOnlyISOEnv hands TestInPlaceReadOnly's unprivileged child its ISO.
const readOnlyISOEnv = "COREISO_TEST_READONLY_ISO"

// TestInPlaceReadOnly: a user who may not write a 0444 ISO (in a directory
// they may write) gets the same refusal from both strategies, and the file
// stays as it was. Run as root, the check runs in a child as user nobody.
func TestInPlaceReadOnly(t *testing.T) {
	if p := os.Getenv(readOnlyISOEnv); p != "" {
		checkReadOnlyRefused(t, p)
		return
	}
	dir, err := os.MkdirTemp("", "coreiso-readonly-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "live.iso")
	if err := os.Rename(coreisotest.Fixture(t, "embed-areas-2023-07.x86_64.iso"), p); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		checkReadOnlyRefused(t, p)
		return
	}
	// The test binary's own directory is private to root: run a copy.
	bin := filepath.Join(dir, "coreiso.test")
	copyExecutable(t, bin)
	cmd := exec.Command(bin, "-test.run=^TestInPlaceReadOnly$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), readOnlyISOEnv+"="+p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as user nobody: %v\n%s", err, out)
	}
}

func checkReadOnlyRefused(t *testing.T, p string) {
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, s := range strategies {
		_, err := Customize(context.Background(), p, "", Customization{Ignition: s.cfg()})
		if !errors.Is(err, fs.ErrPermission) || !IsBadInput(err) {
			t.Errorf("%s: error = %v, want a permission refusal (bad input)", s.name, err)
		}
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 2 && msgs[0] != msgs[1] {
		t.Errorf("the strategies refuse differently:\n%s\n%s", msgs[0], msgs[1])
	}
	after, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); !bytes.Equal(after, before) || st.Mode().Perm() != 0o444 {
		t.Errorf("the read-only ISO changed (mode %v)", st.Mode().Perm())
	}
	assertNoLeftovers(t, filepath.Dir(p))
}

// copyExecutable copies the running test binary to dst, runnable by anyone.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
