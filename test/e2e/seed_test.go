package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/sbom"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/test/conformance"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/siteboot"
	"github.com/snofactory/snofactory/test/testbin"
)

// seedBlueprint is the demo pushing its seed, chunked and qcow2, to reg, with a Butane
// fragment that leaves a pull secret on the node (as a user's config might): the seal
// must take it off the seed. The seed takes only site media signed by a site key
// (withSiteKeys).
func seedBlueprint(t *testing.T, reg *registry.Registry, secret string) (bp, ref string, sm *siteMedia) {
	t.Helper()
	iso, err := conformance.Cached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	image := reg.Ref("demo/hello:1.0")
	pushRandom(t, image)
	ref = reg.Ref("demo/seed:1.0")
	bp, err = testbin.CopyDemo(t.TempDir(), map[string]string{testbin.DemoImage: image, testbin.DemoISOLine: "path: " + iso,
		"push: " + testbin.DemoRegistry + "/demo/seed:1.0": "push: " + ref, "formats: [chunked]": "formats: [chunked, qcow2]",
		// the seed gives up on a missing site-config medium quickly, for the test below
		"kubeletCertValidity: 24h\n": "kubeletCertValidity: 24h\n    siteConfigTimeout: 20s\n"})
	if err != nil {
		t.Fatal(err)
	}
	withFragment(t, bp, `variant: fcos
version: 1.4.0
storage:
  files:
    - path: /var/lib/kubelet/config.json
      mode: 0600
      contents:
        inline: '{"auths":{"registry.example":{"auth":"`+secret+`"}}}'`)
	return bp, ref, withSiteKeys(t, bp)
}

