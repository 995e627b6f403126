package agent

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// The seal places the site identity, 0600, on both targets, replacing a world-readable one
// left by an earlier seal, and keeps it out of the sealed marker and out of every detail.
func TestSealPlacesSiteIdentity(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	secret := id.String()
	for _, tc := range []struct {
		name   string
		sealer func(t *testing.T) Sealer
	}{
		{"coreos", func(t *testing.T) Sealer {
			return Sealer{Root: t.TempDir(), Request: wire.SealRequest{Version: 1, Target: "coreos"},
				Run: func(_ context.Context, name string, _ ...string) ([]byte, error) {
					t.Errorf("a coreos seal ran %s", name)
					return nil, nil
				}}
		}},
		{"openshift", func(t *testing.T) Sealer { return newSealNode(t).sealer() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sealer(t)
			s.Request.SiteIdentity = secret + "\n"
			stale := filepath.Join(s.Root, siteconfig.NodeIdentityFile)
			os.MkdirAll(filepath.Dir(stale), 0o755)
			os.WriteFile(stale, []byte("stale"), 0o644)
			done, err := s.Seal(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(stale)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", siteconfig.NodeIdentityFile, fi.Mode().Perm())
			}
			b, _ := os.ReadFile(stale)
			ids, err := siteconfig.ParseIdentities(b)
			if err != nil || len(ids) != 1 {
				t.Fatalf("the placed identity does not parse: %v", err)
			}
			if got := ids[0].(*age.X25519Identity).Recipient().String(); got != id.Recipient().String() {
				t.Errorf("placed identity opens for %s, want %s", got, id.Recipient())
			}
			if !slices.Contains(planNames(s.Plan()), "site-identity") {
				t.Errorf("the dry run does not list the site-identity step: %v", planNames(s.Plan()))
			}
			for _, d := range done {
				if strings.Contains(d.Detail, "AGE-SECRET-KEY") {
					t.Errorf("step %s's detail quotes the identity", d.Name)
				}
			}
			// Nothing else on the node holds it: the marker keeps the request without it.
			filepath.WalkDir(s.Root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || p == stale {
					return err
				}
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "AGE-SECRET-KEY") {
					t.Errorf("%s holds the identity", p)
				}
				return nil
			})
			if b, err := os.ReadFile(filepath.Join(s.Root, wire.SealedFile)); err != nil || strings.Contains(string(b), "siteIdentity") {
				t.Errorf("%s: %v, %s", wire.SealedFile, err, b)
			}
		})
	}
}

// A request whose identity is not one fails the seal, naming the step, not the value.
func TestSealRefusesABadSiteIdentity(t *testing.T) {
	s := Sealer{Root: t.TempDir(), Request: wire.SealRequest{Version: 1, Target: "coreos", SiteIdentity: "not-a-key-XYZZY"}}
	_, err := s.Seal(context.Background())
	if err == nil || !strings.Contains(err.Error(), "site-identity") || strings.Contains(err.Error(), "XYZZY") {
		t.Errorf("seal with a bad identity: %v", err)
	}
}
