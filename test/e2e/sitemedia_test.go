package e2e

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/test/siteboot"
	"github.com/snofactory/snofactory/test/testbin"
)

// siteMedia is what the seed test's blueprint carries for signed site-config media: the
// site key named by spec.relocation.siteConfigKeys, the identity named by
// siteConfigIdentity, and a pull secret in the site config, which the signed medium seals
// to that identity. One seed build serves the site checks of both kinds of media.
type siteMedia struct {
	site     string // the blueprint copy's site config, naming the pull secret
	keyFile  string // the site key's private half
	passFile string // its passphrase
	key      trust.PublicKey
	id       *age.X25519Identity
	token    string // the site's pull secret
}

// withSiteKeys makes a site key and an age identity beside the blueprint bp, names both in
// it, and gives its site config a pull secret.
func withSiteKeys(t *testing.T, bp string) *siteMedia {
	t.Helper()
	dir := filepath.Dir(bp)
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	sm := &siteMedia{site: filepath.Join(dir, "demo", "site.yaml"), keyFile: filepath.Join(keys, "site.key"),
		passFile: filepath.Join(keys, "pass"), token: testbin.RandomHex(t, 24)}
	if err := os.WriteFile(sm.passFile, []byte(testbin.RandomHex(t, 12)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "keys", "generate", "--passphrase-file", sm.passFile, filepath.Join(keys, "site")); r.code != 0 {
		t.Fatalf("keys generate: exit %d\n%s", r.code, r.stderr)
	}
	var err error
	if sm.key, err = trust.LoadPublicKey(filepath.Join(keys, "site.pub")); err != nil {
		t.Fatal(err)
	}
	if sm.id, err = age.GenerateX25519Identity(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "site-identity.txt"), []byte(sm.id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo", "pull-secret.json"), []byte(`{"auths":{"registry.site.example":{"auth":"`+sm.token+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(sm.site, os.O_APPEND|os.O_WRONLY, 0) // spec is the site config's last section
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("  pullSecretFile: pull-secret.json\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	editBlueprint(t, bp, "    siteConfigTimeout:", "    siteConfigKeys: [keys/site.pub]\n    siteConfigIdentity: keys/site-identity.txt\n    siteConfigTimeout:")
	return sm
}

// secretKey is the identity's key as its file holds it, without the prefix every age
// identity shares.
func (sm *siteMedia) secretKey() string { return strings.TrimPrefix(sm.id.String(), "AGE-SECRET-KEY-") }

// checkIdentityOnlyInSeal checks the build in out of a blueprint withSiteKeys: neither its
// run record nor its output (buildOutput) holds the identity, nor any output of a stage
// before the seal, which places it; render.json names the site key.
func (sm *siteMedia) checkIdentityOnlyInSeal(t *testing.T, out, buildOutput string) {
	t.Helper()
	record, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"run record": string(record), "build output": buildOutput} {
		if strings.Contains(text, sm.secretKey()) {
			t.Errorf("the %s holds the site identity", what)
		}
	}
	for _, stage := range []string{"render", "install", "validate"} {
		entry, err := filepath.EvalSymlinks(filepath.Join(out, stage)) // the output dir links each stage's cache entry
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		filepath.WalkDir(entry, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			files++
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(sm.secretKey())) {
				t.Errorf("%s holds the site identity", p)
			}
			return nil
		})
		if files == 0 {
			t.Errorf("no %s output under %s", stage, entry)
		}
	}
	var rendered struct{ SiteKeys []string }
	if b, err := os.ReadFile(filepath.Join(out, "render", "render.json")); err != nil || json.Unmarshal(b, &rendered) != nil ||
		len(rendered.SiteKeys) != 1 || rendered.SiteKeys[0] != sm.key.Fingerprint {
		t.Errorf("render.json siteKeys = %v (%v), want [%s]", rendered.SiteKeys, err, sm.key.Fingerprint)
	}
}

// media makes the site's media: unsigned, as site-config create makes it; signed with
// the site key, its pull secret sealed to the seed's identity and bound to the seed demo and
// the machine with serial number serial; and a malformed one (a host name no node can take)
// signed with the site key by hand, since site-config create refuses to write it.
func (sm *siteMedia) media(t *testing.T, serial string) (unsigned, signed, malformed string) {
	t.Helper()
	dir := t.TempDir()
	unsigned, signed, malformed = filepath.Join(dir, "unsigned.iso"), filepath.Join(dir, "signed.iso"), filepath.Join(dir, "bad.iso")
	if r := runCLI(t, "site-config", "create", sm.site, "-o", unsigned); r.code != 0 {
		t.Fatalf("site-config create: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "site-config", "create", sm.site, "-o", signed, "--sign-by", sm.keyFile, "--passphrase-file", sm.passFile,
		"--seal-to", sm.id.Recipient().String(), "--for-seed", "demo", "--for-serial", serial); r.code != 0 || !strings.Contains(r.stdout, "signed by key "+sm.key.Fingerprint) ||
		!strings.Contains(r.stdout, "secrets sealed") || !strings.Contains(r.stdout, "bound to seed demo on the machine with serial number "+serial) {
		t.Fatalf("site-config create --sign-by --seal-to --for-seed --for-serial: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(signed); bytes.Contains(b, []byte(sm.token)) {
		t.Error("the sealed medium holds the pull secret in clear")
	}
	pass, err := trust.Passphrase(sm.passFile, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := trust.LoadSigner(sm.keyFile, pass, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte("apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata:\n  name: x\nspec:\n  hostname: Bad_Host\n")
	sig, err := signer.SignBlob(bad)
	if err != nil {
		t.Fatal(err)
	}
	badDir := t.TempDir()
	for name, b := range map[string][]byte{siteconfig.ConfigFileName: bad, siteconfig.SignatureFileName: []byte(sig),
		siteconfig.SignerFileName: []byte(sm.key.Fingerprint + "\n")} {
		if err := os.WriteFile(filepath.Join(badDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := exec.Command("xorriso", "-as", "mkisofs", "-quiet", "-R", "-V", siteconfig.VolumeLabel, "-o", malformed, badDir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v: %s", err, b)
	}
	return unsigned, signed, malformed
}

// checkSignedBoot checks what the seed reported when it reconfigured from the signed
// medium of media: the key that signed it, the seed and machine it is bound to, the pull
// secret it opened written; and that no report shows that secret or the identity.
func (sm *siteMedia) checkSignedBoot(t *testing.T, r siteboot.Result, serial string) {
	t.Helper()
	for _, want := range []string{"signedBy=" + sm.key.Fingerprint, "boundToSeed=demo", "boundToMachine=" + serial, "file=/etc/containers/auth.json"} {
		if !strings.Contains(r.Report, want) {
			t.Errorf("the seed did not report %s:\n%s", want, r.Report)
		}
	}
	if strings.Contains(r.Report+r.Stderr, sm.token) || strings.Contains(r.Report+r.Stderr, sm.secretKey()) {
		t.Error("the boot's reports show the pull secret or the identity")
	}
}
