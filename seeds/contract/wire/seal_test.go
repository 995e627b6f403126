package wire

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/seedfit"
)

func TestSealRequestRoundTrip(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "seal.img")
	fit := &seedfit.Record{Version: seedfit.Version, IPFamilies: []string{seedfit.IPv4, seedfit.IPv6}, FIPS: true}
	b, err := EncodeSealRequest(SealRequest{Version: SealRequestVersion, Target: "coreos", KeepPullSecret: true, Fit: fit})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<20 {
		t.Errorf("seal disk is %d bytes, want a MiB", len(b))
	}
	os.WriteFile(disk, b, 0o644)
	got, err := ReadSealRequest(disk)
	if err != nil || got.Target != "coreos" || !got.KeepPullSecret || !reflect.DeepEqual(got.Fit, fit) {
		t.Fatalf("request = %+v, %v", got, err)
	}
	for name, body := range map[string]string{
		"unknown field": `{"version":1,"target":"coreos","wipe":true}`,
		"version":       `{"version":2,"target":"coreos"}`,
		"target":        `{"version":1,"target":"windows"}`,
		"zeros":         "\x00\x00",
		"fit version":   `{"version":1,"target":"coreos","fit":{"version":3,"proxy":false,"fips":false}}`,
		"fit family":    `{"version":1,"target":"coreos","fit":{"version":1,"proxy":false,"fips":false,"ipFamilies":["ipv5"]}}`,
	} {
		os.WriteFile(disk, []byte(body), 0o644)
		if _, err := ReadSealRequest(disk); err == nil {
			t.Errorf("%s: accepted %q", name, body)
		}
	}
}
