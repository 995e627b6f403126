package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	"golang.org/x/sys/unix"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/test/testbin"
)

// copySite copies the test site config and the files it names into a directory of the
// test's own, so the cases may aim outputs at them.
func copySite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "../../seeds/site/siteconfig/testdata"
	for _, f := range []string{"site.yaml", "pull-secret.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(filepath.Join(dir, "manifests"), os.DirFS(filepath.Join(src, "manifests"))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "site.yaml")
}

// charDevice is a character device to aim an output at: a null device (1:3) made in dir
// when the test may make one, else /dev/null. Never /dev/null as root: a regression would
// replace the machine's /dev/null with a regular file.
func charDevice(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return "/dev/null"
	}
	p := filepath.Join(dir, "null")
	if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("making a character device: %v", err)
	}
	return p
}

// fileState is what a refused command must leave as it was.
type fileState struct {
	data  []byte
	mtime time.Time
	mode  os.FileMode
}

func stateOf(t *testing.T, path string) *fileState {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	st := &fileState{mtime: fi.ModTime(), mode: fi.Mode()}
	if fi.Mode().IsRegular() {
		st.data, _ = os.ReadFile(path)
	}
	return st
}

// Every file site-config create writes goes through the output rules, checked before
// anything is written: --credentials-out may not be its input, a read-only file, a
// character device, or the medium's own file (the credentials would be lost while both
// are reported written). A refusal is exit 2, names the path and the rule, and leaves
// every file as it was.
func TestSiteConfigCreateOutputsRefused(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// paths returns -o and --credentials-out, given the site config.
		paths func(site string) (iso, creds string)
		want  string
	}{
		{"credentials on the medium", func(s string) (string, string) {
			iso := filepath.Join(filepath.Dir(s), "site.iso")
			return iso, iso
		}, "--credentials-out names the same file as -o"},
		{"credentials on the medium through a symlink", func(s string) (string, string) {
			iso := filepath.Join(filepath.Dir(s), "site.iso")
			os.Symlink(iso, filepath.Join(filepath.Dir(s), "creds.age"))
			return iso, filepath.Join(filepath.Dir(s), "creds.age")
		}, "names the same file as -o"},
		{"credentials on the site config", func(s string) (string, string) {
			return filepath.Join(filepath.Dir(s), "site.iso"), s
		}, "is this command's input"},
		{"credentials on the pull secret it names", func(s string) (string, string) {
			return filepath.Join(filepath.Dir(s), "site.iso"), filepath.Join(filepath.Dir(s), "pull-secret.json")
		}, "is this command's input"},
		{"credentials on a read-only file", func(s string) (string, string) {
			ro := filepath.Join(filepath.Dir(s), "ro.age")
			os.WriteFile(ro, []byte("keep"), 0o444)
			return filepath.Join(filepath.Dir(s), "site.iso"), ro
		}, "is a read-only file"},
		{"credentials on a character device", func(s string) (string, string) {
			return filepath.Join(filepath.Dir(s), "site.iso"), charDevice(t, filepath.Dir(s))
		}, "is a character device"},
		{"the default credentials file read-only", func(s string) (string, string) {
			iso := filepath.Join(filepath.Dir(s), "site.iso")
			os.WriteFile(iso+".credentials.age", []byte("keep"), 0o444)
			return iso, ""
		}, "is a read-only file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := copySite(t)
			iso, creds := tc.paths(site)
			watched := []string{site, iso, filepath.Join(filepath.Dir(site), "pull-secret.json"), iso + ".credentials.age"}
			if creds != "" {
				watched = append(watched, creds)
			}
			before := map[string]*fileState{}
			for _, p := range watched {
				before[p] = stateOf(t, p)
			}
			entries := listDir(site)
			args := []string{"site-config", "create", site, "-o", iso, "--credentials-recipient", id.Recipient().String()}
			if creds != "" {
				args = append(args, "--credentials-out", creds)
			}
			code, out, errOut := runMain(t, args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q\n%s", code, errOut, tc.want, out)
			}
			named := creds
			if named == "" {
				named = iso + ".credentials.age"
			}
			if !strings.Contains(errOut, named) {
				t.Errorf("the message does not name %s: %s", named, errOut)
			}
			for p, was := range before {
				now := stateOf(t, p)
				if (was == nil) != (now == nil) || was != nil && (!bytes.Equal(was.data, now.data) || !was.mtime.Equal(now.mtime) || was.mode != now.mode) {
					t.Errorf("%s changed: %+v -> %+v", p, was, now)
				}
			}
			if after := listDir(site); strings.Join(after, " ") != strings.Join(entries, " ") {
				t.Errorf("files appeared or went: %v -> %v", entries, after)
			}
		})
	}
}

