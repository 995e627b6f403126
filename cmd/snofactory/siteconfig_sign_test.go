package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/test/testbin"
)

// site-config create --sign-by signs the medium so that cosign, from its own source, verifies
// the files xorriso extracts from it; the key's passphrase comes from a file or the
// environment; a wrong or missing passphrase exits 2 and writes no medium.
func TestSiteConfigCreateSigned(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "site")
	key := trusttest.Generate(t, prefix, "site pass").Public
	passFile := filepath.Join(dir, "pass")
	wrongFile := filepath.Join(dir, "wrong")
	os.WriteFile(passFile, []byte("site pass\n"), 0o600)
	os.WriteFile(wrongFile, []byte("not it\n"), 0o600)
	site := "../../blueprints/demo/site.yaml"

	for _, tc := range []struct {
		name   string
		env    string // "" unset
		args   []string
		code   int
		stderr string
	}{
		{"passphrase file", "", []string{"--sign-by", trust.KeyFile(prefix), "--passphrase-file", passFile}, exitOK, ""},
		{"passphrase from the environment", "site pass", []string{"--sign-by", trust.KeyFile(prefix)}, exitOK, ""},
		{"wrong passphrase", "", []string{"--sign-by", trust.KeyFile(prefix), "--passphrase-file", wrongFile}, exitBadInput, "wrong passphrase"},
		{"wrong passphrase in the environment", "nope", []string{"--sign-by", trust.KeyFile(prefix)}, exitBadInput, "wrong passphrase"},
		{"no passphrase", "", []string{"--sign-by", trust.KeyFile(prefix)}, exitBadInput, passphraseEnv},
		{"the public key", "", []string{"--sign-by", trust.PubFile(prefix), "--passphrase-file", passFile}, exitBadInput, "not an encrypted sigstore private key"},
		{"passphrase without a key", "", []string{"--passphrase-file", passFile}, exitBadInput, "--sign-by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(passphraseEnv, tc.env) // restored after the subtest
			if tc.env == "" {
				os.Unsetenv(passphraseEnv)
			}
			iso := filepath.Join(t.TempDir(), "site.iso")
			creds := iso + ".credentials.age"
			code, stdout, stderr := runMain(t, append([]string{"site-config", "create", site, "-o", iso}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.stderr, stdout, stderr)
			}
			if tc.code != exitOK {
				for _, f := range []string{iso, creds} {
					if _, err := os.Stat(f); !os.IsNotExist(err) {
						t.Errorf("a refused create left %s behind (%v)", f, err)
					}
				}
				return
			}
			if !strings.Contains(stdout, "signed by key "+key.Fingerprint) {
				t.Errorf("create does not say which key signed: %s", stdout)
			}
			m, err := siteconfig.OpenMedium(iso)
			if err != nil {
				t.Fatal(err)
			}
			if fp, err := m.Verify([]trust.PublicKey{key}); err != nil || fp != key.Fingerprint || m.SignedBy != key.Fingerprint {
				t.Errorf("Verify = %s, %v (signer file %q)", fp, err, m.SignedBy)
			}
			cosignVerifiesMedium(t, iso, trust.PubFile(prefix))
		})
	}
}

// cosignVerifiesMedium extracts the medium with xorriso and checks its site config's
// signature with cosign verify-blob, as a technician could without snofactory.
func cosignVerifiesMedium(t *testing.T, iso, pub string) {
	t.Helper()
	out := t.TempDir()
	if b, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/", out).CombinedOutput(); err != nil {
		t.Fatalf("xorriso extract: %v\n%s", err, b)
	}
	cmd := exec.Command(testbin.Cosign(t), "verify-blob", "--key", pub, "--insecure-ignore-tlog=true",
		"--signature", filepath.Join(out, siteconfig.SignatureFileName), filepath.Join(out, siteconfig.ConfigFileName))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "Verified OK") {
		t.Errorf("cosign verify-blob of the medium's files: %v\n%s", err, b)
	}
}

