package siteconfig

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// An image-based-config.yaml or the install-config.yaml beside it that names a key twice,
// at the top or deeper, or holds a second document, is refused at the place of the second
// key (file:line:column and its path), naming the first; never read as another kind of
// file, and never with one of the two values silently taken.
func TestImageBasedStrict(t *testing.T) {
	end := func(s string) int { return strings.Count(s, "\n") + 1 } // the line after s
	for _, tc := range []struct {
		name, ibi, ic string
		file          string // the file the problem is in
		want          string // after file
	}{
		{"duplicated key", ibiSite + "hostname: other.example.com\n", ibiInstallConfig, "image-based-config.yaml",
			fmt.Sprintf(`:%d:1: hostname: duplicate key "hostname" (first at line 13, column 1)`, end(ibiSite))},
		{"duplicated kind", strings.Replace(ibiSite, "metadata:\n", "kind: ImageBasedConfig\nmetadata:\n", 1), ibiInstallConfig, "image-based-config.yaml",
			`:8:1: kind: duplicate key "kind" (first at line 7, column 1)`},
		{"duplicate at depth", strings.Replace(ibiSite, "      state: up\n", "      state: up\n      name: eth1\n", 1), ibiInstallConfig, "image-based-config.yaml",
			`:22:7: networkConfig.interfaces[0].name: duplicate key "name" (first at line 19, column 7)`},
		{"second document", ibiSite + "---\nhostname: other\n", ibiInstallConfig, "image-based-config.yaml",
			fmt.Sprintf(`:%d:1: more than one YAML document`, end(ibiSite))},
		{"install config: duplicated key", ibiSite, ibiInstallConfig + "baseDomain: other.example\n", installConfigFile,
			fmt.Sprintf(`:%d:1: baseDomain: duplicate key "baseDomain" (first at line 2, column 1)`, end(ibiInstallConfig))},
		{"install config: duplicate at depth, in a field not taken", ibiSite,
			strings.Replace(ibiInstallConfig, "  - cidr: 192.168.122.0/23\n", "  - cidr: 192.168.122.0/23\n    cidr: 10.0.0.0/8\n", 1), installConfigFile,
			`:15:5: networking.machineNetwork[0].cidr: duplicate key "cidr" (first at line 14, column 5)`},
		{"install config: second document", ibiSite, ibiInstallConfig + "---\nbaseDomain: other.example\n", installConfigFile,
			fmt.Sprintf(`:%d:1: more than one YAML document`, end(ibiInstallConfig))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ibiDir(t, tc.ibi, tc.ic)
			_, err := Load(path)
			want := filepath.Join(filepath.Dir(path), tc.file) + tc.want
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Load = %v\nwant ...%s", err, want)
			}
			if strings.Contains(err.Error(), "apiVersion") {
				t.Errorf("read as another kind of file: %v", err)
			}
		})
	}
}

// The installer's manifest.json on a config image is decoded strictly too.
func TestSeedReconfigurationStrict(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"duplicated key", `{"api_version":1,` + "\n" + `"api_version":1}`, `line 2, column 1: duplicate key "api_version" (first at line 1, column 2)`},
		{"data after it", `{"api_version":1}` + "\n[]", "line 2, column 1: data after the JSON document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fromSeedReconfiguration([]byte(tc.doc), nil)
			if err == nil || !strings.Contains(err.Error(), imageBasedManifest) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %s and %q", err, imageBasedManifest, tc.want)
			}
		})
	}
}
