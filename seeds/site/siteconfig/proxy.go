package siteconfig

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// Proxy is the cluster-wide proxy: install-config's proxy and the Proxy config CR's spec,
// field for field (openshift/installer pkg/types/installconfig.go Proxy).
type Proxy struct {
	HTTPProxy  string `yaml:"httpProxy,omitempty"`
	HTTPSProxy string `yaml:"httpsProxy,omitempty"`
	// NoProxy is comma-separated domains, IP addresses and CIDRs, or "*"; the hook adds the
	// cluster's own networks and names, as lifecycle-agent does.
	NoProxy string `yaml:"noProxy,omitempty"`
}

// The values of additionalTrustBundlePolicy (installer pkg/types/installconfig.go
// PolicyProxyOnly, PolicyAlways); the installer's default is Proxyonly
// (pkg/types/defaults/installconfig.go SetInstallConfigDefaults).
const (
	TrustPolicyProxyOnly = "Proxyonly"
	TrustPolicyAlways    = "Always"
)

// HasProxy reports whether the site gives a cluster-wide proxy. lifecycle-agent refuses a
// site whose proxy presence differs from its seed's (lca-cli/postpivot/postpivot.go
// setProxyAndProxyStatus), so the seed-side fit check compares this with the seed's record.
func (sc *SiteConfig) HasProxy() bool { return sc.Spec.Proxy != nil }

// ProxyTrustsBundle reports whether the proxy's trusted CA is the site's
// additionalTrustBundle (the user-ca-bundle ConfigMap): as the image-based installer
// decides it (pkg/asset/imagebased/configimage/clusterconfiguration.go
// ClusterConfiguration.Generate), when a bundle is given and the policy is Always, or
// Proxyonly (the default) with a proxy.
func (sc *SiteConfig) ProxyTrustsBundle() bool {
	s := &sc.Spec
	if s.AdditionalTrustBundle == "" {
		return false
	}
	return s.AdditionalTrustBundlePolicy == TrustPolicyAlways || s.Proxy != nil
}

const proxyHint = "e.g. http://proxy.example.com:3128 (user:password@ before the host when the proxy needs them)"

// proxy refuses what the installer refuses in a proxy (pkg/types/validation/installconfig.go
// validateProxy, validateURI): neither httpProxy nor httpsProxy; a URL that
// net/url.ParseRequestURI refuses or whose scheme is not http (httpProxy) or http or
// https (httpsProxy); a noProxy other than "*" with a space or an entry that is no domain
// (pkg/validate/validate.go NoProxyDomainName), CIDR or IP address.
func (c *checker) proxy(s *Spec) {
	if p := s.AdditionalTrustBundlePolicy; p != "" && p != TrustPolicyProxyOnly && p != TrustPolicyAlways {
		c.Add("spec.additionalTrustBundlePolicy", fmt.Sprintf("%q is not a policy", suggest.Clip(p)),
			`"Proxyonly" (the default: the proxy trusts the bundle) or "Always"`)
	}
	p := s.Proxy
	if p == nil {
		return
	}
	if p.HTTPProxy == "" && p.HTTPSProxy == "" {
		c.Add("spec.proxy", "must include httpProxy or httpsProxy", proxyHint)
	}
	c.proxyURL("spec.proxy.httpProxy", p.HTTPProxy, "http")
	c.proxyURL("spec.proxy.httpsProxy", p.HTTPSProxy, "http", "https")
	if p.NoProxy == "" || p.NoProxy == "*" {
		return
	}
	if strings.Contains(p.NoProxy, " ") {
		c.Add("spec.proxy.noProxy", "must not have spaces", "separate entries with ',' only, e.g. .example.com,10.0.0.0/8")
	}
	for i, v := range strings.Split(p.NoProxy, ",") {
		if v = strings.TrimSpace(v); !noProxyEntry(v) {
			c.Add("spec.proxy.noProxy", fmt.Sprintf("entry %d %q is no IP address, CIDR or domain without wildcard characters", i, suggest.Clip(v)),
				`e.g. .example.com, registry.example.com, 10.0.0.0/8 or 192.168.1.5; or "*" alone for no proxy at all`)
		}
	}
}

// proxyURL checks one proxy URL as the installer's validateURI does.
func (c *checker) proxyURL(path, v string, schemes ...string) {
	if v == "" {
		return
	}
	u, err := url.ParseRequestURI(v)
	switch {
	case err != nil:
		// net/url's own message quotes the whole URL, credentials and all; only its reason
		// is shown, after the redacted value.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		c.Add(path, fmt.Sprintf("%q is not a URL: %v", suggest.Clip(RedactURL(v)), err), proxyHint)
	case !slices.Contains(schemes, u.Scheme):
		c.Add(path, fmt.Sprintf("%q: scheme %q is not supported: %s", suggest.Clip(RedactURL(v)), suggest.Clip(u.Scheme), strings.Join(schemes, " or ")), proxyHint)
	}
}

// RedactURL is a proxy URL fit for messages and logs: user and password, which a proxy URL
// may carry, become <credentials>.
func RedactURL(v string) string {
	at := strings.LastIndex(v, "@")
	if at < 0 {
		return v
	}
	start := 0
	if i := strings.Index(v, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return v[:start] + "<credentials>" + v[at:]
}

// noProxyEntry: a DNS subdomain with an optional leading and trailing dot, a CIDR or an IP
// address (net.ParseCIDR and net.ParseIP, as the installer).
func noProxyEntry(v string) bool {
	if _, _, err := net.ParseCIDR(v); err == nil || net.ParseIP(v) != nil {
		return true
	}
	d := strings.TrimSuffix(strings.TrimPrefix(v, "."), ".")
	return d != "" && len(d) <= 253 && isHostname(d)
}
