package siteconfig

import (
	"fmt"

	"github.com/snofactory/snofactory/seeds/checks"
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

// proxy refuses what the installer refuses in a proxy: the rule the blueprint's proxy
// follows too (seeds/checks Report.Proxy).
func (c *checker) proxy(s *Spec) {
	if p := s.AdditionalTrustBundlePolicy; p != "" && p != TrustPolicyProxyOnly && p != TrustPolicyAlways {
		c.Add("spec.additionalTrustBundlePolicy", fmt.Sprintf("%q is not a policy", suggest.Clip(p)),
			`"Proxyonly" (the default: the proxy trusts the bundle) or "Always"`)
	}
	if p := s.Proxy; p != nil {
		c.Report.Proxy("spec.proxy", p.HTTPProxy, p.HTTPSProxy, p.NoProxy)
	}
}

// RedactURL is a proxy URL fit for messages and logs (seeds/checks RedactURL).
func RedactURL(v string) string { return checks.RedactURL(v) }
