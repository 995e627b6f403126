package trust

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// An envelope opens with the key that made it and names its subject; one byte changed
// anywhere in it, or another key, or a malformed envelope is refused with the reason.
func TestEnvelopes(t *testing.T) {
	dir := t.TempDir()
	signers := map[string]*Signer{}
	var pubs []PublicKey
	for _, name := range []string{"depot", "other"} {
		prefix := filepath.Join(dir, name)
		if err := GenerateKeys(prefix, []byte("pw")); err != nil {
			t.Fatal(err)
		}
		s, err := LoadSigner(KeyFile(prefix), []byte("pw"), "test")
		if err != nil {
			t.Fatal(err)
		}
		signers[name] = s
		pub, err := LoadPublicKey(PubFile(prefix))
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, pub)
	}
	subject := digest.FromString("seed manifest")
	st, err := NewStatement("registry.example/seeds/du", subject, PredicateSLSAProvenance, json.RawMessage(`{"buildDefinition":{"buildType":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	env, err := signers["depot"].Attest(st)
	if err != nil {
		t.Fatal(err)
	}
	got, who, err := OpenEnvelope(env, pubs)
	if err != nil || who != 0 || !got.About(subject) || got.About(digest.FromString("another")) || got.PredicateType != PredicateSLSAProvenance {
		t.Fatalf("OpenEnvelope = %+v, %d, %v", got, who, err)
	}
	if _, who, err := OpenEnvelope(env, nil); err != nil || who != -1 {
		t.Errorf("without keys: %d, %v; want the statement unchecked", who, err)
	}
	var e Envelope
	json.Unmarshal(env, &e)
	changed := e
	changed.Payload = []byte(strings.Replace(string(e.Payload), `"x"`, `"y"`, 1))
	changedJSON, _ := json.Marshal(changed)
	retyped := e
	retyped.PayloadType = "application/json"
	retypedJSON, _ := json.Marshal(retyped)
	for _, tc := range []struct {
		name string
		env  []byte
		keys []PublicKey
		want string
	}{
		{"changed statement", changedJSON, pubs, "none of its 1 signatures"},
		{"another key", env, pubs[1:], "none of its 1 signatures"},
		{"another payload type", retypedJSON, pubs, "not an in-toto statement"},
		{"not JSON", []byte("{"), pubs, "not a DSSE envelope"},
		{"too large", make([]byte, maxEnvelope+1), pubs, "at most"},
	} {
		_, _, err := OpenEnvelope(tc.env, tc.keys)
		if !errors.Is(err, ErrBadAttestation) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadAttestation saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewStatement("x", "sha256:nothex", PredicateSPDX, json.RawMessage(`{}`)); err == nil {
		t.Error("a statement about a malformed digest was made")
	}
}
