package checks

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// ProxyHint is how a proxy URL looks.
const ProxyHint = "e.g. http://proxy.example.com:3128 (user:password@ before the host when the proxy needs them)"

// Proxy checks a cluster-wide proxy at path (spec.proxy, spec.openshift.proxy) as the
// installer does (pkg/types/validation/installconfig.go validateProxy, validateURI):
// neither httpProxy nor httpsProxy; a URL that net/url.ParseRequestURI refuses or whose
// scheme is not http (httpProxy) or http or https (httpsProxy); a noProxy other than "*"
// with a space or an entry that is no domain (pkg/validate/validate.go
// NoProxyDomainName), CIDR or IP address. The blueprint and the site config share it, so
// a seed and a site are held to one rule.
func (r *Report) Proxy(path, httpProxy, httpsProxy, noProxy string) {
	if httpProxy == "" && httpsProxy == "" {
		r.Add(path, "must include httpProxy or httpsProxy", ProxyHint)
	}
	r.proxyURL(path+".httpProxy", httpProxy, "http")
	r.proxyURL(path+".httpsProxy", httpsProxy, "http", "https")
	if noProxy == "" || noProxy == "*" {
		return
	}
	if strings.Contains(noProxy, " ") {
		r.Add(path+".noProxy", "must not have spaces", "separate entries with ',' only, e.g. .example.com,10.0.0.0/8")
	}
	for i, v := range strings.Split(noProxy, ",") {
		if v = strings.TrimSpace(v); !noProxyEntry(v) {
			r.Add(path+".noProxy", fmt.Sprintf("entry %d %q is no IP address, CIDR or domain without wildcard characters", i, suggest.Clip(v)),
				`e.g. .example.com, registry.example.com, 10.0.0.0/8 or 192.168.1.5; or "*" alone for no proxy at all`)
		}
	}
}

// proxyURL checks one proxy URL as the installer's validateURI does.
func (r *Report) proxyURL(path, v string, schemes ...string) {
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
		r.Add(path, fmt.Sprintf("%q is not a URL: %v", suggest.Clip(RedactURL(v)), err), ProxyHint)
	case !slices.Contains(schemes, u.Scheme):
		r.Add(path, fmt.Sprintf("%q: scheme %q is not supported: %s", suggest.Clip(RedactURL(v)), suggest.Clip(u.Scheme), strings.Join(schemes, " or ")), ProxyHint)
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

// dnsSubdomainLabel is one lowercase RFC 1123 label, as Kubernetes' IsDNS1123Subdomain
// (which the installer's NoProxyDomainName calls) takes them.
var dnsSubdomainLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// noProxyEntry: a DNS subdomain with an optional leading and trailing dot, a CIDR or an IP
// address (net.ParseCIDR and net.ParseIP, as the installer).
func noProxyEntry(v string) bool {
	if _, _, err := net.ParseCIDR(v); err == nil || net.ParseIP(v) != nil {
		return true
	}
	d := strings.TrimSuffix(strings.TrimPrefix(v, "."), ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if len(l) > 63 || !dnsSubdomainLabel.MatchString(l) {
			return false
		}
	}
	return true
}
