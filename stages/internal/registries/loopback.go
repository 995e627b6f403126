package registries

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// ForImages is the configuration for reaching the registries of refs (image references,
// mirror locations) through mirrors. Registries on loopback addresses are reached over plain
// HTTP, as Docker does by default for 127.0.0.0/8: a depot-local or test registry rarely
// has a certificate. Every other registry needs TLS.
func ForImages(refs []string, mirrors []Mirror) Config {
	c := Config{Mirrors: mirrors}
	for _, m := range mirrors {
		refs = append(append(refs, m.Source), m.Mirrors...)
	}
	for _, ref := range refs {
		if host := registryHost(ref); host != "" && isLoopback(host) && !slices.Contains(c.Insecure, host) {
			c.Insecure = append(c.Insecure, host)
		}
	}
	slices.Sort(c.Insecure)
	return c
}

// registryHost is the registry part of an image reference, "" when the reference has none
// (Docker Hub shorthand such as busybox:latest or library/busybox).
func registryHost(ref string) string {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || rest == "" || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return ""
	}
	return host
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
