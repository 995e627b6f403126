package siteconfig

import (
	"strings"
	"testing"
)

// A proxy is refused at its place for what the installer's validateProxy refuses, and
// accepted otherwise.
func TestProxyValidation(t *testing.T) {
	px := func(body string) string { return head + "  proxy:\n" + body }
	tests := []struct {
		name, doc string
		// path, msg, line, col: the problem expected; "" path: the document is accepted.
		path, msg string
		line, col int
	}{
		{"http only", px("    httpProxy: http://proxy.example.com:3128\n"), "", "", 0, 0},
		{"https via an https proxy, credentials", px("    httpsProxy: https://u:p%40ss@10.0.0.9:3129\n"), "", "", 0, 0},
		{"noProxy domains CIDRs IPs", px("    httpProxy: http://p:3128\n    noProxy: .example.com,registry.example.com.,10.0.0.0/8,fd00::/64,192.168.1.5,fd00::5\n"), "", "", 0, 0},
		{"noProxy star", px("    httpProxy: http://p:3128\n    noProxy: '*'\n"), "", "", 0, 0},
		{"neither URL", px("    noProxy: .example.com\n"), "spec.proxy", "must include httpProxy or httpsProxy", 8, 5},
		{"httpProxy https", px("    httpProxy: https://p:3128\n"), "spec.proxy.httpProxy", `scheme "https" is not supported: http`, 8, 16},
		{"httpsProxy socks", px("    httpsProxy: socks5://p:1080\n"), "spec.proxy.httpsProxy", `scheme "socks5" is not supported: http or https`, 8, 17},
		{"no scheme", px("    httpProxy: proxy.example.com:3128\n"), "spec.proxy.httpProxy", `scheme "proxy.example.com" is not supported`, 8, 16},
		{"credentials kept out of the message", px("    httpProxy: https://user:s3cret@p:3128\n"), "spec.proxy.httpProxy", `"https://<credentials>@p:3128"`, 8, 16},
		{"credentials kept out of a parse error", px("    httpProxy: 'http://user:s3cret@p:port'\n"), "spec.proxy.httpProxy", `"http://<credentials>@p:port" is not a URL: invalid port`, 8, 16},
		{"relative", px("    httpProxy: proxy\n"), "spec.proxy.httpProxy", `"proxy" is not a URL: invalid URI for request`, 8, 16},
		{"noProxy wildcard", px("    httpProxy: http://p:3128\n    noProxy: '*.example.com'\n"), "spec.proxy.noProxy", `entry 0 "*.example.com" is no IP address, CIDR or domain`, 9, 14},
		{"noProxy space", px("    httpProxy: http://p:3128\n    noProxy: 'a.example.com, b.example.com'\n"), "spec.proxy.noProxy", "must not have spaces", 9, 14},
		{"noProxy empty entry", px("    httpProxy: http://p:3128\n    noProxy: a.example.com,,b\n"), "spec.proxy.noProxy", `entry 1 ""`, 9, 14},
		{"noProxy uppercase", px("    httpProxy: http://p:3128\n    noProxy: Example.COM\n"), "spec.proxy.noProxy", `entry 0 "Example.COM"`, 9, 14},
		{"unknown proxy key", px("    http_proxy: http://p:3128\n"), "spec.proxy.http_proxy", "unknown field", 8, 5},
		{"policy", head + "  additionalTrustBundlePolicy: ProxyOnly\n", "spec.additionalTrustBundlePolicy", `"ProxyOnly" is not a policy`, 7, 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.doc)
			sc, err := Load(path)
			if tc.path == "" {
				if err != nil || !sc.HasProxy() {
					t.Fatalf("refused (or no proxy): %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			for _, p := range problems(t, err) {
				if p.Path == tc.path && strings.Contains(p.Message, tc.msg) {
					if p.Line != tc.line || p.Col != tc.col || p.File != path {
						t.Errorf("got %v, want %d:%d", p, tc.line, tc.col)
					}
					return
				}
			}
			t.Errorf("want %s: ...%s..., got\n%v", tc.path, tc.msg, err)
		})
	}
}

// Both bad URLs and a bad noProxy are reported together.
func TestProxyAllErrorsAtOnce(t *testing.T) {
	doc := head + "  proxy:\n    httpProxy: https://p\n    httpsProxy: ftp://p\n    noProxy: '*.a,b c'\n"
	if ps := problems(t, func() error { _, err := Load(write(t, doc)); return err }()); len(ps) != 5 {
		t.Errorf("want 5 problems (httpProxy, httpsProxy, the space, *.a, b c), got %v", ps)
	}
}

// The proxy's trusted CA is the trust bundle as the image-based installer decides it.
func TestProxyTrustsBundle(t *testing.T) {
	p := &Proxy{HTTPProxy: "http://p:3128"}
	for _, tc := range []struct {
		bundle, policy string
		proxy          *Proxy
		want           bool
	}{
		{"PEM", "", p, true}, {"PEM", TrustPolicyProxyOnly, p, true}, {"PEM", TrustPolicyProxyOnly, nil, false},
		{"PEM", TrustPolicyAlways, nil, true}, {"", TrustPolicyAlways, p, false},
	} {
		sc := &SiteConfig{Spec: Spec{AdditionalTrustBundle: tc.bundle, AdditionalTrustBundlePolicy: tc.policy, Proxy: tc.proxy}}
		if got := sc.ProxyTrustsBundle(); got != tc.want {
			t.Errorf("bundle %q policy %q proxy %v: %v, want %v", tc.bundle, tc.policy, tc.proxy != nil, got, tc.want)
		}
	}
}

// The image-based installer reads the proxy and the trust bundle policy from the
// install-config.yaml beside the ImageBasedConfig; so does Load.
func TestImageBasedProxy(t *testing.T) {
	ic := ibiInstallConfig + "additionalTrustBundlePolicy: Always\nproxy:\n  httpProxy: http://proxy.store.example.com:3128\n  httpsProxy: http://proxy.store.example.com:3128\n  noProxy: .store.example.com,10.0.0.0/8\n"
	sc, err := Load(ibiDir(t, ibiSite, ic))
	if err != nil {
		t.Fatal(err)
	}
	want := Proxy{HTTPProxy: "http://proxy.store.example.com:3128", HTTPSProxy: "http://proxy.store.example.com:3128", NoProxy: ".store.example.com,10.0.0.0/8"}
	if !sc.HasProxy() || *sc.Spec.Proxy != want || sc.Spec.AdditionalTrustBundlePolicy != TrustPolicyAlways {
		t.Errorf("proxy %+v, policy %q", sc.Spec.Proxy, sc.Spec.AdditionalTrustBundlePolicy)
	}
	path := ibiDir(t, ibiSite, ibiInstallConfig+"additionalTrustBundlePolicy: always\nproxy: {}\n")
	_, err = Load(path)
	for _, w := range []string{"install-config.yaml:24:30: additionalTrustBundlePolicy: \"always\" is not a policy", "install-config.yaml:25:8: proxy: must include httpProxy or httpsProxy"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in %v", w, err)
		}
	}
}
