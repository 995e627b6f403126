package reconfigure

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// siteCA is a test CA (siteconfig testdata bond-vlan.yaml's corporate CA).
const siteCA = `-----BEGIN CERTIFICATE-----
MIIBqTCCAU+gAwIBAgIUad3EirHm17iqjZOvkxpQTOWXtAkwCgYIKoZIzj0EAwIw
KTEnMCUGA1UEAwweU3RvcmUgMDA0MiBjb3Jwb3JhdGUgQ0EgKHRlc3QpMCAXDTI2
MTEyNzIzMjI0N1oYDzIxMjYxMTAzMjMyMjQ3WjApMScwJQYDVQQDDB5TdG9yZSAw
MDQyIGNvcnBvcmF0ZSBDQSAodGVzdCkwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AASGGMVzXo9x2X7U07Qi2oO2cQ9CbcVz3DwduBSS2e3FVn3BeGpSHfWEscRW/Gm/
pK+0H8pWfBoMH45t23TGFAowo1MwUTAdBgNVHQ4EFgQUHrSyIInMExCU2FcwoM9F
iROlsvowHwYDVR0jBBgwFoAUHrSyIInMExCU2FcwoM9FiROlsvowDwYDVR0TAQH/
BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEA88io2MmEMWdFisxR8Ti4ZmLdcc3p
zCzahGQUNCQmbtMCIE6G+nSvjQ73qbTrxOqBVQQ5AKcBAeVf12wADQDCe+p9
-----END CERTIFICATE-----
`

// On a conformance node with a trust store and chrony (the systemd conformance OS, or
// RHCOS's layout), the site's trust bundle joins the store the node has, after the proxy
// as in lifecycle-agent's post-pivot, and the NTP servers reach chrony; a node without a
// trust store refuses the bundle, naming what to change.
func TestCoreOSTrustBundleAndChrony(t *testing.T) {
	for _, tc := range []struct {
		name             string
		layout           []string // directories made under the root; a path ending in a tool's name is that tool
		wantCmds         []string
		wantFile, bundle string
		wantErr          string
	}{
		{name: "debian", layout: []string{DebianUpdateCA, "/etc/ssl/certs/", ChronySourcesDir + "/", "/usr/lib/systemd/system/" + DebianChronyUnit},
			wantCmds: []string{"systemctl try-restart chrony.service", "update-ca-certificates"},
			wantFile: DebianCAAnchorFile, bundle: "/etc/ssl/certs/ca-certificates.crt"},
		{name: "rhel", layout: []string{RHELUpdateCA, TrustExtractedDir + "pem/"},
			wantCmds: []string{"update-ca-trust"}, wantFile: UserCABundleFile, bundle: TrustExtractedDir + "pem/tls-ca-bundle.pem"},
		{name: "no trust store", wantErr: "remove additionalTrustBundle from the site config, or use a seed whose OS has one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.cmds.outputs["ip -o addr show dev ens3"] = busyboxAddrShow
			for _, p := range tc.layout {
				mkUnder(t, h.root, p)
			}
			site := medium(t, "site.yaml", func(sc *siteconfig.SiteConfig) { sc.Spec.AdditionalTrustBundle = siteCA })
			_, err := Run(context.Background(), h.options(oskind.CoreOS, site))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				if _, ok := h.rep.step("trust-bundle", wire.StatusFailed); !ok {
					t.Errorf("no failed trust-bundle step reported: %v", h.rep.msgs)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\nconsole:\n%s", err, h.console.String())
			}
			var got []string
			for _, l := range h.cmds.lines {
				if !strings.HasPrefix(l, "ip ") && !strings.HasPrefix(l, "hostname ") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tc.wantCmds) {
				t.Errorf("commands %q, want %q", got, tc.wantCmds)
			}
			if h.read(t, tc.wantFile) != siteCA || !strings.Contains(h.read(t, tc.bundle), siteCA) {
				t.Errorf("%s or the extracted %s lacks the site CA", tc.wantFile, tc.bundle)
			}
			if m, ok := h.rep.step("trust-bundle", wire.StatusOK); !ok || m.Details["certificates"] != "1" {
				t.Errorf("trust-bundle step reported %v", m.Details)
			}
			checkChrony(t, h, tc.name == "debian")
		})
	}
}

func checkChrony(t *testing.T, h *harness, has bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, ChronySourcesFile))
	if !has {
		if err == nil {
			t.Errorf("%s written on a node without chrony's sources directory", ChronySourcesFile)
		}
		return
	}
	if want := "server 192.168.50.1 iburst\nserver ntp.example.com iburst\n"; err != nil || !strings.HasSuffix(string(b), want) {
		t.Errorf("%s = %q (%v), want it to end with %q", ChronySourcesFile, b, err, want)
	}
	if m, _ := h.rep.step("ntp", wire.StatusOK); m.Details["chrony.sources"] != ChronySourcesFile {
		t.Errorf("ntp step reported %v", m.Details)
	}
}

// mkUnder makes p under root: a directory when it ends in "/", else an empty file.
func mkUnder(t *testing.T, root, p string) {
	t.Helper()
	dst := filepath.Join(root, p)
	dir := dst
	if !strings.HasSuffix(p, "/") {
		dir = filepath.Dir(dst)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "/") {
		if err := os.WriteFile(dst, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