// TestSeedBuildsPublishesAndPulls is the product up to the site: the demo builds through
// seal and publish into a real registry; skopeo sees the OCI artifact; seed pull into an
// empty directory yields the sealed files byte for byte; pushing the unchanged seed again
// uploads no blob; and the pull secret the node had is in no log, run record, manifest,
// artifact or seed disk (the uncompressed disks included); the site identity only the seal
// places is in no earlier stage's output, nor in the build's record or output. The pulled
// seed then boots at the site (bootAtTheSite).
func TestSeedBuildsPublishesAndPulls(t *testing.T) {
	// Each e2e test has its own cache, registry and VMs: they run two at a time.
	t.Parallel()
	reg := registry.StartT(t, registry.Options{})
	secret := "c25vZmFjdG9yeS1lMmUtcHVsbC1zZWNyZXQ" + strings.Repeat("x", 8)
	bp, ref, sm := seedBlueprint(t, reg, secret)
	// The blueprint names the depot's key: publish signs the seed and attests its
	// provenance and SBOM.
	keys := t.TempDir()
	passphrase := "depot-e2e-passphrase-" + testbin.RandomHex(t, 6)
	os.WriteFile(filepath.Join(keys, "pass"), []byte(passphrase+"\n"), 0o600)
	if r := runCLI(t, "keys", "generate", "--passphrase-file", filepath.Join(keys, "pass"), filepath.Join(keys, "depot")); r.code != 0 {
		t.Fatalf("keys generate: exit %d\n%s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(bp)
	signing := fmt.Sprintf("push: %s\n    signing:\n      key: %s\n      passphraseFile: %s\n", ref, filepath.Join(keys, "depot.key"), filepath.Join(keys, "pass"))
	os.WriteFile(bp, []byte(strings.Replace(string(b), "push: "+ref+"\n", signing, 1)), 0o644)
	out := t.TempDir()
	r := runCLI(t, "build", bp, "--cache-dir", t.TempDir(), "--output-dir", out, "--progress", "plain")
	if r.code != 0 {
		t.Fatalf("build: exit %d\n%s", r.code, r.stderr)
	}
	if got := stageCache(loadRecord(t, out)); len(got) != 8 || got["seal"] != "miss" || got["publish"] != "miss" {
		t.Fatalf("stages %v", got)
	}
	checkOneFactoryBoot(t, out, "install", "install", "validate", "seal")
	sm.checkIdentityOnlyInSeal(t, out, r.stdout+r.stderr)
	sealed := filepath.Join(out, "seal", "seed")
	m, err := seed.ReadManifest(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "demo" || m.Target != "coreos" || len(m.Disks) != 2 || m.Validation.Passed == 0 || len(m.Images) != 1 {
		t.Errorf("manifest %+v", m)
	}

	raw, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect: %v", err)
	}
	// A chunked seed is an index of manifests whose layers are its chunks.
	var art struct {
		MediaType    string
		ArtifactType string
		Manifests    []struct{ Digest, ArtifactType string }
	}
	if err := json.Unmarshal(raw, &art); err != nil || art.ArtifactType != seed.ArtifactType || art.MediaType != ocispec.MediaTypeImageIndex ||
		len(art.Manifests) == 0 || art.Manifests[0].ArtifactType != ociseed.ArtifactTypePart {
		t.Errorf("skopeo sees %s (%v)", raw, err)
	}

	checkTrusted(t, reg, ref, out, sealed, m, filepath.Join(keys, "depot.pub"))

	// The pull is checked against a policy that requires the depot's signature.
	pulled := filepath.Join(t.TempDir(), "pulled")
	if r := runCLI(t, append(enforcingPolicy(t, reg, filepath.Join(keys, "depot.pub")), "seed", "pull", ref, pulled)...); r.code != 0 {
		t.Fatalf("seed pull under the depot's policy: exit %d\n%s", r.code, r.stderr)
	}
	for _, f := range []string{seed.ManifestFile, "disk.qcow2", "disk.pack", "disk.index", "sbom.spdx.json"} {
		if fileDigest(t, filepath.Join(pulled, f)) != fileDigest(t, filepath.Join(sealed, f)) {
			t.Errorf("pulled %s differs from the sealed one", f)
		}
	}
	// A seed's disks keep what the node kept (an OpenShift node's private keys): only their
	// owner reads them, sealed or pulled.
	for _, f := range []string{filepath.Join(sealed, "disk.qcow2"), filepath.Join(sealed, "disk.pack"),
		filepath.Join(pulled, "disk.qcow2"), filepath.Join(pulled, "disk.pack")} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Error(err)
		} else if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for others", f, fi.Mode().Perm())
		}
	}

	reg.Reset()
	if r := runCLI(t, "seed", "push", sealed, ref); r.code != 0 {
		t.Fatalf("seed push again: exit %d\n%s", r.code, r.stderr)
	}
	for _, q := range reg.Requests() {
		if strings.Contains(q.Path, "/blobs/uploads/") {
			t.Errorf("re-push of an unchanged seed uploaded: %s %s", q.Method, q.Path)
		}
	}

	noSecret(t, secret, out, sealed, pulled, reg.StorageDir())
	// The signing key's passphrase is in no output, record, seed or registry blob.
	notAnywhere(t, "the signing key's passphrase", []byte(passphrase), out, sealed, pulled, reg.StorageDir())
	bootAtTheSite(t, pulled, sm)
}

