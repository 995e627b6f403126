package render

import (
	"os"
	"os/exec"
	"path/filepath"
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
	root := t.TempDir()
	script := func(path string) string {
		mode, body := fileEntry(t, raw, path)
		if mode != 0o755 {
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
