package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	trustpkg "github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// A depot signs at push with a key it generated; pull and write under a policy that
// requires that key take the signed seed and refuse an unsigned one, a seed signed by
// another key, and one whose manifest changed after signing, each with its reason and
// exit 2, writing nothing. (The policy is evaluated by containers/image, the library
// podman and skopeo evaluate it with; cosign, built by make deps, verifies the signatures
// here, and skopeo in TestSkopeoChecksAndSignsSeeds.)
func TestSignedSeeds(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	keys := t.TempDir()
	passFile := filepath.Join(keys, "pass")
	os.WriteFile(passFile, []byte("depot secret\n"), 0o600)
	t.Setenv(passphraseEnv, "intruder secret")
	for _, args := range [][]string{
		{"keys", "generate", "--passphrase-file", passFile, filepath.Join(keys, "depot")},
		{"keys", "generate", filepath.Join(keys, "intruder")}, // passphrase from the environment
	} {
		if code, _, stderr := runMain(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	if code, _, stderr := runMain(t, "keys", "generate", filepath.Join(keys, "depot")); code != 2 || !strings.Contains(stderr, "never overwritten") {
		t.Errorf("regenerating a key: exit %d: %s", code, stderr)
	}

	trust := enforcingPolicy(t, r, filepath.Join(keys, "depot.pub"))

	push := func(tag string, seedValue uint64, sign ...string) {
		t.Helper()
		src := t.TempDir()
		seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: seedValue})
		args := append([]string{"seed", "push"}, sign...)
		code, stdout, stderr := runMain(t, append(args, src, r.Ref("seeds/du:"+tag))...)
		if code != 0 || (len(sign) > 0 && !strings.Contains(stdout, "Signed ")) {
			t.Fatalf("push %s: exit %d: %s%s", tag, code, stdout, stderr)
		}
	}
	push("signed", 1, "--sign-by", filepath.Join(keys, "depot.key"), "--passphrase-file", passFile)
	push("intruder", 2, "--sign-by", filepath.Join(keys, "intruder.key"))
	push("unsigned", 3)

	// A wrong passphrase is refused before anything is pushed.
	os.WriteFile(filepath.Join(keys, "wrong"), []byte("guess"), 0o600)
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: 4})
	if code, _, stderr := runMain(t, "seed", "push", "--sign-by", filepath.Join(keys, "depot.key"), "--passphrase-file", filepath.Join(keys, "wrong"),
		src, r.Ref("seeds/du:never")); code != 2 || !strings.Contains(stderr, "wrong passphrase") {
		t.Errorf("a wrong passphrase: exit %d: %s", code, stderr)
	}
	if code, _, _ := runMain(t, "seed", "inspect", r.Ref("seeds/du:never")); code == 0 {
		t.Error("a push whose key did not open was sent")
	}
	// So is a target where no signature can be attached.
	layout := filepath.Join(t.TempDir(), "layout")
	if code, _, stderr := runMain(t, "seed", "push", "--sign-by", filepath.Join(keys, "depot.key"), "--passphrase-file", passFile,
		src, "oci:"+layout); code != 2 || !strings.Contains(stderr, "is not a registry") {
		t.Errorf("--sign-by to a layout: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(layout); !os.IsNotExist(err) {
		t.Error("a push asked to sign was made where it could not be signed")
	}

	pulled := filepath.Join(t.TempDir(), "pulled")
	if code, stdout, stderr := runMain(t, append(trust, "seed", "pull", r.Ref("seeds/du:signed"), pulled)...); code != 0 {
		t.Fatalf("pull of the signed seed: exit %d: %s%s", code, stdout, stderr)
	}
	dev := filepath.Join(t.TempDir(), "disk.img")
	if code, stdout, stderr := runMain(t, append(trust, "seed", "write", "--image", r.Ref("seeds/du:signed"), "--device", dev)...); code != 0 {
		t.Fatalf("write of the signed seed: exit %d: %s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain(t, append(trust, "seed", "verify", r.Ref("seeds/du:signed"), "--device", dev)...); code != 0 {
		t.Fatalf("verify --device of the signed seed: exit %d: %s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain(t, append(trust, "seed", "verify", r.Ref("seeds/du:signed"))...); code != 0 {
		t.Fatalf("verify of the signed seed: exit %d: %s%s", code, stdout, stderr)
	}

	for _, tc := range []struct{ tag, want string }{
		{"intruder", "cryptographic signature verification failed"},
		{"unsigned", "no signature exists"},
	} {
		dir := filepath.Join(t.TempDir(), "pulled")
		code, _, stderr := runMain(t, append(trust, "seed", "pull", r.Ref("seeds/du:"+tc.tag), dir)...)
		if code != 2 || !strings.Contains(stderr, "refused by the trust policy") || !strings.Contains(stderr, tc.want) {
			t.Errorf("pull %s: exit %d, want 2 and %q: %s", tc.tag, code, tc.want, stderr)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("pull %s left %s behind", tc.tag, dir)
		}
		target := filepath.Join(t.TempDir(), "disk.img")
		code, _, stderr = runMain(t, append(trust, "seed", "write", "--image", r.Ref("seeds/du:"+tc.tag), "--device", target)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("write %s: exit %d, want 2 and %q: %s", tc.tag, code, tc.want, stderr)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("write %s created the target", tc.tag)
		}
		// verify --device reads the seed as write does: under the same policy.
		code, _, stderr = runMain(t, append(trust, "seed", "verify", r.Ref("seeds/du:"+tc.tag), "--device", dev)...)
		if code != 2 || !strings.Contains(stderr, "refused by the trust policy") || !strings.Contains(stderr, tc.want) {
			t.Errorf("verify --device %s: exit %d, want 2 and %q: %s", tc.tag, code, tc.want, stderr)
		}
		// So does verify of the reference alone.
		code, _, stderr = runMain(t, append(trust, "seed", "verify", r.Ref("seeds/du:"+tc.tag))...)
		if code != 2 || !strings.Contains(stderr, "refused by the trust policy") || !strings.Contains(stderr, tc.want) {
			t.Errorf("verify %s: exit %d, want 2 and %q: %s", tc.tag, code, tc.want, stderr)
		}
	}

	// seed inspect lists each seed's signatures; with the depot's key it names the key that
	// verified each one, and says why the others do not verify.
	fp, err := trustpkg.LoadPublicKey(filepath.Join(keys, "depot.pub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag, want string
		code      int
	}{
		{"signed", "verified by key " + fp.Fingerprint, 0},
		{"intruder", "NOT VERIFIED: no given key verifies it", 2},
		{"unsigned", "Signatures:           none", 2},
	} {
		code, stdout, stderr := runMain(t, "seed", "inspect", "--key", filepath.Join(keys, "depot.pub"), r.Ref("seeds/du:"+tc.tag))
		if code != tc.code || !strings.Contains(stdout, tc.want) || (code == 2 && !strings.Contains(stderr, "no signature by a given key")) {
			t.Errorf("inspect %s: exit %d, want %d and %q in:\n%s%s", tc.tag, code, tc.code, tc.want, stdout, stderr)
		}
	}
	code, stdout, _ := runMain(t, "seed", "inspect", "-o", "json", "--key", filepath.Join(keys, "depot.pub"), r.Ref("seeds/du:signed"))
	var view struct {
		Digest     string
		Signatures []trustpkg.SignatureInfo
	}
	if err := json.Unmarshal([]byte(stdout), &view); code != 0 || err != nil || len(view.Signatures) != 1 ||
		view.Signatures[0].VerifiedBy != fp.Fingerprint || string(view.Signatures[0].Claims) != view.Digest {
		t.Errorf("inspect -o json: exit %d, %v: %s", code, err, stdout)
	}

	// cosign, built from its own source, verifies the signature with the public key, and
	// refuses the seeds the key did not sign.
	cosign := testbin.Cosign(t)
	for _, tc := range []struct {
		tag string
		ok  bool
	}{{"signed", true}, {"intruder", false}, {"unsigned", false}} {
		cmd := exec.Command(cosign, "verify", "--key", filepath.Join(keys, "depot.pub"), "--insecure-ignore-tlog=true",
			"--allow-http-registry", "--allow-insecure-registry", r.Ref("seeds/du:"+tc.tag))
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.ok {
			t.Errorf("cosign verify %s: %v (want accepted %v)\n%s", tc.tag, err, tc.ok, out)
		}
	}
}

// enforcingPolicy writes a trust policy that accepts only seeds under r's "seeds"
// namespace signed by the key pub (extra: more fields of the requirement), and the
// registries.d that says where r keeps signatures; it returns the seed command flags
// naming both.
func enforcingPolicy(t *testing.T, r *registry.Registry, pub string, extra ...string) []string {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, fmt.Appendf(nil, `{"default":[{"type":"reject"}],"transports":{"docker":{%q:[{"type":"sigstoreSigned","keyPath":%q%s}]}}}`,
		r.Addr()+"/seeds", pub, strings.Join(extra, "")), 0o644)
	regd := filepath.Join(dir, "registries.d")
	os.Mkdir(regd, 0o755)
	os.WriteFile(filepath.Join(regd, "seeds.yaml"), fmt.Appendf(nil, "docker:\n  %s:\n    use-sigstore-attachments: true\n", r.Addr()), 0o644)
	return []string{"--policy", policy, "--registries.d", regd}
}

// build --sign-by opens the key before any stage runs: a wrong passphrase or a missing key
// is bad input (exit 2) and the build does not start. Without publish in the selection,
// the key is not needed.
func TestBuildChecksItsSigningKeyFirst(t *testing.T) {
	keys := t.TempDir()
	trusttest.Generate(t, filepath.Join(keys, "depot"), "right")
	os.WriteFile(filepath.Join(keys, "wrong"), []byte("wrong\n"), 0o600)
	for _, tc := range []struct{ name, key, want string }{
		{"wrong passphrase", filepath.Join(keys, "depot.key"), "wrong passphrase"},
		{"missing key", filepath.Join(keys, "nope.key"), "no such file"},
		{"public key", filepath.Join(keys, "depot.pub"), "not an encrypted sigstore private key"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runMain(t, "build", "--sign-by", tc.key, "--passphrase-file", filepath.Join(keys, "wrong"),
			"--output-dir", out, "--cache-dir", t.TempDir(), "../../blueprints/demo.yaml")
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q: %s", tc.name, code, tc.want, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: the build started (%s exists)", tc.name, out)
		}
	}
	// plan never publishes, so it needs no key.
	if code, _, stderr := runMain(t, "plan", "--cache-dir", t.TempDir(), "../../blueprints/demo.yaml"); code != 0 {
		t.Errorf("plan: exit %d: %s", code, stderr)
	}
}

// The other direction: a seed cosign signed (with a key pair cosign made) is accepted by
// seed pull under a policy naming cosign's public key, and refused under the depot's.
// cosign's signatures name the repository without a tag, so the policy matches the
// repository (signedIdentity matchRepository), as podman's documentation advises for them.
// (skopeo signs in TestSkopeoChecksAndSignsSeeds.)
func TestCosignSignedSeedIsAccepted(t *testing.T) {
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	cosign := testbin.Cosign(t)
	keys := t.TempDir()
	cosignEnv := append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir(), "COSIGN_PASSWORD=cosign secret")
	gen := exec.Command(cosign, "generate-key-pair")
	gen.Dir, gen.Env = keys, cosignEnv
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	src := t.TempDir()
	seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: 7})
	ref := r.Ref("seeds/du:cosigned")
	if code, _, stderr := runMain(t, "seed", "push", src, ref); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	sign := exec.Command(cosign, "sign", "--yes", "--key", filepath.Join(keys, "cosign.key"), "--tlog-upload=false",
		"--allow-http-registry", "--allow-insecure-registry", "--recursive", ref)
	sign.Env = cosignEnv
	if out, err := sign.CombinedOutput(); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	const byRepository = `,"signedIdentity":{"type":"matchRepository"}`
	if code, stdout, stderr := runMain(t, append(enforcingPolicy(t, r, filepath.Join(keys, "cosign.pub"), byRepository), "seed", "pull", ref, filepath.Join(t.TempDir(), "p"))...); code != 0 {
		t.Fatalf("pull of the seed cosign signed: exit %d: %s%s", code, stdout, stderr)
	}
	trusttest.Generate(t, filepath.Join(keys, "depot"), "x")
	dir := filepath.Join(t.TempDir(), "p")
	if code, _, stderr := runMain(t, append(enforcingPolicy(t, r, filepath.Join(keys, "depot.pub"), byRepository), "seed", "pull", ref, dir)...); code != 2 ||
		!strings.Contains(stderr, "is refused by the trust policy") {
		t.Errorf("pull under another key's policy: exit %d: %s", code, stderr)
	}
}
