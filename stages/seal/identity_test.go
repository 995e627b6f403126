package seal

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/snofactory/snofactory/pipeline"
)

// The site identity is a secret of the seal stage only: the stage asks for it, its key
// depends on it by name (and digest), never by value, and a file that holds no identity is
// refused without being quoted.
func TestSiteIdentitySecret(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "site-identity.txt")
	bad := filepath.Join(dir, "not-an-identity.txt")
	os.WriteFile(good, []byte(id.String()+"\n"), 0o600)
	os.WriteFile(bad, []byte("XYZZY-not-a-key\n"), 0o600)

	if s := New(Options{}); len(s.Secrets) != 0 {
		t.Errorf("a seal without a site identity asks for %v", s.Secrets)
	}
	s := New(Options{SiteIdentity: true})
	if !slices.Equal(s.Secrets, []string{SecretSiteIdentity}) {
		t.Fatalf("the stage asks for %v", s.Secrets)
	}
	secrets := pipeline.SecretFiles{SecretSiteIdentity: good}
	s.Deps = nil // the key's inputs, without the upstream stages
	plan, err := pipeline.Plan(context.Background(), &pipeline.Graph{Blueprint: "t", Stages: []pipeline.Stage{s}}, &pipeline.Cache{Dir: t.TempDir()}, secrets, pipeline.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	kj, _ := json.Marshal(plan[0].Inputs)
	if strings.Contains(string(kj), strings.TrimPrefix(id.String(), "AGE-SECRET-KEY-")) || !strings.Contains(string(kj), SecretSiteIdentity) {
		t.Errorf("key inputs must name the identity secret, never hold it: %s", kj)
	}

	got, err := siteIdentity(secrets)
	if err != nil || strings.TrimSpace(got) != id.String() {
		t.Errorf("siteIdentity = %v, the identity: %v", err, strings.TrimSpace(got) == id.String())
	}
	_, err = siteIdentity(pipeline.SecretFiles{SecretSiteIdentity: bad})
	if err == nil || strings.Contains(err.Error(), "XYZZY") || !strings.Contains(err.Error(), SecretSiteIdentity) {
		t.Errorf("a bad identity: %v", err)
	}
	if _, err := siteIdentity(pipeline.SecretFiles{}); err == nil {
		t.Error("no identity configured: no error")
	}
}
