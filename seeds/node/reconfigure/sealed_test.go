package reconfigure

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// sealedMedium writes testdata/site.yaml (which has a pull secret) on a medium with its
// secrets sealed to r, signed by k when given.
func sealedMedium(t *testing.T, r age.Recipient, k *siteKey) (path, pullSecret string) {
	t.Helper()
	sc, err := siteconfig.Load(filepath.Join("..", "..", "site", "siteconfig", "testdata", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pullSecret = sc.Spec.PullSecret
	if err := sc.EncryptSecrets([]age.Recipient{r}); err != nil {
		t.Fatal(err)
	}
	o := siteconfig.MediumOptions{}
	if k != nil {
		o.Signer = k.signer
	}
	path = filepath.Join(t.TempDir(), "sealed.iso")
	if err := siteconfig.WriteMedium(context.Background(), sc, path, o); err != nil {
		t.Fatal(err)
	}
	return path, pullSecret
}

// installIdentity puts the node's age identity where render puts it.
func (h *harness) installIdentity(t *testing.T, id *age.X25519Identity) {
	t.Helper()
	p := filepath.Join(h.root, siteconfig.NodeIdentityFile)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("# site identity\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A seed opens a medium's sealed secrets with its identity and applies them, quoting them
// nowhere; a medium sealed to another identity, or a seed without one, is refused with the
// reason and the node left as it was.
func TestSealedSecretsOnTheNode(t *testing.T) {
	key := newSiteKey(t, "site")
	nodeID, _ := age.GenerateX25519Identity()
	otherID, _ := age.GenerateX25519Identity()
	for _, tc := range []struct {
		name     string
		identity *age.X25519Identity // on the node; nil: none
		sealTo   *age.X25519Identity
		want     string // "" applied
	}{
		{"the seed's identity", nodeID, nodeID, ""},
		{"another identity", nodeID, otherID, "sealed to another recipient than this seed's identity"},
		{"no identity", nil, nodeID, "this seed has no identity to open them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.install(t, key)
			if tc.identity != nil {
				h.installIdentity(t, tc.identity)
			}
			iso, pullSecret := sealedMedium(t, tc.sealTo.Recipient(), &key)
			h.cmds.outputs["ip -o addr show dev eth0"] = "2: eth0    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth0\\       valid_lft forever\n"
			o := h.options(oskind.CoreOS, iso)
			o.MediumTimeout = 10 * time.Second
			before := tree(t, h.root)
			res, err := Run(context.Background(), o)
			var reports strings.Builder
			for _, m := range h.rep.msgs {
				for _, v := range m.Details {
					reports.WriteString(v + "\n")
				}
			}
			if strings.Contains(h.console.String(), pullSecret) || strings.Contains(reports.String(), pullSecret) {
				t.Errorf("the pull secret shows on the console or in a report")
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, h.console.String())
				}
				if got := h.read(t, CoreOSPullSecretFile); got != pullSecret || res.SignedBy != key.pub.Fingerprint {
					t.Errorf("pull secret applied %v, signed by %q", got == pullSecret, res.SignedBy)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "spec.relocation.siteConfigIdentity") {
				t.Fatalf("Run = %v, want a refusal saying %q", err, tc.want)
			}
			refusals := 0
			for _, m := range h.rep.msgs {
				if m.Details["step"] == StepMedium && m.Status == wire.StatusFailed && m.Details["waiting"] == "for a medium whose secrets this seed can open" &&
					strings.Contains(m.Details[wire.DetailError], tc.want) {
					refusals++
				}
			}
			if refusals != 1 {
				t.Errorf("%d refusal reports saying %q, want 1: %v", refusals, tc.want, h.rep.msgs)
			}
			if after := tree(t, h.root); len(after) != len(before) || len(h.cmds.lines) > 0 {
				t.Errorf("the node changed: %d files before, %d after; commands %q", len(before), len(after), h.cmds.lines)
			}
		})
	}
	// An identity file that does not parse is named, not quoted.
	h := newHarness(t)
	os.MkdirAll(filepath.Join(h.root, filepath.Dir(siteconfig.NodeIdentityFile)), 0o755)
	os.WriteFile(filepath.Join(h.root, siteconfig.NodeIdentityFile), []byte("AGE-SECRET-KEY-1NOTAKEY\n"), 0o600)
	iso, _ := sealedMedium(t, nodeID.Recipient(), nil)
	o := h.options(oskind.CoreOS, iso)
	o.MediumTimeout = 10 * time.Second
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not load: not an age identity file") || strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("Run with a broken identity = %v", err)
	}
}
