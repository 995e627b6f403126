package trust

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Envelopes, statements and policy files are decoded strictly: a key named twice (which
// another verifier may read the other way) or anything after the document is refused,
// with the input, the place and the key named.
func TestStrictTrustJSON(t *testing.T) {
	envelope := func(payload string) string {
		return `{"payloadType":"` + PayloadTypeInToto + `","payload":"` + base64.StdEncoding.EncodeToString([]byte(payload)) + `","signatures":[]}`
	}
	open := func(b string) func(*testing.T) (string, error) {
		return func(*testing.T) (string, error) {
			_, _, err := OpenEnvelope([]byte(b), nil)
			return "the attestation", err
		}
	}
	policy := func(b string) func(*testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			p := filepath.Join(t.TempDir(), "policy.json")
			os.WriteFile(p, []byte(b), 0o600)
			return p, checkPolicyFiles(p, []byte(b))
		}
	}
	for _, tc := range []struct {
		name string
		read func(t *testing.T) (input string, err error)
		want string
	}{
		{"envelope: duplicated key", open(`{"payloadType":"a",` + "\n" + `"payloadType":"b"}`), `line 2, column 1: duplicate key "payloadType" (first at line 1, column 2)`},
		{"envelope: data after it", open(envelope("{}") + "\n{}"), "line 2, column 1: data after the JSON document"},
		{"statement: duplicate at depth", open(envelope(`{"_type":"` + StatementType + `","subject":[{"name":"a","name":"b"}]}`)),
			`line 1, column 67: duplicate key "name" (first at line 1, column 56)`},
		{"statement: data after it", open(envelope(`{"_type":"` + StatementType + `"} {}`)), "data after the JSON document"},
		{"policy: duplicated key", policy(`{"default":[{"type":"reject"}],` + "\n" + `"default":[{"type":"insecureAcceptAnything"}]}`),
			`line 2, column 1: duplicate key "default" (first at line 1, column 2)`},
		{"policy: data after it", policy(`{"default":[{"type":"reject"}]}{}`), "line 1, column 32: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input, err := tc.read(t)
			if err == nil || !strings.Contains(err.Error(), input) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to name %q and say %q", err, input, tc.want)
			}
		})
	}
}
