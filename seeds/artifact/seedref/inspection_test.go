package seedref_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/artifact/seed"
	"github.com/snofactory/snofactory/seeds/artifact/seedref"
	"github.com/snofactory/snofactory/seeds/artifact/trust"
)

func TestInspection(t *testing.T) {
	m := &seed.Manifest{Name: "edge", Disks: []seed.Disk{{Format: "raw", File: "raw.zst"}}}
	for _, tc := range []struct {
		name     string
		attached *trust.Attached
		wantJSON string
		wantText []string
	}{
		{"a local seed", nil,
			`{"seed":{"schemaVersion":0,"name":"edge"`,
			[]string{"Name:                 edge", "Disk raw:             raw.zst, 0B stored, 0B raw, raw digest "}},
		{"a registry seed", &trust.Attached{Digest: "sha256:d", Signatures: []trust.SignatureInfo{{Identity: "r/s:1"}}},
			`{"digest":"sha256:d","seed":{"schemaVersion":0,"name":"edge"`,
			[]string{"Name:                 edge", "Digest:               sha256:d", "Signature:            r/s:1, by  at 0001-01-01T00:00:00Z: not checked (give --key PREFIX.pub)", "Attestations:         none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := seedref.NewInspection(m, tc.attached)
			b, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), tc.wantJSON) {
				t.Errorf("JSON %s, want it to start %s", b, tc.wantJSON)
			}
			var back map[string]json.RawMessage
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			// A local seed has nothing attached: empty lists, not null.
			for _, k := range []string{"signatures", "attestations"} {
				if v := string(back[k]); tc.attached == nil && v != "[]" {
					t.Errorf("%s is %q, want []", k, v)
				}
			}
			var text bytes.Buffer
			if err := in.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.wantText {
				if !strings.Contains(text.String(), line+"\n") {
					t.Errorf("text lacks %q:\n%s", line, text.String())
				}
			}
		})
	}
}
