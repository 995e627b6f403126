package seal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/stages/internal/handoff"
)

// The inventory the node reported is decoded strictly: a key named twice or data after it
// is refused, with the file, the place and the key named.
func TestReadInventoryStrict(t *testing.T) {
	for _, tc := range []struct{ name, inv, want string }{
		{"duplicated key", `{"packages":null,` + "\n" + `"packages":null}`, `line 2, column 1: duplicate key "packages" (first at line 1, column 2)`},
		{"data after it", "{}\n{}", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "inventory.json"), []byte(tc.inv), 0o644)
			v := handoff.Input[handoff.Validate]{Dir: dir, Out: handoff.Validate{Inventory: handoff.File("inventory.json")}}
			_, err := readInventory(v)
			if err == nil || !strings.Contains(err.Error(), "inventory.json") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readInventory = %v, want the file and %q", err, tc.want)
			}
		})
	}
}
