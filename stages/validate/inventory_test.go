package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// The inventory validate hands the seal is the facts' packages and binaries, and nothing
// else the node reported (files, certificates).
func TestWriteInventory(t *testing.T) {
	f := &wire.Facts{
		Files: []wire.FileFact{{Path: "/etc/motd", SHA256: "x"}},
		Certs: []wire.CertFact{{Name: wire.CertKubeletClient}},
		Inventory: wire.Inventory{
			Packages: &wire.PackageFacts{Manager: wire.ManagerRPM, Total: 1, Packages: []wire.PackageFact{{Name: "bash", Version: "5.1.8", Release: "9.el9", Arch: "x86_64"}}},
			Binaries: []wire.BinaryFact{{Path: wire.AgentPath, Installed: true, SHA256: "ab"}},
		},
	}
	p := filepath.Join(t.TempDir(), InventoryFile)
	if err := writeInventory(p, f); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 || raw["packages"] == nil || raw["binaries"] == nil {
		t.Errorf("inventory holds %s", b)
	}
	var got wire.Inventory
	if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, f.Inventory) {
		t.Errorf("inventory = %+v (%v), want %+v", got, err, f.Inventory)
	}
}