// bootAtTheSite boots the pulled seed as a site would, on one disk across power cycles:
// without its site-config medium, with a malformed one (signed) and with an unsigned one it
// says what is wrong and changes nothing; with the signed medium bound to it and to the
// machine's serial number it opens the sealed pull secret and reconfigures
// (siteboot.Reconfigured's checks and siteMedia.checkSignedBoot's).
func bootAtTheSite(t *testing.T, seedDir string, sm *siteMedia) {
	disk := filepath.Join(t.TempDir(), "site-disk.qcow2")
	boot := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, append([]string{"seed", "boot", seedDir, "--overlay", disk}, args...)...)
	}
	r := boot()
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "SNOSITE") {
		t.Errorf("boot without the medium: exit %d, want 1 naming the medium\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Bound to this seed and to the serial number the site's server reports, so that the
	// signed medium cannot be replayed at another site.
	const serial = "SNF-E2E-0042"
	unsigned, signed, bad := sm.media(t, serial)
	r = boot("--site-config", bad)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, `"Bad_Host" is not an RFC 1123 host name`) {
		t.Errorf("boot with a malformed medium: exit %d, want 1 naming the problem\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = boot("--site-config", unsigned)
	t.Logf("boot with the unsigned medium (%s):\n%s", r.took.Round(time.Second), r.stdout)
	refusal := "is not signed (no site_config.sig), and this seed accepts only media signed by one of its site keys (" + trust.ShortFingerprint(sm.key.Fingerprint) + ")"
	if r.code != 1 || !strings.Contains(r.stdout, "reconfigure-step failed") || !strings.Contains(r.stdout, refusal) ||
		!strings.Contains(r.stderr, refusal) {
		t.Errorf("boot with an unsigned medium: exit %d, want 1 with the refusal on each report and the outcome\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "step=network") || strings.Contains(r.stdout, "step=hostname") {
		t.Errorf("the seed went past the refused medium:\n%s", r.stdout)
	}

	res := siteboot.ReconfiguredWith(t, siteboot.Boot{Bin: snofactoryBin, Seed: seedDir, Overlay: disk, Medium: signed,
		Args: []string{"--machine-serial", serial}})
	sm.checkSignedBoot(t, res, serial)
	// How fast is make bench's to judge; here it is only reported.
	t.Logf("the seed took %s from power-on to reconfigured", res.Took.Round(time.Second))
}

// checkTrusted checks what publish attached to the signed seed at ref: seed inspect and
// cosign (built from its own source) verify the signature and both attestations with the
// depot's public key; the SBOM names the seed's disk, its images and the agent binary; the
// provenance names the lock's inputs, and each stage's recipe and key as run.json has them.
func checkTrusted(t *testing.T, reg *registry.Registry, ref, out, sealed string, m *seed.Manifest, pub string) {
	t.Helper()
	r := runCLI(t, "seed", "inspect", "--key", pub, ref)
	if r.code != 0 || strings.Count(r.stdout, "verified by key") != 3 {
		t.Errorf("seed inspect --key: exit %d, want the signature and two attestations verified:\n%s%s", r.code, r.stdout, r.stderr)
	}
	cosign := testbin.Cosign(t)
	for _, args := range [][]string{{"verify"}, {"verify-attestation", "--type", "slsaprovenance1"}, {"verify-attestation", "--type", "spdxjson"}} {
		cmd := exec.Command(cosign, append(args, "--key", pub, "--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry", ref)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cosign %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	// skopeo (built from its own source) checks the signature under a containers policy, as
	// make demo does with the same script; with another key it refuses the seed.
	testbin.Skopeo(t)
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "test", "skopeo", "verify-seed.sh")
	if b, err := exec.Command(script, pub, ref).CombinedOutput(); err != nil || !strings.Contains(string(b), "skopeo verified the signature") {
		t.Errorf("%s: %v\n%s", script, err, b)
	}
	other := filepath.Join(t.TempDir(), "other")
	otherPass := other + ".pass"
	os.WriteFile(otherPass, []byte("x\n"), 0o600)
	if r := runCLI(t, "keys", "generate", "--passphrase-file", otherPass, other); r.code != 0 {
		t.Fatalf("keys generate: %s", r.stderr)
	}
	if b, err := exec.Command(script, other+".pub", ref).CombinedOutput(); err == nil || !strings.Contains(string(b), "signature verification failed") {
		t.Errorf("%s with another key: %v, want a refusal\n%s", script, err, b)
	}

	r = runCLI(t, "seed", "inspect", "--sbom", "--key", pub, ref)
	if r.code != 0 {
		t.Fatalf("seed inspect --sbom: exit %d\n%s", r.code, r.stderr)
	}
	doc, err := sbom.Read(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("the attested SBOM: %v\n%s", err, r.stdout)
	}
	local, _ := os.ReadFile(filepath.Join(sealed, "sbom.spdx.json"))
	if !sameJSON(t, local, []byte(r.stdout)) {
		t.Error("the attested SBOM differs from the sealed seed's")
	}
	sums := map[string]string{}
	for _, p := range doc.Packages {
		for _, c := range p.PackageChecksums {
			sums[p.PackageName] = strings.ToLower(c.Value)
		}
	}
	if want := m.Disks[0].RawDigest.Encoded(); sums["demo"] != want {
		t.Errorf("the SBOM's seed package has sha256 %q, want the raw disk's %s", sums["demo"], want)
	}
	for _, im := range m.Images {
		if sums[im.Name] != im.Digest.Encoded() {
			t.Errorf("the SBOM lists image %s with sha256 %q, want %s", im.Name, sums[im.Name], im.Digest.Encoded())
		}
	}
	if sums["snofactory"] == "" {
		t.Error("the SBOM does not list the snofactory binary on the node")
	}
	// The conformance OS's Debian packages, from its dpkg database, as the agent read them.
	if missing, err := conformance.MissingPackages(context.Background(), doc); err != nil || len(missing) > 0 {
		t.Errorf("the SBOM lacks the OS packages %v (%v)", missing, err)
	}

	var rec struct {
		Stages []struct{ Name, Key, Recipe string }
	}
	if err := readJSON(filepath.Join(out, "run.json"), &rec); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Subject   []struct{ Digest map[string]string }
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					Name   string
					Digest map[string]string
				}
				InternalParameters struct {
					Stages []struct{ Name, Recipe string }
				}
			}
			RunDetails struct {
				Byproducts []struct {
					Name   string
					Digest map[string]string
				}
			}
		}
	}
	if err := readJSON(filepath.Join(out, "publish", "provenance.json"), &st); err != nil {
		t.Fatal(err)
	}
	recipes, keys := map[string]string{}, map[string]string{}
	for _, s := range st.Predicate.BuildDefinition.InternalParameters.Stages {
		recipes[s.Name] = s.Recipe
	}
	for _, b := range st.Predicate.RunDetails.Byproducts {
		keys[strings.TrimPrefix(b.Name, "stage-key/")] = b.Digest["sha256"]
	}
	for _, s := range rec.Stages {
		if s.Name == "publish" {
			continue
		}
		if keys[s.Name] != s.Key || recipes[s.Name] != s.Recipe || s.Recipe == "" {
			t.Errorf("the provenance gives stage %s recipe %q and key %q, run.json %q and %q", s.Name, recipes[s.Name], keys[s.Name], s.Recipe, s.Key)
		}
	}
	deps := map[string]bool{}
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		deps[d.Name] = d.Digest["sha256"] != ""
	}
	if !deps["lock"] || !deps["iso"] || !deps[m.Images[0].Name] {
		t.Errorf("the provenance's resolved dependencies %+v lack the lock, the ISO or the image", st.Predicate.BuildDefinition.ResolvedDependencies)
	}
}

