package siteconfig

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/snofactory/snofactory/seeds/checks"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
)

// Upper bounds on lists, far above any real site.
const (
	maxInterfaces = 64
	maxAddresses  = 64
	maxRoutes     = 256
	maxServers    = 16
	maxMirrors    = 200
	maxKeys       = 100
	maxManifests  = 500
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checker collects validation errors named by path; the decoder adds their positions.
type checker struct {
	dir string
	// present says whether the file gives the field at a YAML path, even empty; nil: no file.
	present func(path string) bool
	checks.Report
}

// given reports whether the file gives the field at path at all.
func (c *checker) given(path string) bool { return c.present != nil && c.present(path) }

func (sc *SiteConfig) validate(c *checker) {
	if sc.APIVersion != APIVersion {
		c.Add("apiVersion", "must be "+APIVersion, "")
	}
	if sc.Kind != Kind {
		c.Add("kind", "must be "+Kind, "kind: "+Kind)
	}
	s := &sc.Spec
	switch {
	case sc.Metadata.Name == "":
		c.Add("metadata.name", "required", "a DNS-1123 label such as store-0042")
	case !isLabel(sc.Metadata.Name):
		c.Add("metadata.name", fmt.Sprintf("%q is not a DNS-1123 label", suggest.Clip(sc.Metadata.Name)), labelHint)
	}
	switch {
	case s.Hostname == "":
		c.Add("spec.hostname", "required", "an RFC 1123 host name such as edge-01")
	case !isHostname(s.Hostname):
		c.Add("spec.hostname", fmt.Sprintf("%q is not an RFC 1123 host name", suggest.Clip(s.Hostname)),
			"lowercase labels of letters, digits and '-', separated by dots, each at most 63 characters, 253 in all")
	}
	if s.ClusterName != "" && !isLabel(s.ClusterName) {
		c.Add("spec.clusterName", fmt.Sprintf("%q is not a DNS-1123 label", suggest.Clip(s.ClusterName)), labelHint)
	}
	if s.BaseDomain != "" && !isHostname(s.BaseDomain) {
		c.Add("spec.baseDomain", fmt.Sprintf("%q is not a DNS subdomain", suggest.Clip(s.BaseDomain)), "lowercase labels separated by dots, e.g. edge.example.com")
	}
	if (s.ClusterName == "") != (s.BaseDomain == "") {
		c.Add("spec.clusterName", "clusterName and baseDomain go together (OpenShift only)", "give both, or neither to keep the seed's")
	}
	if s.Network != nil {
		c.network(s.Network)
	}
	if s.DNS != nil {
		c.dns("spec.dns.servers", "spec.dns.search", s.DNS.Servers, s.DNS.Search)
	}
	c.dnsConflict(s)
	if s.NTP != nil {
		c.ntp(s.NTP.Servers)
	}
	c.nodeLabels(s.NodeLabels)
	if s.AdditionalTrustBundle != "" {
		if err := checkCABundle(s.AdditionalTrustBundle); err != nil {
			c.Add("spec.additionalTrustBundle", err.Error(), "PEM certificates, each from -----BEGIN CERTIFICATE----- to -----END CERTIFICATE-----")
		}
	}
	c.proxy(s)
	c.mirrors(s.RegistryMirrors)
	c.sshKeys(s.SSHAuthorizedKeys)
	c.pullSecret(s)
	c.manifests(s)
	c.identity(s)
	c.sealedSecrets(s)
	c.binding(s.Binding)
}

// Bind binds the site config to the seed named seed and the machine whose serial number is
// serial (site-config create --for-seed, --for-serial); an empty one keeps what the file
// says. The values are checked as the file's would be.
func (sc *SiteConfig) Bind(seed, serial string) error {
	var b Binding
	if sc.Spec.Binding != nil {
		b = *sc.Spec.Binding
	}
	if seed != "" {
		b.Seed = seed
	}
	if serial != "" {
		b.MachineSerial = serial
	}
	var c checker
	c.binding(&b)
	var msgs []string
	for _, e := range c.Errs {
		msgs = append(msgs, fmt.Sprintf("%s: %s (%s)", e.Path, e.Message, e.Hint))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	if b != (Binding{}) {
		sc.Spec.Binding = &b
	}
	return nil
}

// binding checks spec.binding: a seed name as a blueprint's metadata.name is, a serial
// number of printable characters.
func (c *checker) binding(b *Binding) {
	if b == nil {
		return
	}
	if b.Seed != "" && !isLabel(b.Seed) {
		c.Add("spec.binding.seed", fmt.Sprintf("%q is not a seed name (a DNS-1123 label)", suggest.Clip(b.Seed)), "the seed's name as seed inspect shows it, e.g. du-edge")
	}
	if sn := b.MachineSerial; sn != "" {
		printable := strings.IndexFunc(sn, func(r rune) bool { return r < 0x20 || r > 0x7e }) < 0
		if len(sn) > MaxMachineSerial || !printable || sn != strings.TrimSpace(sn) {
			c.Add("spec.binding.machineSerial", fmt.Sprintf("%q is not a serial number: at most %d printable ASCII characters, no space at either end", suggest.Clip(sn), MaxMachineSerial),
				"as the server's label or dmidecode -s system-serial-number gives it")
		}
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// identity checks the site cluster's own identity and retained crypto.
func (c *checker) identity(s *Spec) {
	if h := s.KubeadminPasswordHash; h != "" {
		if _, err := bcrypt.Cost([]byte(h)); err != nil {
			c.Add("spec.kubeadminPasswordHash", "is not a bcrypt hash", "e.g. htpasswd -nbBC 10 '' PASSWORD | cut -d: -f2")
		}
	}
	if s.ClusterID != "" && !uuidRE.MatchString(s.ClusterID) {
		c.Add("spec.clusterID", fmt.Sprintf("%q is not a lowercase UUID", suggest.Clip(s.ClusterID)), "e.g. from uuidgen; or leave it out and the seed makes one")
	}
	if s.InfraID != "" && !isLabel(s.InfraID) {
		c.Add("spec.infraID", fmt.Sprintf("%q is not a DNS-1123 label", suggest.Clip(s.InfraID)), labelHint)
	}
	if k := s.KubeconfigCrypto; k != nil {
		for _, f := range []struct{ path, pem, kind string }{
			{"loadBalancerSignerKey", k.LoadBalancerSignerKey, "key"}, {"localhostSignerKey", k.LocalhostSignerKey, "key"},
			{"serviceNetworkSignerKey", k.ServiceNetworkSignerKey, "key"}, {"adminClientCACert", k.AdminClientCACert, "cert"},
			{"ingressCAKey", k.IngressCAKey, "key"},
		} {
			if f.pem == "" && f.path == "ingressCAKey" {
				continue
			}
			if err := checkPEM(f.pem, f.kind); err != nil {
				c.Add("spec.kubeconfigCrypto."+f.path, err.Error(), "site-config create generates these; do not edit them")
			}
		}
	}
}

// checkPEM checks that s holds one PEM block of a private key or a certificate.
func checkPEM(s, kind string) error {
	blk, rest := pem.Decode([]byte(s))
	switch {
	case blk == nil:
		return errors.New("holds no PEM block")
	case len(strings.TrimSpace(string(rest))) > 0:
		return errors.New("holds more than one PEM block")
	case kind == "cert":
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("is not a certificate: %v", err)
		}
	default:
		if _, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err == nil {
			return nil
		}
		if _, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
			return nil
		}
		if _, err := x509.ParseECPrivateKey(blk.Bytes); err == nil {
			return nil
		}
		return errors.New("is not a private key (PKCS#8, PKCS#1 or EC)")
	}
	return nil
}

// checkCABundle checks a trust bundle as the installer does (pkg/validate/validate.go
// CABundle: every PEM block a certificate that parses, nothing else in the text) and recert
// after it (src/ocp_postprocess/additional_trust_bundle/params.rs
// parse_additional_trust_bundle: at least one certificate, only certificates).
func checkCABundle(s string) error {
	rest := []byte(s)
	n := 0
	for len(strings.TrimSpace(string(rest))) > 0 {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		switch {
		case blk == nil:
			return fmt.Errorf("certificate %d: text that is no PEM block", n+1)
		case blk.Type != "CERTIFICATE":
			return fmt.Errorf("certificate %d is a PEM %s; a trust bundle holds certificates only", n+1, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %v", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("holds no certificate")
	}
	return nil
}

const labelHint = "lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit"

func isLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

// isHostname: RFC 1123 host names as Linux and Kubernetes nodes take them (lowercase).
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}

// dnsConflict: DNS given twice must agree; which one to apply would be a guess.
func (c *checker) dnsConflict(s *Spec) {
	if s.DNS == nil || s.Network == nil || s.Network.DNSResolver == nil {
		return
	}
	r := s.Network.DNSResolver.Config
	if !slices.Equal(s.DNS.Servers, r.Server) || !slices.Equal(s.DNS.Search, r.Search) {
		c.Add("spec.dns", "conflicts with spec.network.dns-resolver", "give DNS in one place: spec.dns or the nmstate dns-resolver")
	}
}

func (c *checker) dns(serversPath, searchPath string, servers, search []string) {
	if len(servers) > maxServers {
		c.Add(serversPath, fmt.Sprintf("%d servers, more than the limit of %d", len(servers), maxServers), "")
		return
	}
	for i, s := range servers {
		if _, err := netip.ParseAddr(s); err != nil {
			c.Add(fmt.Sprintf("%s[%d]", serversPath, i), fmt.Sprintf("%q is not an IP address", suggest.Clip(s)), "name servers are given by address, e.g. 10.0.2.3")
		}
	}
	if len(search) > maxServers {
		c.Add(searchPath, fmt.Sprintf("%d search domains, more than the limit of %d", len(search), maxServers), "")
		return
	}
	for i, s := range search {
		if !isHostname(s) {
			c.Add(fmt.Sprintf("%s[%d]", searchPath, i), fmt.Sprintf("%q is not a DNS domain", suggest.Clip(s)), "e.g. example.com")
		}
	}
}

func (c *checker) ntp(servers []string) {
	if len(servers) > maxServers {
		c.Add("spec.ntp.servers", fmt.Sprintf("%d servers, more than the limit of %d", len(servers), maxServers), "")
		return
	}
	for i, s := range servers {
		if _, err := netip.ParseAddr(s); err != nil && !isHostname(s) {
			c.Add(fmt.Sprintf("spec.ntp.servers[%d]", i), fmt.Sprintf("%q is neither an IP address nor a host name", suggest.Clip(s)), "e.g. 10.0.2.2 or ntp.example.com")
		}
	}
}

func (c *checker) mirrors(ms []RegistryMirror) {
	if len(ms) > maxMirrors {
		c.Add("spec.registryMirrors", fmt.Sprintf("%d mirrors, more than the limit of %d", len(ms), maxMirrors), "")
		return
	}
	for i, m := range ms {
		p := fmt.Sprintf("spec.registryMirrors[%d]", i)
		c.repository(p+".source", m.Source)
		if len(m.Mirrors) == 0 {
			c.Add(p+".mirrors", "at least one mirror is required", "")
		}
		for j, mirror := range m.Mirrors {
			c.repository(fmt.Sprintf("%s.mirrors[%d]", p, j), mirror)
		}
	}
}

// repository accepts a repository without tag or digest, or a bare registry host[:port],
// as blueprints do.
func (c *checker) repository(path, s string) {
	if msg, hint := checks.Repository(s); msg != "" {
		c.Add(path, msg, hint)
	}
}

func (c *checker) sshKeys(keys []string) {
	if len(keys) > maxKeys {
		c.Add("spec.sshAuthorizedKeys", fmt.Sprintf("%d keys, more than the limit of %d", len(keys), maxKeys), "")
		return
	}
	for i, k := range keys {
		p := fmt.Sprintf("spec.sshAuthorizedKeys[%d]", i)
		if strings.Contains(strings.TrimSpace(k), "\n") {
			c.Add(p, "holds more than one line", "one key per item")
			continue
		}
		if err := checks.SSHKey([]byte(k)); err != nil {
			c.Add(p, err.Error(), "a public key line such as ssh-ed25519 AAAA... user@host")
		}
	}
}
