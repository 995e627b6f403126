package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// Outputs are replaced, not written through: an earlier file's other links keep its old
// contents, and a config that carries a secret ends 0600 whatever mode the old file had.
func TestOutputsReplaceEarlierFiles(t *testing.T) {
	out := t.TempDir()
	old := filepath.Join(out, filepath.FromSlash(ConfigPath))
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "published.ign")
	if err := os.Link(old, other); err != nil {
		t.Fatal(err)
	}
	o := Options{Target: oskind.CoreOS, IgnitionVersion: "3.3.0", SSHKey: true}
	if err := Render(t.Context(), o, testSecrets(t), out, testLog(t)); err != nil {
		t.Fatal(err)
	}
	cfg := mustRead(t, old)
	if !strings.Contains(string(cfg), testSSHKey) {
		t.Fatalf("config.ign was not rewritten with the SSH key:\n%s", cfg)
	}
	if st, err := os.Stat(old); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config.ign mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if got := string(mustRead(t, other)); got != "old\n" {
		t.Errorf("another link to the earlier config.ign now holds %q: the new config was written through it", got)
	}
	if st, err := os.Stat(other); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("the earlier file's mode changed to %v (%v)", st.Mode().Perm(), err)
	}
}