// depot status prints names that came from depot.json: an escape sequence or a carriage
// return there is printed escaped, never sent to the terminal.
func TestDepotStatusEscapesRecordNames(t *testing.T) {
	dir := t.TempDir()
	doc := `{"status":"succeeded","started":"2026-01-01T00:00:00Z","builds":[` +
		`{"name":"site-\u001b[31ma","status":"succeeded","outputDir":"out/\rOK"},` +
		`{"name":"plain","status":"succeeded"}]}`
	os.WriteFile(filepath.Join(dir, "depot.json"), []byte(doc), 0o644)
	code, out, errOut := runMain(t, "depot", "status", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\r") {
		t.Errorf("control characters reached the terminal: %q", out)
	}
	for _, want := range []string{`"site-\x1b[31ma"`, `"out/\rOK"`, "plain "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// A depot's status file is written by the depot itself, never a symlink: one there is
// refused, not followed to whatever it points at.
func TestDepotStatusRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	os.WriteFile(target, []byte(`{"status":"succeeded","started":"2026-01-01T00:00:00Z","builds":[{"name":"secret-name"}]}`), 0o644)
	os.Symlink(target, filepath.Join(dir, "depot.json"))
	code, out, errOut := runMain(t, "depot", "status", dir)
	if code != exitBadInput || !strings.Contains(errOut, "depot.json") || !strings.Contains(errOut, "symlink") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming depot.json as a symlink", code, errOut)
	}
	if strings.Contains(out, "secret-name") {
		t.Errorf("the symlink was followed: %s", out)
	}
}

// seed push to an oci-archive: or an oci: layout writes a file or a directory the user
// names: the archive goes through the output rules (never the seed's own files, a
// read-only file or a character device), the layout may not be, hold or lie inside the
// seed directory. A refusal is exit 2 before any blob is read, names the path and the
// rule, and leaves the seed as it was; a good archive is written and reads back.
func TestSeedPushOutputsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  func(t *testing.T, seedDir, disk string) string
		want string
	}{
		{"archive over the seed's disk", func(_ *testing.T, _, disk string) string { return "oci-archive:" + disk + ":v1" }, "is this command's input"},
		{"archive over seed.json", func(_ *testing.T, s, _ string) string {
			return "oci-archive:" + filepath.Join(s, seed.ManifestFile) + ":v1"
		}, "is this command's input"},
		{"archive over a read-only file", func(t *testing.T, _, _ string) string {
			ro := filepath.Join(t.TempDir(), "ro.tar")
			os.WriteFile(ro, []byte("keep"), 0o444)
			return "oci-archive:" + ro + ":v1"
		}, "is a read-only file"},
		{"archive on a character device", func(t *testing.T, _, _ string) string {
			return "oci-archive:" + charDevice(t, t.TempDir()) + ":v1"
		}, "is a character device"},
		{"archive in a missing directory", func(t *testing.T, _, _ string) string {
			return "oci-archive:" + filepath.Join(t.TempDir(), "no", "a.tar") + ":v1"
		}, "its directory does not exist"},
		{"layout in the seed directory", func(_ *testing.T, s, _ string) string { return "oci:" + s + ":v1" }, "the oci: layout holds this command's input"},
		{"layout inside the seed directory", func(_ *testing.T, s, _ string) string {
			return "oci:" + filepath.Join(s, "layout") + ":v1"
		}, "the oci: layout is inside the seed directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := hostileSeed(t, nil)
			m, err := seed.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			ref := tc.ref(t, dir, filepath.Join(dir, m.Disks[0].File))
			target := ref[strings.Index(ref, ":")+1 : strings.LastIndex(ref, ":")]
			before := map[string]*fileState{target: stateOf(t, target)}
			for _, p := range m.Paths(dir) {
				before[p] = stateOf(t, p)
			}
			inSeed := filepath.Join(dir, seed.ManifestFile) // listDir lists beside it
			entries := listDir(inSeed)
			code, out, errOut := runMain(t, "seed", "push", dir, ref)
			if code != exitBadInput || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, target) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %s and %q\n%s", code, errOut, target, tc.want, out)
			}
			for p, was := range before {
				now := stateOf(t, p)
				if (was == nil) != (now == nil) || was != nil && (!bytes.Equal(was.data, now.data) || !was.mtime.Equal(now.mtime) || was.mode != now.mode) {
					t.Errorf("%s changed: %+v -> %+v", p, was, now)
				}
			}
			if after := listDir(inSeed); strings.Join(after, " ") != strings.Join(entries, " ") {
				t.Errorf("files appeared in the seed directory or went: %v -> %v", entries, after)
			}
		})
	}
	t.Run("a new archive", func(t *testing.T) {
		dir := hostileSeed(t, nil)
		out := t.TempDir()
		archive := filepath.Join(out, "seed.tar")
		if code, _, errOut := runMain(t, "seed", "push", dir, "oci-archive:"+archive+":v1"); code != 0 {
			t.Fatalf("push: exit %d: %s", code, errOut)
		}
		if got := listDir(archive); len(got) != 1 || got[0] != "seed.tar" {
			t.Errorf("beside the archive: %v, want the archive alone", got)
		}
		if code, _, errOut := runMain(t, "seed", "pull", "oci-archive:"+archive+":v1", filepath.Join(out, "pulled")); code != 0 {
			t.Fatalf("pull: exit %d: %s", code, errOut)
		}
	})
}

