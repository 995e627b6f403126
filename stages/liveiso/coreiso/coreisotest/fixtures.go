package coreisotest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// FixturesEnv names the fixture directory when it is not the one Locate finds.
const FixturesEnv = "SNOFACTORY_ISO_FIXTURES"

// fixturesRel is where the fixtures live relative to a directory above the checkout: the
// project's shared/ beside the repository, as CI lays it out.
var fixturesRel = filepath.Join("shared", "reference", "coreos-installer-iso-fixtures")

// Locate is the one way to the fixture ISOs: $SNOFACTORY_ISO_FIXTURES when set, else
// shared/reference/coreos-installer-iso-fixtures in the nearest directory above the
// working directory (or above start, when given) that has it.
func Locate(starts ...string) (string, error) {
	if d := os.Getenv(FixturesEnv); d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s=%s is not a directory of fixture ISOs", FixturesEnv, d)
		}
		return d, nil
	}
	if len(starts) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		starts = []string{wd}
	}
	for _, dir := range starts {
		for {
			cand := filepath.Join(dir, fixturesRel)
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("the coreos-installer fixture ISOs (%s) are not above %s: lay the project's shared/ beside the checkout, or set %s",
		fixturesRel, strings.Join(starts, ", "), FixturesEnv)
}

// Dir is Locate for a test: without the fixtures the test fails, loudly, never skips.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := Locate()
	if err != nil {
		t.Fatal(err)
	}
	return d
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
