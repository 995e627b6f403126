package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretSet(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ps")
	if err := os.WriteFile(f, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := SecretSet{Files: SecretFiles{"a": f, "b": f}, Values: map[string][]byte{"b": []byte("inline")}}
	for name, want := range map[string]string{"a": "from-file", "b": "inline"} {
		if got, err := s.Secret(name); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if _, err := s.Secret("c"); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("missing secret: %v", err)
	}
}
