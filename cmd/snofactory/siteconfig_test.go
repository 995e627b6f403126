package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

func TestSiteConfigCommands(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: snofactory.io/v1alpha1\nkind: SiteConfig\nmetadata:\n  name: x\nspec:\n  hostname: Bad_Host\n  ntpp: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	iso := filepath.Join(dir, "site.iso")
	readOnly := filepath.Join(dir, "ro.iso")
	os.WriteFile(readOnly, []byte("keep"), 0o444)
	input := filepath.Join(dir, "site.yaml")
	demo, _ := os.ReadFile("../../blueprints/demo/site.yaml")
	os.WriteFile(input, demo, 0o644)
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   []string
		wantFile bool
	}{
		{"validate good", []string{"site-config", "validate", "../../seeds/site/siteconfig/testdata/site.yaml"}, exitOK, "site store-0042, hostname sno-0042, 1 interfaces, 1 DNS servers, pull secret yes, 1 mirrors, 1 manifests", nil, false},
		{"validate bad", []string{"site-config", "validate", bad}, exitBadInput, "", []string{bad + ":6:13: spec.hostname: \"Bad_Host\" is not an RFC 1123 host name", bad + ":7:3: spec.ntpp: unknown field; hint: did you mean \"ntp\"?"}, false},
		{"validate two files", []string{"site-config", "validate", bad, bad}, exitBadInput, "", []string{"name one site config file"}, false},
		{"create", []string{"site-config", "create", "../../blueprints/demo/site.yaml", "-o", iso}, exitOK, "hostname edge-01", nil, true},
		{"create bad", []string{"site-config", "create", bad, "-o", filepath.Join(dir, "bad.iso")}, exitBadInput, "", []string{"spec.hostname"}, false},
		{"create over a directory", []string{"site-config", "create", "../../blueprints/demo/site.yaml", "-o", dir}, exitBadInput, "", []string{"is a directory"}, false},
		{"validate image-based", []string{"site-config", "validate", "../../seeds/site/siteconfig/testdata/image-based/image-based-config.yaml"}, exitOK,
			"site store-0042, hostname sno-0042.store.example.com, 1 interfaces, 0 DNS servers, pull secret yes, 1 mirrors, 0 manifests", nil, false},
		{"create from image-based", []string{"site-config", "create", "../../seeds/site/siteconfig/testdata/image-based/image-based-config.yaml", "-o", filepath.Join(dir, "ibi.iso"), "--no-kubeadmin"},
			exitOK, "hostname sno-0042.store.example.com", nil, false},
		{"create over its own input", []string{"site-config", "create", input, "-o", input}, exitBadInput, "", []string{"is this command's input"}, false},
		{"create onto a character device", []string{"site-config", "create", input, "-o", "/dev/null"}, exitBadInput, "", []string{"/dev/null: is a character device"}, false},
		{"create over a read-only file", []string{"site-config", "create", input, "-o", readOnly}, exitBadInput, "", []string{"is a read-only file"}, false},
		{"create without -o", []string{"site-config", "create", "../../blueprints/demo/site.yaml"}, exitBadInput, "", []string{"-o site.iso"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := validateCLI(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) {
				t.Errorf("exit %d, stdout %q; want %d, ...%s...\nstderr: %s", code, stdout, tc.code, tc.stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tc.wantFile {
				sc, err := siteconfig.ReadMedium(iso)
				if err != nil || sc.Spec.Hostname != "edge-01" {
					t.Errorf("ReadMedium(%s) = %+v, %v", iso, sc, err)
				}
			}
		})
	}
	if sc, err := siteconfig.ReadMedium(filepath.Join(dir, "ibi.iso")); err != nil || sc.Spec.ClusterName != "sno-0042" || sc.Spec.Network.Interfaces[0].MACAddress != "52:54:00:12:34:56" {
		t.Errorf("the medium made from an image-based config: %+v, %v", sc, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.iso")); !os.IsNotExist(err) {
		t.Errorf("a bad site config left a medium behind: %v", err)
	}
}