// site-config create --seal-to puts the site's pull secret on the medium only sealed to the
// seed's identity, which opens it; a bad recipient, or nothing to seal, exits 2 and writes
// no medium.
func TestSiteConfigCreateSealed(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	const site = "../../seeds/site/siteconfig/testdata/site.yaml"
	sc, err := siteconfig.Load(site)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, site string
		args       []string
		code       int
		msg        string
	}{
		// The site's generated kubeadmin hash and retained signer keys are sealed too.
		{"sealed", site, []string{"--seal-to", id.Recipient().String(), "--credentials-recipient", id.Recipient().String()}, exitOK, "secrets sealed"},
		{"not a recipient", site, []string{"--seal-to", "ssh-ed25519 AAAA"}, exitBadInput, "not an age recipient"},
		{"nothing to seal", "../../blueprints/demo/site.yaml", []string{"--seal-to", id.Recipient().String()}, exitBadInput, "no pull secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iso := filepath.Join(t.TempDir(), "site.iso")
			code, stdout, stderr := runMain(t, append([]string{"site-config", "create", tc.site, "-o", iso}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.msg) {
				t.Fatalf("exit %d, want %d saying %q\n%s\n%s", code, tc.code, tc.msg, stdout, stderr)
			}
			if tc.code != exitOK {
				if _, err := os.Stat(iso); !os.IsNotExist(err) {
					t.Errorf("a refused create left a medium: %v", err)
				}
				return
			}
			raw, _ := os.ReadFile(iso)
			for _, clear := range []string{sc.Spec.PullSecret, "auths", "PRIVATE KEY", "$2a$"} {
				if strings.Contains(string(raw), clear) {
					t.Errorf("the medium holds %.12q... in clear", clear)
				}
			}
			got, err := siteconfig.ReadMedium(iso)
			if err != nil {
				t.Fatal(err)
			}
			if err := got.DecryptSecrets(id); err != nil || got.Spec.PullSecret != sc.Spec.PullSecret || got.Spec.KubeadminPasswordHash == "" || got.Spec.KubeconfigCrypto == nil {
				t.Errorf("the seed's identity does not open the site's secrets: %v", err)
			}
		})
	}
}

// site-config create --for-seed and --for-serial write the binding into the signed site
// config, say where the medium may be used, and refuse a value the seed could never match
// (exit 2, no medium).
func TestSiteConfigCreateBound(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "site")
	key := trusttest.Generate(t, prefix, "site pass").Public
	t.Setenv(passphraseEnv, "site pass")
	site := "../../blueprints/demo/site.yaml"
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string
		binding *siteconfig.Binding
	}{
		{"seed and machine", []string{"--for-seed", "demo", "--for-serial", "CZ2345 B"}, exitOK,
			"bound to seed demo on the machine with serial number CZ2345 B", &siteconfig.Binding{Seed: "demo", MachineSerial: "CZ2345 B"}},
		{"machine only", []string{"--for-serial", "CZ2345"}, exitOK, "bound to any seed on the machine with serial number CZ2345", &siteconfig.Binding{MachineSerial: "CZ2345"}},
		{"unbound", nil, exitOK, "not bound: any seed that trusts it takes it", nil},
		{"bad seed name", []string{"--for-seed", "Demo_1"}, exitBadInput, "spec.binding.seed", nil},
		{"bad serial", []string{"--for-serial", " CZ2345"}, exitBadInput, "spec.binding.machineSerial", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iso := filepath.Join(t.TempDir(), "site.iso")
			code, stdout, stderr := runMain(t, append([]string{"site-config", "create", site, "-o", iso, "--sign-by", trust.KeyFile(prefix)}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.out) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.out, stdout, stderr)
			}
			if tc.code != exitOK {
				if _, err := os.Stat(iso); !os.IsNotExist(err) {
					t.Errorf("a refused create left %s behind (%v)", iso, err)
				}
				return
			}
			m, err := siteconfig.OpenMedium(iso)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Verify([]trust.PublicKey{key}); err != nil {
				t.Fatalf("the bound medium does not verify: %v", err)
			}
			sc, err := m.SiteConfig()
			if err != nil {
				t.Fatal(err)
			}
			if (sc.Spec.Binding == nil) != (tc.binding == nil) || (tc.binding != nil && *sc.Spec.Binding != *tc.binding) {
				t.Errorf("binding on the medium %+v, want %+v", sc.Spec.Binding, tc.binding)
			}
		})
	}
}
