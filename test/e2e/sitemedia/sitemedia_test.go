package sitemedia

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary under test with env added to the environment. Its context ends a
// minute before the test binary's -timeout, so a hang is reported by name and its VMs end.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Minute))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, snofactoryBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running snofactory %v: %v", args, err)
	}
	return r
}

// The demo seed built with spec.relocation.siteConfigKeys and siteConfigIdentity carries
// the key and the identity; booted as at its site with an unsigned medium it refuses it,
// saying why, and changes nothing; booted again on the same disk with the medium signed by
// site-config create --sign-by, its pull secret sealed by --seal-to, it opens the secret,
// reconfigures and reports the key that signed the medium. Neither the build's record and
// output nor the medium nor the boot's reports hold the identity or the pull secret.
func TestSeedTakesOnlySignedMedia(t *testing.T) {
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.StartT(t, registry.Options{})
	image := reg.Ref("demo/hello:1.0")
	if _, err := registry.PushRandom(context.Background(), image); err != nil {
		t.Fatal(err)
	}
	bp, err := testbin.CopyDemo(t.TempDir(), map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + iso,
		"push: " + testbin.DemoRegistry + "/demo/seed:1.0": "push: " + reg.Ref("demo/seed:1.0"),
		// The seed gives up on a refused medium after the shortest wait, for the first boot.
		"kubeletCertValidity: 24h\n": "kubeletCertValidity: 24h\n    siteConfigTimeout: 10s\n    siteConfigKeys: [keys/site.pub]\n" +
			"    siteConfigIdentity: keys/site-identity.txt\n"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(bp)
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	pass := []string{trust.PassphraseEnv + "=" + testbin.RandomHex(t, 8)}
	if r := runCLI(t, pass, "keys", "generate", filepath.Join(keys, "site")); r.code != 0 {
		t.Fatalf("keys generate: exit %d\n%s", r.code, r.stderr)
	}
	key, err := trust.LoadPublicKey(filepath.Join(keys, "site.pub"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "site-identity.txt"), []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The site's pull secret, which the medium carries sealed to the seed's identity.
	token := testbin.RandomHex(t, 24)
	site := filepath.Join(dir, "demo", "site.yaml")
	if err := os.WriteFile(filepath.Join(dir, "demo", "pull-secret.json"), []byte(`{"auths":{"registry.site.example":{"auth":"`+token+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(site, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("  pullSecretFile: pull-secret.json\n")
	f.Close()

	out := t.TempDir()
	build := runCLI(t, nil, "build", bp, "--cache-dir", t.TempDir(), "--output-dir", out, "--progress", "plain")
	if build.code != 0 {
		t.Fatalf("build: exit %d\n%s", build.code, build.stderr)
	}
	record, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	secretKey := strings.TrimPrefix(id.String(), "AGE-SECRET-KEY-")
	for what, text := range map[string]string{"run record": string(record), "build output": build.stdout + build.stderr} {
		if strings.Contains(text, secretKey) {
			t.Errorf("the %s holds the site identity", what)
		}
	}
	// The seal places the identity; no earlier stage's output holds it.
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
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secretKey)) {
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
		len(rendered.SiteKeys) != 1 || rendered.SiteKeys[0] != key.Fingerprint {
		t.Errorf("render.json siteKeys = %v (%v), want [%s]", rendered.SiteKeys, err, key.Fingerprint)
	}

	media := t.TempDir()
	unsigned, signed := filepath.Join(media, "unsigned.iso"), filepath.Join(media, "signed.iso")
	if r := runCLI(t, nil, "site-config", "create", site, "-o", unsigned); r.code != 0 {
		t.Fatalf("site-config create: exit %d\n%s", r.code, r.stderr)
	}
	// Bound to this seed and to the serial number the site's server reports, so that the
	// signed medium cannot be replayed at another site.
	const serial = "SNF-E2E-0042"
	if r := runCLI(t, pass, "site-config", "create", site, "-o", signed, "--sign-by", filepath.Join(keys, "site.key"),
		"--seal-to", id.Recipient().String(), "--for-seed", "demo", "--for-serial", serial); r.code != 0 || !strings.Contains(r.stdout, "signed by key "+key.Fingerprint) ||
		!strings.Contains(r.stdout, "secrets sealed") || !strings.Contains(r.stdout, "bound to seed demo on the machine with serial number "+serial) {
		t.Fatalf("site-config create --sign-by --seal-to --for-seed --for-serial: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(signed); bytes.Contains(b, []byte(token)) {
		t.Error("the sealed medium holds the pull secret in clear")
	}

	seedDir, disk := filepath.Join(out, "seal", "seed"), filepath.Join(t.TempDir(), "site-disk.qcow2")
	start := time.Now()
	r := runCLI(t, nil, "seed", "boot", seedDir, "--overlay", disk, "--site-config", unsigned)
	t.Logf("boot with the unsigned medium (%s):\n%s", time.Since(start).Round(time.Second), r.stdout)
	refusal := "is not signed (no site_config.sig), and this seed accepts only media signed by one of its site keys (" + trust.ShortFingerprint(key.Fingerprint) + ")"
	if r.code != 1 || !strings.Contains(r.stdout, "reconfigure-step failed") || !strings.Contains(r.stdout, refusal) ||
		!strings.Contains(r.stderr, refusal) {
		t.Errorf("boot with an unsigned medium: exit %d, want 1 with the refusal on each report and the outcome\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "step=network") || strings.Contains(r.stdout, "step=hostname") {
		t.Errorf("the seed went past the refused medium:\n%s", r.stdout)
	}

	start = time.Now()
	r = runCLI(t, nil, "seed", "boot", seedDir, "--overlay", disk, "--site-config", signed, "--machine-serial", serial)
	t.Logf("boot with the signed medium (%s):\n%s", time.Since(start).Round(time.Second), r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "Seed reconfigured and booted") {
		t.Fatalf("boot with the signed medium: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"signedBy=" + key.Fingerprint, "boundToSeed=demo", "boundToMachine=" + serial, "hostname=edge-01", "address.eth0=10.0.2.50/24", "file=/etc/containers/auth.json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the seed did not report %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, token) || strings.Contains(r.stdout+r.stderr, secretKey) {
		t.Error("the boot's reports show the pull secret or the identity")
	}
}