// sameJSON reports whether a and b are the same JSON document, whatever their spacing
// and escaping.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return reflect.DeepEqual(va, vb)
}

// enforcingPolicy writes a trust policy that accepts only seeds under r's "demo" namespace
// signed by the key pub, and the registries.d that says where r keeps signatures; it
// returns the seed command flags naming both.
func enforcingPolicy(t *testing.T, r *registry.Registry, pub string) []string {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, fmt.Appendf(nil, `{"default":[{"type":"reject"}],"transports":{"docker":{%q:[{"type":"sigstoreSigned","keyPath":%q}]}}}`,
		r.Addr()+"/demo", pub), 0o644)
	regd := filepath.Join(dir, "registries.d")
	os.Mkdir(regd, 0o755)
	os.WriteFile(filepath.Join(regd, "demo.yaml"), fmt.Appendf(nil, "docker:\n  %s:\n    use-sigstore-attachments: true\n", r.Addr()), 0o644)
	return []string{"--policy", policy, "--registries.d", regd}
}

// noSecret searches every byte a user receives for the secret, in clear and base64: the
// build's logs, run.json and seed directory, the pulled artifact, the registry's storage,
// and both seed disks uncompressed.
// notAnywhere fails the test for each file under roots that holds needle.
func notAnywhere(t *testing.T, what string, needle []byte, roots ...string) {
	t.Helper()
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if found, err := streamContains(f, [][]byte{needle}); err != nil || found {
				t.Errorf("%s is in %s (%v)", what, p, err)
			}
			return nil
		})
	}
}

