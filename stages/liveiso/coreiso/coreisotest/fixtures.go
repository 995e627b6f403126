package coreisotest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// Dir finds shared/reference/coreos-installer-iso-fixtures by walking up from
// the test's working directory, so tests work from any checkout depth.
func Dir(t testing.TB) string {
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

// Names lists the fixture ISOs (without .xz), sorted, keeping those keep
// accepts (all when keep is nil); matching none fails the test.
func Names(t testing.TB, keep func(string) bool) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(Dir(t), "*.iso.xz"))
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

// Fixture decompresses the fixture ISO name (e.g. "embed-areas-2023-07.x86_64.iso")
// into a fresh temporary directory and returns its path.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	src, err := os.Open(filepath.Join(Dir(t), name+".xz"))
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

// SHA256 is the hex sha256 of the file at path, as a lock records an ISO's.
func SHA256(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