// seed write --image REF checks --device by the output rules before it pulls anything: a
// character device, a read-only file or a path in a missing directory is exit 2, naming
// --device and the rule, with no request sent to the registry and the target untouched.
func TestSeedWriteDeviceRefusedBeforePull(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/seeds/demo:v1"
	for _, tc := range []struct {
		name   string
		device func(t *testing.T) string
		want   string
	}{
		{"a character device", func(t *testing.T) string { return charDevice(t, t.TempDir()) }, "is a character device"},
		{"a read-only file", func(t *testing.T) string {
			ro := filepath.Join(t.TempDir(), "disk.img")
			os.WriteFile(ro, []byte("keep"), 0o444)
			return ro
		}, "is a read-only file"},
		{"a missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "no", "disk.img") }, "its directory does not exist"},
		{"a directory", func(t *testing.T) string { return t.TempDir() }, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := tc.device(t)
			was := stateOf(t, dev)
			beside := listDir(dev)
			requests.Store(0)
			code, out, errOut := runMain(t, "seed", "write", "--image", ref, "--device", dev)
			if code != exitBadInput || !strings.Contains(errOut, "--device "+dev) || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming --device %s and %q\n%s", code, errOut, dev, tc.want, out)
			}
			if n := requests.Load(); n != 0 || strings.Contains(out, "Pulled") {
				t.Errorf("%d requests sent, stdout %q: the seed was fetched before --device was refused", n, out)
			}
			if now := stateOf(t, dev); (was == nil) != (now == nil) || was != nil && (!bytes.Equal(was.data, now.data) || was.mode != now.mode) {
				t.Errorf("%s changed: %+v -> %+v", dev, was, now)
			}
			if after := listDir(dev); strings.Join(after, " ") != strings.Join(beside, " ") {
				t.Errorf("files appeared beside %s or went: %v -> %v", dev, beside, after)
			}
		})
	}
}

// seed pull REF DIR checks DIR by the output rules before it asks the registry anything:
// an existing file, or a directory that is the --from seed, lies inside it or holds it (a
// seed directory or a raw disk file), is exit 2 naming DIR, the rule and the fix, with no
// request sent, and --from and DIR left as they were.
func TestSeedPullDirRefusedBeforePull(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/seeds/demo:v1"
	for _, tc := range []struct {
		name string
		// paths returns --from ("" for none) and DIR, given a seed directory.
		paths func(t *testing.T, old string) (from, dir string)
		want  string
	}{
		{"DIR is a regular file", func(t *testing.T, _ string) (string, string) {
			f := filepath.Join(t.TempDir(), "seed.img")
			os.WriteFile(f, []byte("keep"), 0o644)
			return "", f
		}, "DIR is not a directory"},
		{"DIR is the --from seed", func(_ *testing.T, old string) (string, string) { return old, old }, "DIR is the same directory as --from"},
		{"DIR is the --from seed through a symlink", func(t *testing.T, old string) (string, string) {
			link := filepath.Join(t.TempDir(), "link")
			os.Symlink(old, link)
			return old, link
		}, "DIR is the same directory as --from"},
		{"DIR is inside the --from seed", func(_ *testing.T, old string) (string, string) {
			return old, filepath.Join(old, "new")
		}, "DIR is inside --from"},
		{"DIR holds the --from seed", func(_ *testing.T, old string) (string, string) {
			return old, filepath.Dir(old)
		}, "DIR holds --from"},
		{"DIR holds the --from raw disk", func(_ *testing.T, old string) (string, string) {
			return filepath.Join(old, "disk.raw.zst"), old
		}, "DIR holds --from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := hostileSeed(t, nil)
			from, dir := tc.paths(t, old)
			watched := map[string]*fileState{dir: stateOf(t, dir)}
			m, err := seed.ReadManifest(old)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Paths(old) {
				watched[p] = stateOf(t, p)
			}
			entries := listDir(filepath.Join(old, seed.ManifestFile))
			args := []string{"seed", "pull", ref, dir}
			if from != "" {
				args = append(args, "--from", from)
			}
			requests.Store(0)
			code, out, errOut := runMain(t, args...)
			if code != exitBadInput || !strings.Contains(errOut, dir+": "+tc.want) || !strings.Contains(errOut, "pull into a new directory") {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %s, %q and the fix\n%s", code, errOut, dir, tc.want, out)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests sent: the registry was asked before DIR was refused", n)
			}
			for p, was := range watched {
				if now := stateOf(t, p); (was == nil) != (now == nil) || was != nil && (!bytes.Equal(was.data, now.data) || was.mode != now.mode) {
					t.Errorf("%s changed: %+v -> %+v", p, was, now)
				}
			}
			if after := listDir(filepath.Join(old, seed.ManifestFile)); strings.Join(after, " ") != strings.Join(entries, " ") {
				t.Errorf("files appeared in the --from seed or went: %v -> %v", entries, after)
			}
		})
	}
}

