package seedinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	good := Info{OCPVersion: "4.20.3", BaseDomain: "factory.example", ClusterName: "seed", NodeIPs: []string{"192.168.127.10"},
		Hostname: "seed-node", IngressCertificateCN: "ingress-operator@1700000000"}
	b, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"seed_cluster_ocp_version"`, `"sno_hostname"`, `"node_ips"`, `"ingress_certificate_cn"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("no LCA key %s in %s", key, b)
		}
	}
	p := filepath.Join(dir, "info.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p)
	if err != nil || got.Hostname != "seed-node" || got.NodeIPs[0] != "192.168.127.10" {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	for name, content := range map[string]string{
		"empty":    `{}`,
		"bad json": `{"cluster_name":`,
		"huge":     strings.Repeat(" ", maxSize+10),
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		if _, err := Read(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Read(filepath.Join(dir, "info.json")); err != nil {
		t.Fatal(err)
	}
	if err := (Info{}).Check(); err == nil || !strings.Contains(err.Error(), "cluster_name") || !strings.Contains(err.Error(), "node_ips") {
		t.Errorf("Check of nothing = %v, want every missing field", err)
	}
}