func noSecret(t *testing.T, secret, out, sealed, pulled, storage string) {
	m, err := seed.ReadManifest(sealed)
	if err != nil {
		t.Fatal(err)
	}
	t.Helper()
	forms := [][]byte{[]byte(secret), []byte(base64.StdEncoding.EncodeToString([]byte(secret))[:len(secret)])}
	search := func(name string, r io.Reader) {
		found, err := streamContains(r, forms)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if found {
			t.Errorf("the pull secret is in %s", name)
		}
	}
	walk := func(root string) {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			search(p, f)
			return nil
		})
	}
	walk(filepath.Join(out, "logs"))
	walk(sealed)
	walk(pulled)
	walk(storage)
	f, err := os.Open(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	search("run.json", f)
	f.Close()

	rawQcow := filepath.Join(t.TempDir(), "disk.raw")
	if b, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(sealed, "disk.qcow2"), rawQcow).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, b)
	}
	rf, err := os.Open(rawQcow)
	if err != nil {
		t.Fatal(err)
	}
	search("the qcow2 seed disk, uncompressed", rf)
	rf.Close()
	for _, d := range m.Disks {
		if d.Format != seed.FormatChunked {
			continue
		}
		rc, err := seed.RawReader(context.Background(), sealed, d)
		if err != nil {
			t.Fatal(err)
		}
		search("the chunked seed disk, assembled", rc)
		rc.Close()
	}

	// The check can fail: the installed disk, before the seal, holds the secret.
	inst := filepath.Join(t.TempDir(), "installed.raw")
	if b, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(out, "install", "disk.qcow2"), inst).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, b)
	}
	fi, err := os.Open(inst)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	if found, err := streamContains(fi, forms[:1]); err != nil || !found {
		t.Errorf("the installed disk does not hold the secret (%v): the search above proves nothing", err)
	}
}

// streamContains reports whether r holds any of forms, reading it a window at a time (the
// disks are gigabytes).
func streamContains(r io.Reader, forms [][]byte) (bool, error) {
	const window = 4 << 20
	keep := 0
	for _, f := range forms {
		keep = max(keep, len(f))
	}
	buf := make([]byte, 0, window+keep)
	chunk := make([]byte, window)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, f := range forms {
			if bytes.Contains(buf, f) {
				return true, nil
			}
		}
		if len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// checkOneFactoryBoot: the build boots the installed disk once. The VM launcher logs each
// qemu it starts; starter's is the only one (install's boots the live ISO, then the
// installed disk), and the stages named ran in its session.
func checkOneFactoryBoot(t *testing.T, out, starter string, stages ...string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(out, "logs", "*.log"))
	starts := map[string]int{}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), `msg="starting VM"`); n > 0 {
			starts[strings.TrimSuffix(filepath.Base(l), ".log")] = n
		}
	}
	if len(starts) != 1 || starts[starter] != 1 {
		t.Errorf("VMs started by the build: %v, want one, by %s", starts, starter)
	}
	sessions := map[string]string{}
	for _, st := range loadRecord(t, out).Stages {
		sessions[st.Name] = st.Session
	}
	for _, name := range stages {
		if sessions[name] == "" || sessions[name] != sessions[starter] {
			t.Errorf("sessions in run.json: %v, want %v in %s's", sessions, stages, starter)
		}
	}
}

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