// keys generate writes PREFIX.key and PREFIX.pub through the output rules: a key file that
// would be the passphrase file, a character device or a path in a missing directory is
// refused with exit 2 before a key is made; an existing key is never overwritten. A write
// that fails (here: no file may grow, as on a full disk) is exit 1, not the user's input,
// and leaves neither file behind.
func TestKeysGenerateOutputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prefix returns PREFIX and the passphrase file, in dir.
		prefix func(t *testing.T, dir string) (string, string)
		fsize  bool // run with RLIMIT_FSIZE 0: every write fails
		code   int
		want   string
	}{
		{"the public key on the passphrase file", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "k"), filepath.Join(dir, "k.pub")
		}, false, exitBadInput, "is this command's input"},
		{"the private key on a character device", func(t *testing.T, dir string) (string, string) {
			if os.Geteuid() != 0 {
				t.Skip("making a character device needs root")
			}
			if err := unix.Mknod(filepath.Join(dir, "k.key"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Skipf("making a character device: %v", err)
			}
			return filepath.Join(dir, "k"), filepath.Join(dir, "pass")
		}, false, exitBadInput, "the private key " + "%DIR%/k.key: is a character device"},
		{"a missing directory", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "no", "k"), filepath.Join(dir, "pass")
		}, false, exitBadInput, "its directory does not exist"},
		{"an existing public key", func(t *testing.T, dir string) (string, string) {
			os.WriteFile(filepath.Join(dir, "k.pub"), []byte("keep"), 0o644)
			return filepath.Join(dir, "k"), filepath.Join(dir, "pass")
		}, false, exitBadInput, "k.pub exists: a key is never overwritten"},
		{"a write that fails", func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "k"), filepath.Join(dir, "pass")
		}, true, exitFailed, "k.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			prefix, pass := tc.prefix(t, dir)
			if _, err := os.Stat(pass); err != nil {
				os.WriteFile(pass, []byte("hunter2\n"), 0o600)
			}
			before := map[string]*fileState{}
			for _, p := range []string{prefix + ".key", prefix + ".pub", pass} {
				before[p] = stateOf(t, p)
			}
			entries := listDir(pass)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			code, out, errOut := testbin.RunChild(ctx, t, snofactoryBin.Path(t), []string{"keys", "generate", "--passphrase-file", pass, prefix},
				func(c *exec.Cmd) {
					if tc.fsize {
						c.Args = append([]string{c.Args[0], "--fsize=0:0"}, c.Args[1:]...)
					}
				})
			want := strings.ReplaceAll(tc.want, "%DIR%", dir)
			if code != tc.code || !strings.Contains(errOut, want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q\n%s", code, errOut, tc.code, want, out)
			}
			if strings.Contains(out+errOut, "hunter2") {
				t.Errorf("the passphrase reached the output: %q", out+errOut)
			}
			for p, was := range before {
				now := stateOf(t, p)
				if (was == nil) != (now == nil) || was != nil && (!bytes.Equal(was.data, now.data) || !was.mtime.Equal(now.mtime) || was.mode != now.mode) {
					t.Errorf("%s changed: %+v -> %+v", p, was, now)
				}
			}
			if after := listDir(pass); strings.Join(after, " ") != strings.Join(entries, " ") {
				t.Errorf("files appeared or went: %v -> %v", entries, after)
			}
		})
	}
}
