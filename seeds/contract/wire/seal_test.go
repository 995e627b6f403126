package wire

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSealRequestRoundTrip(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "seal.img")
	b, err := EncodeSealRequest(SealRequest{Version: SealRequestVersion, Target: "coreos", KeepPullSecret: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<20 {
		t.Errorf("seal disk is %d bytes, want a MiB", len(b))
	}
	os.WriteFile(disk, b, 0o644)
	got, err := ReadSealRequest(disk)
	if err != nil || got.Target != "coreos" || !got.KeepPullSecret {
		t.Fatalf("request = %+v, %v", got, err)
	}
	for name, body := range map[string]string{
		"unknown field": `{"version":1,"target":"coreos","wipe":true}`,
		"version":       `{"version":2,"target":"coreos"}`,
		"target":        `{"version":1,"target":"windows"}`,
		"zeros":         "\x00\x00",
	} {
		os.WriteFile(disk, []byte(body), 0o644)
		if _, err := ReadSealRequest(disk); err == nil {
			t.Errorf("%s: accepted %q", name, body)
		}
	}
}
