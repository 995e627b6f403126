package systemdsite_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
	"github.com/snofactory/snofactory/stages"
)

// The site: the node's two NICs in an active-backup bond, the cluster on VLAN 100 over it
// with static dual-stack addresses and a default route per family, the peer (the test's
// namespace) as gateway, DNS, NTP and proxy.
const (
	siteVLAN           = 100
	nodeV4, nodeV6     = "192.168.100.10", "fd00:100::10"
	peerV4, peerV6     = "192.168.100.1", "fd00:100::1"
	proxyPort          = "3128"
	proxiedHost        = "registry.site.invalid" // snofactory-proxy-probe.service asks for it
	siteHostname       = "sno-sysd"
	siteConfigTemplate = `apiVersion: snofactory.io/v1alpha1
kind: SiteConfig
metadata:
  name: store-sysd
spec:
  hostname: ` + siteHostname + `
  network:
    interfaces:
      - {name: %[1]s, type: ethernet, state: up, mac-address: "%[3]s"}
      - {name: %[2]s, type: ethernet, state: up, mac-address: "%[4]s"}
      - name: bond0
        type: bond
        state: up
        ipv4: {enabled: false}
        ipv6: {enabled: false}
        link-aggregation:
          mode: active-backup
          options: {miimon: 100}
          port: [%[1]s, %[2]s]
      - name: bond0.100
        type: vlan
        state: up
        vlan: {base-iface: bond0, id: 100}
        ipv4:
          enabled: true
          dhcp: false
          address: [{ip: ` + nodeV4 + `, prefix-length: 24}]
        ipv6:
          enabled: true
          dhcp: false
          autoconf: false
          address: [{ip: "` + nodeV6 + `", prefix-length: 64}]
    routes:
      config:
        - {destination: 0.0.0.0/0, next-hop-address: ` + peerV4 + `, next-hop-interface: bond0.100}
        - {destination: "::/0", next-hop-address: "` + peerV6 + `", next-hop-interface: bond0.100}
    dns-resolver:
      config:
        server: [` + peerV4 + `, "` + peerV6 + `"]
        search: [site.example]
  ntp:
    servers: [` + peerV4 + `]
  nodeLabels:
    site.example.com/store: sysd
    kubernetes.io/hostname: not-the-kubelets
  proxy:
    httpProxy: http://` + peerV4 + `:` + proxyPort + `
    noProxy: .site.example,` + peerV4 + `
  additionalTrustBundle: |
%[5]s`
)

// checkSeedSite boots the seed in dir once with seed boot, a site-config medium made by the
// product's own code and two NICs on the test's wire. The seal left the disk unbooted
// (no machine-id, no host keys); the site's first boot behaves as RHCOS's (machine-id, host
// keys); the reconfiguration service, ordered as on RHCOS, applies the site: NetworkManager
// brings up the bond and the VLAN, and the peer pings the node's site addresses over the
// VLAN on both families; the site CA is in the node's trust store, chrony has the site's
// time server, and a node unit's request reaches the proxy the test runs on the peer.
// It returns what the node reported at boot-complete.
func checkSeedSite(t *testing.T, dir string) map[string]string {
	t.Helper()
	ctx := t.Context()
	w := newTestWire(t)
	w.addPeer(t, siteVLAN, peerV4+"/24", peerV6+"/64")
	proxied := startProxy(t, w)
	nics := []string{w.plugNIC(t, 0), w.plugNIC(t, 1)}
	macs := []string{stages.DefaultNICMAC(0), stages.DefaultNICMAC(1)}
	iso := siteMedium(t, ctx, macs)
	start := time.Now()
	r := bootSeed(t, ctx, dir, iso, nics)
	seedIsUnbooted(t, r.work)
	t.Logf("seed boot: reconfigured and booted after %s", time.Since(start).Round(time.Second))
	checkSteps(t, r.msgs)
	var d map[string]string
	for _, m := range r.msgs {
		if m.Phase == wire.PhaseBootComplete && m.Status == wire.StatusOK {
			d = m.Details
		}
	}
	if d == nil {
		t.Fatalf("seed boot printed no boot-complete: %v", r.msgs)
	}
	checkFirstBoot(t, d)
	checkNICs(t, d, r.macs)
	checkSite(t, d)
	checkPeer(t, w, proxied, d)
	return d
}

// checkPeer: the peer reaches the node's site addresses over the VLAN, and the proxy saw
// the node's request.
func checkPeer(t *testing.T, w *testWire, proxied <-chan proxied, d map[string]string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, addr := range []string{nodeV4, nodeV6} {
		if err := pingUntil(pctx, w.ns, addr); err != nil {
			t.Errorf("the peer cannot reach the node's site address %s over VLAN %d: %v", addr, siteVLAN, err)
		}
	}
	select {
	case r := <-proxied:
		if r.host != proxiedHost || r.from != nodeV4 {
			t.Errorf("the proxy saw a request for %q from %s, want %q from the node's %s", r.host, r.from, proxiedHost, nodeV4)
		}
	default:
		t.Errorf("the proxy saw no request (the node's probe said %q)", d["proxy_probe"])
	}
}

