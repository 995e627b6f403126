package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/test/registry"
	"github.com/snofactory/snofactory/test/testbin"
)

// skopeo, built from its own source by make deps, is an oracle both ways, with the files
// podman and skopeo read: a policy.json requiring sigstoreSigned by the depot's key, and a
// registries.d with use-sigstore-attachments.
//   - It copies (all of it, digests preserved) a seed we signed, and refuses one signed by
//     another key and an unsigned one, each with its reason.
//   - A seed skopeo signed (--sign-by-sigstore-private-key, with a key from snofactory keys
//     generate) is taken by seed pull under that policy, and refused under another key's.
func TestSkopeoChecksAndSignsSeeds(t *testing.T) {
	skopeo := testbin.Skopeo(t)
	r := registry.StartT(t, registry.Options{})
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "auth.json"))
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	keys := t.TempDir()
	passFile := filepath.Join(keys, "pass")
	os.WriteFile(passFile, []byte("depot secret\n"), 0o600)
	for _, name := range []string{"depot", "intruder"} {
		if code, _, stderr := runMain(t, "keys", "generate", "--passphrase-file", passFile, filepath.Join(keys, name)); code != 0 {
			t.Fatalf("keys generate %s: %s", name, stderr)
		}
	}
	push := func(tag string, n uint64, sign ...string) string {
		t.Helper()
		src := t.TempDir()
		seedtest.Write(t, src, seedtest.Options{RawSize: 1 << 20, Formats: []string{seed.FormatChunked}, Seed: n})
		ref := r.Ref("seeds/du:" + tag)
		if code, _, stderr := runMain(t, append(append([]string{"seed", "push"}, sign...), src, ref)...); code != 0 {
			t.Fatalf("push %s: %s", tag, stderr)
		}
		return ref
	}
	signed := push("signed", 1, "--sign-by", filepath.Join(keys, "depot.key"), "--passphrase-file", passFile)
	intruder := push("intruder", 2, "--sign-by", filepath.Join(keys, "intruder.key"), "--passphrase-file", passFile)
	unsigned := push("unsigned", 3)

	depot := enforcingPolicy(t, r, filepath.Join(keys, "depot.pub"))
	skopeoRun := func(policy []string, args ...string) (string, error) {
		// enforcingPolicy's flags are skopeo's global --policy and --registries.d.
		out, err := exec.Command(skopeo, append(append(policy, "--tmpdir", t.TempDir()), args...)...).CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct {
		name, ref, refusal string
	}{
		{"ours, signed by the depot's key", signed, ""},
		{"signed by another key", intruder, "cryptographic signature verification failed"},
		{"unsigned", unsigned, "A signature was required, but no signature exists"},
	} {
		out, err := skopeoRun(depot, "copy", "--src-tls-verify=false", "--all", "--preserve-digests", "--remove-signatures",
			"docker://"+tc.ref, "oci:"+filepath.Join(t.TempDir(), "layout")+":seed")
		if accepted := err == nil; accepted != (tc.refusal == "") || !strings.Contains(out, tc.refusal) {
			t.Errorf("skopeo copy of the seed %s: %v, want accepted %v (%q)\n%s", tc.name, err, tc.refusal == "", tc.refusal, out)
		}
	}

	// The other direction: skopeo signs a copy of the unsigned seed.
	bySkopeo := r.Ref("seeds/du:skopeo-signed")
	if out, err := skopeoRun(depot[2:], "copy", "--src-tls-verify=false", "--dest-tls-verify=false", "--all", "--preserve-digests",
		"--sign-by-sigstore-private-key", filepath.Join(keys, "depot.key"), "--sign-passphrase-file", passFile,
		"docker://"+unsigned, "docker://"+bySkopeo); err != nil {
		t.Fatalf("skopeo copy --sign-by-sigstore-private-key: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "pulled")
	if code, stdout, stderr := runMain(t, append(depot, "seed", "pull", bySkopeo, dir)...); code != 0 {
		t.Fatalf("seed pull of the seed skopeo signed: exit %d: %s%s", code, stdout, stderr)
	}
	if code, stdout, _ := runMain(t, "seed", "verify", dir); code != 0 {
		t.Errorf("seed verify of the seed skopeo signed: exit %d: %s", code, stdout)
	}
	other := filepath.Join(t.TempDir(), "pulled")
	if code, _, stderr := runMain(t, append(enforcingPolicy(t, r, filepath.Join(keys, "intruder.pub")), "seed", "pull", bySkopeo, other)...); code != 2 ||
		!strings.Contains(stderr, "refused by the trust policy") {
		t.Errorf("seed pull under another key's policy: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a refused pull left %s", other)
	}
}
