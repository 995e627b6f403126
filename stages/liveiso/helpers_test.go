package liveiso

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// fixtureDir finds shared/reference/coreos-installer-iso-fixtures by walking
// up from the package directory, so tests work from any checkout depth.
func fixtureDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		cand := filepath.Join(dir, "shared", "reference", "coreos-installer-iso-fixtures")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("shared/reference/coreos-installer-iso-fixtures not found above the package directory")
		}
		dir = parent
	}
}

// fixtureNames lists the fixture ISOs (without .xz), optionally filtered.
func fixtureNames(t testing.TB, keep func(string) bool) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(fixtureDir(t), "*.iso.xz"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range m {
		n := strings.TrimSuffix(filepath.Base(p), ".xz")
		if keep == nil || keep(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("no fixtures matched")
	}
	return out
}

func isX86(n string) bool {
	return strings.HasPrefix(n, "embed-areas-") && !strings.Contains(n, "s390x")
}
func isS390x(n string) bool { return strings.Contains(n, "s390x") }

// fixture decompresses a fixture ISO into a fresh temporary directory.
func fixture(t testing.TB, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join(fixtureDir(t), name+".xz"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	zr, err := xz.NewReader(src)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	dst := filepath.Join(t.TempDir(), name)
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, zr); err != nil {
		t.Fatalf("decompressing %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func run(t testing.TB, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}