// reconfigureTimeout is the hook's work at KVM speed, on top of the boot.
const reconfigureTimeout = 60 * time.Second

// checkSteps: each step of the hook applied, with what it reports.
func checkSteps(t *testing.T, msgs []wire.Message) {
	t.Helper()
	steps := map[string]map[string]string{}
	for _, m := range msgs {
		if m.Phase == wire.PhaseReconfigureStep && m.Status == wire.StatusOK {
			steps[m.Details["step"]] = m.Details
		}
	}
	for _, tc := range []struct{ step, key, want string }{
		{"network", "address.bond0.100", nodeV4 + "/24," + nodeV6 + "/64"},
		{"network", "networkmanager.profiles", ""},
		{"hostname", "hostname", siteHostname},
		{"ntp", "chrony.sources", "/etc/chrony/sources.d/snofactory-site.sources"},
		{"proxy", "httpProxy", "http://" + peerV4 + ":" + proxyPort},
		{"trust-bundle", "certificates", "1"},
		{"node-labels", "labels", "site.example.com/store"},
		{"node-labels", "ignored", "kubernetes.io/hostname"},
	} {
		d, ok := steps[tc.step]
		switch {
		case !ok:
			t.Errorf("no step %s applied; messages: %v", tc.step, msgs)
		case tc.want == "" && d[tc.key] == "", tc.want != "" && d[tc.key] != tc.want:
			t.Errorf("step %s reported %s=%q, want %q (%v)", tc.step, tc.key, d[tc.key], tc.want, d)
		}
	}
}

// checkSite: what the node itself reports of the site once booted.
func checkSite(t *testing.T, d map[string]string) {
	t.Helper()
	for _, tc := range []struct{ key, want string }{
		{"hostname", siteHostname},
		{"bonds", "bond0:active-backup:100:" + stages.NICName(0) + "+" + stages.NICName(1)},
		{"reconfigure", "active"},
		{"site_ca", "trusted"},
		{"proxy_probe", "200"},
		// The conformance OS has no Node object: the labels are recorded (the kubelet's left out).
		{"node_labels", "site.example.com/store=sysd"},
		// Each port enslaved once, as nmstate applies a bond in one go: no link flap.
		{"bond_ports", stages.NICName(0) + ":enslaved=1:failures=0," + stages.NICName(1) + ":enslaved=1:failures=0"},
	} {
		if d[tc.key] != tc.want {
			t.Errorf("node reports %s=%q, want %q", tc.key, d[tc.key], tc.want)
		}
	}
	for _, want := range []string{"bond0.100=" + nodeV4 + "/24", "bond0.100=" + nodeV6 + "/64"} {
		if !strings.Contains(","+d["addresses"]+",", ","+want+",") {
			t.Errorf("node's addresses %q lack %s", d["addresses"], want)
		}
	}
	if !strings.Contains(","+d["chrony_sources"]+",", ","+peerV4+",") {
		t.Errorf("chrony's sources %q lack the site's %s", d["chrony_sources"], peerV4)
	}
}

// siteMedium writes the site config with the node's NIC names and MACs and a fresh test CA,
// and makes it the medium with the siteconfig package, as `site-config create` does.
func siteMedium(t *testing.T, ctx context.Context, macs []string) string {
	t.Helper()
	var ca strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSpace(testCA(t)), "\n") {
		ca.WriteString("    " + l)
	}
	ca.WriteString("\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "site.yaml")
	doc := fmt.Sprintf(siteConfigTemplate, stages.NICName(0), stages.NICName(1), macs[0], macs[1], ca.String())
	if err := os.WriteFile(src, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := siteconfig.Load(src)
	if err != nil {
		t.Fatalf("the test's site config: %v\n%s", err, doc)
	}
	iso := filepath.Join(dir, "site.iso")
	if err := siteconfig.Write(ctx, sc, iso); err != nil {
		t.Fatal(err)
	}
	return iso
}

// testCA is a self-signed CA certificate, PEM.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "snofactory test site CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// proxied is one request the test's proxy saw.
type proxied struct{ host, from string }

// startProxy serves a forward proxy's side of plain HTTP on the peer's address: it records
// each request (an absolute URI, as a client sends through a proxy) and answers 200
// without going anywhere.
func startProxy(t *testing.T, w *testWire) <-chan proxied {
	t.Helper()
	l, err := w.listen(net.JoinHostPort(peerV4, proxyPort))
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan proxied, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		select {
		case seen <- proxied{host: r.URL.Hostname(), from: from}:
		default:
		}
		rw.WriteHeader(http.StatusOK)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return seen
}

// pingUntil pings addr from the namespace until a reply comes or ctx ends, with busybox's
// ping (busybox-static, which make deps installs; the host may have no iputils); each ping
// waits up to 3 s for its reply (-w), so the loop paces itself.
func pingUntil(ctx context.Context, ns, addr string) error {
	var last []byte
	for ctx.Err() == nil {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "busybox", "ping", "-c1", "-w3", addr).CombinedOutput()
		if err == nil {
			return nil
		}
		last = out
	}
	return fmt.Errorf("%w; last ping: %s", ctx.Err(), last)
}
