package trust_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/snofactory/snofactory/seeds/artifact/ociseed"
	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seed/seedtest"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
	"github.com/snofactory/snofactory/seeds/artifact/trust/trusttest"
	"github.com/snofactory/snofactory/test/registry"
)

// keys makes a key pair under dir and returns its prefix.
func keys(t *testing.T, dir, name string) string {
	t.Helper()
	return trusttest.Generate(t, filepath.Join(dir, name), "correct horse").Prefix
}

// policy writes a policy.json that requires a sigstore signature by pub for every docker
// image, and a registries.d that reads sigstore attachments; it returns both.
func policy(t *testing.T, pub string) trust.Policy {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.json")
	os.WriteFile(file, fmt.Appendf(nil, `{"default":[{"type":"reject"}],"transports":{"docker":{"":[{"type":"sigstoreSigned","keyPath":%q}]}}}`, pub), 0o644)
	rd := filepath.Join(dir, "registries.d")
	os.Mkdir(rd, 0o755)
	os.WriteFile(filepath.Join(rd, "default.yaml"), []byte("default-docker:\n  use-sigstore-attachments: true\n"), 0o644)
	return trust.Policy{File: file, RegistriesDir: rd}
}

// pushSigned pushes a small seed (its content from seedValue) to ref and, with a key, signs and attaches the signature
// as seed push --sign-by does.
func pushSigned(t *testing.T, ref, key string, seedValue uint64) *ociseed.Result {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	seedtest.Write(t, dir, seedtest.Options{Formats: []string{seed.FormatChunked}, Seed: seedValue})
	o := []ociseed.Option{ociseed.WithKeychain(authn.NewMultiKeychain())}
	res, err := ociseed.Push(ctx, dir, ref, o...)
	if err != nil {
		t.Fatal(err)
	}
	if key == "" {
		return res
	}
	s, err := trust.LoadSigner(key, []byte("correct horse"), "snofactory test")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(res.Digest, ref, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	layer := ociseed.SignatureLayer{MediaType: trust.MediaTypeSignature, Payload: sig.Payload,
		Annotations: map[string]string{trust.AnnotationSignature: sig.Base64}}
	for range 2 { // attaching twice keeps one copy
		if err := ociseed.AttachSignature(ctx, ref, res.Digest, layer, o...); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// The containers policy, evaluated by containers/image as podman and skopeo evaluate it,
// accepts a seed signed by the key it names and answers with the manifest's digest; it
// refuses, naming the reason, a seed signed by another key, an unsigned seed, and a
// signed manifest under a tag its signature does not name.
func TestPolicyAcceptsOnlyTheKeysSeeds(t *testing.T) {
	ctx := context.Background()
	r := registry.StartT(t, registry.Options{})
	dir := t.TempDir()
	good, other := keys(t, dir, "depot"), keys(t, dir, "intruder")
	p := policy(t, trust.PubFile(good))

	signed := pushSigned(t, r.Ref("seeds/du:signed"), trust.KeyFile(good), 1)
	d, err := trust.Check(ctx, r.Ref("seeds/du:signed"), p)
	if err != nil || d != signed.Digest {
		t.Fatalf("Check of a seed signed by the policy's key = %s, %v; want %s", d, err, signed.Digest)
	}

	pushSigned(t, r.Ref("seeds/du:wrong-key"), trust.KeyFile(other), 2)
	pushSigned(t, r.Ref("seeds/du:unsigned"), "", 3)
	// The same manifest under another tag: its signature names the seed it signed.
	if again := pushSigned(t, r.Ref("seeds/du:renamed"), "", 1); again.Digest != signed.Digest {
		t.Fatalf("the test seeds differ: %s, %s", again.Digest, signed.Digest)
	}
	for _, tc := range []struct{ tag, want string }{
		{"wrong-key", "cryptographic signature verification failed"},
		{"unsigned", "no signature exists"},
		{"renamed", "is not accepted"},
	} {
		_, err := trust.Check(ctx, r.Ref("seeds/du:"+tc.tag), p)
		var ue *trust.UntrustedError
		if !errors.As(err, &ue) || !errors.Is(err, trust.ErrUntrusted) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want a refusal saying %q", tc.tag, err, tc.want)
		}
	}
}

// A key pair is written once: the private key encrypted and 0600, never overwritten;
// a wrong passphrase is named.
func TestGenerateKeys(t *testing.T) {
	dir := t.TempDir()
	prefix := keys(t, dir, "k")
	fi, err := os.Stat(trust.KeyFile(prefix))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v, mode %v", err, fi.Mode())
	}
	b, _ := os.ReadFile(trust.KeyFile(prefix))
	if !strings.Contains(string(b), "ENCRYPTED COSIGN PRIVATE KEY") { // the format cosign and skopeo share
		t.Errorf("the private key is not an encrypted cosign key")
	}
	if err := trust.GenerateKeys(prefix, []byte("x")); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Errorf("regenerating over an existing key: %v", err)
	}
	if _, err := trust.LoadSigner(trust.KeyFile(prefix), []byte("wrong"), "t"); err == nil || !strings.Contains(err.Error(), "wrong passphrase") {
		t.Errorf("a wrong passphrase: %v", err)
	}
	if err := trust.GenerateKeys(filepath.Join(dir, "empty"), nil); err == nil {
		t.Error("a key without a passphrase was written")
	}
}
