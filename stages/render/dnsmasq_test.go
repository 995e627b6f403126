package render

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/node/reconfigure"
)

// The DNS MachineConfig is the overridable single-node form lifecycle-agent requires: its
// scripts, run here for real (bash, paths moved under a temporary root), resolve api,
// api-int and *.apps of the factory's cluster to the relocation address, and of the site's
// cluster once the site's reconfiguration has written the overrides file.
func TestDnsmasqConfig(t *testing.T) {
	m, err := dnsmasqManifest("4.16.0", "seed", "factory.example", Relocation{InternalIP: "192.168.127.10/24"})
	if err != nil {
		t.Fatal(err)
	}
	if m.info.Name != DnsmasqMachineConfig {
		t.Errorf("MachineConfig %s, want %s", m.info.Name, DnsmasqMachineConfig)
	}
	raw := assertMachineConfig(t, m.name, m.data, "3.4.0")
	u, ok := unitsOf(t, raw)["dnsmasq.service"]
	if !ok || u.Enabled == nil || !*u.Enabled || u.Contents == nil ||
		!strings.Contains(*u.Contents, "Before=kubelet.service crio.service\n") || !strings.Contains(*u.Contents, "ExecStartPre="+DnsmasqConfigScript+"\n") {
		t.Fatalf("dnsmasq.service %+v", u)
	}
	if reconfigure.DnsmasqOverridesFile != DnsmasqOverrides {
		t.Fatalf("the site hook writes %s, the seed reads %s", reconfigure.DnsmasqOverridesFile, DnsmasqOverrides)
	}
	// lifecycle-agent's file list (hack/generate-dnsmasq-site-policy-section.sh
	// generate_dnsmasq_body): the two scripts and the NetworkManager setting, nothing else.
	if got, want := ignitionPaths(t, raw), []string{DnsmasqConfigScript, ForceDNSScript, NMSingleNodeConf, "/etc/systemd/system/dnsmasq.service"}; !sameSet(got, want) {
		t.Errorf("the dnsmasq MachineConfig places %q, want %q", got, want)
	}
	if mode, _ := fileEntry(t, raw, NMSingleNodeConf); mode != 0o644 {
		t.Errorf("%s mode %o, want 0644", NMSingleNodeConf, mode)
	}
	root := t.TempDir()
	script := func(path string) string {
		mode, body := fileEntry(t, raw, path)
		if mode != 0o555 {
			t.Errorf("%s mode %o", path, mode)
		}
		for _, p := range []string{"/etc/", "/run/"} {
			body = strings.ReplaceAll(body, " "+p, " "+root+p)
			body = strings.ReplaceAll(body, "="+p, "="+root+p)
			body = strings.ReplaceAll(body, ">"+p, ">"+root+p)
		}
		f := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return f
	}
	run := func(f string, args ...string) {
		t.Helper()
		if out, err := exec.Command("bash", append([]string{f}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, out)
		}
	}
	records := func() string {
		b, err := os.ReadFile(filepath.Join(root, DnsmasqRecords))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	config := script(DnsmasqConfigScript)
	run(config)
	if got, want := records(), "address=/apps.seed.factory.example/192.168.127.10\naddress=/api-int.seed.factory.example/192.168.127.10\naddress=/api.seed.factory.example/192.168.127.10\n"; got != want {
		t.Errorf("factory records:\n%s\nwant\n%s", got, want)
	}
	// The site renames the cluster: the hook writes the overrides, dnsmasq restarts.
	os.MkdirAll(filepath.Join(root, "etc/default"), 0o755)
	os.WriteFile(filepath.Join(root, DnsmasqOverrides), []byte("SNO_CLUSTER_NAME_OVERRIDE=store-1\nSNO_BASE_DOMAIN_OVERRIDE=edge.example\nSNO_DNSMASQ_IP_OVERRIDE=192.168.127.10\n"), 0o644)
	run(config)
	if got := records(); !strings.Contains(got, "address=/api-int.store-1.edge.example/192.168.127.10\n") || strings.Contains(got, "factory.example") {
		t.Errorf("site records:\n%s", got)
	}
	// forcedns puts the node's dnsmasq first, and the cluster domain first in search.
	os.MkdirAll(filepath.Join(root, "run/NetworkManager"), 0o755)
	os.WriteFile(filepath.Join(root, "run/NetworkManager/resolv.conf"), []byte("search site.example\nnameserver 10.0.0.53\n"), 0o644)
	run(script(ForceDNSScript), "br-ex", "up")
	b, err := os.ReadFile(filepath.Join(root, "etc/resolv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "nameserver 192.168.127.10\nsearch store-1.edge.example site.example\nnameserver 10.0.0.53\n"; got != want {
		t.Errorf("resolv.conf:\n%s\nwant\n%s", got, want)
	}
	if _, body := fileEntry(t, raw, NMSingleNodeConf); body != "[main]\nrc-manager=unmanaged\n" {
		t.Errorf("%s = %q", NMSingleNodeConf, body)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// No MachineConfig render produces owns a file the site's hook writes: the MCD compares
// every file of its current config with the disk (machine-config-operator
// pkg/daemon/on_disk_validation.go) and degrades the pool when one differs, so a file the
// site rewrites must belong to no MachineConfig (lifecycle-agent's dnsmasq MachineConfig
// carries no overrides file, hack/generate-dnsmasq-site-policy-section.sh).
func TestMachineConfigsOwnNoSiteFile(t *testing.T) {
	siteWrites := []string{reconfigure.DnsmasqOverridesFile}
	owned := map[string]string{}
	for rel, doc := range readTree(t, renderTo(t, clusterOptions(t))) {
		if !strings.HasPrefix(rel, "manifests/") || !strings.Contains(string(doc), "kind: MachineConfig\n") {
			continue
		}
		for _, p := range ignitionPaths(t, mcConfig(t, doc)) {
			owned[p] = rel
		}
	}
	if _, ok := owned[DnsmasqConfigScript]; !ok {
		t.Fatalf("no rendered MachineConfig places %s; the check below would pass vacuously (%d paths)", DnsmasqConfigScript, len(owned))
	}
	for _, p := range siteWrites {
		if rel, ok := owned[p]; ok {
			t.Errorf("%s owns %s, which the site hook rewrites: the MCD would find it changed and degrade the pool", rel, p)
		}
	}
}
