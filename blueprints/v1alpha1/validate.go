package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"filippo.io/age"
	"github.com/containers/image/v5/docker/reference"
	"github.com/snofactory/snofactory/seeds/artifact/trust/pubkey"
	"github.com/snofactory/snofactory/seeds/checks"
	"github.com/snofactory/snofactory/seeds/checks/smallfile"
	"github.com/snofactory/snofactory/seeds/checks/suggest"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// FieldError is one problem found by Validate, named by its path in the document
// (spec.openshift.clusterNetwork[0].cidr). The loader adds file positions.
type FieldError = checks.FieldError

// Limits on the files a blueprint references.
const (
	maxPullSecretSize = 1 << 20
	maxSSHKeySize     = 64 << 10
	minMemory         = 256 * MiB
	minDisk           = 1 * GiB
)

var (
	dns1123Label  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	sha256RE      = regexp.MustCompile(`^[0-9a-f]{64}$`)
	labelName     = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValue    = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	checkID       = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	operatorName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	notLabelChars = regexp.MustCompile(`[^a-z0-9-]+`)
)

// checker collects the problems Validate finds.
type checker struct{ checks.Report }

// Validate checks the blueprint after Default, including the files it references (relative
// to Dir). It returns every problem found, in document order as far as practical.
func (b *Blueprint) Validate() []FieldError {
	c := &checker{}
	if !b.withinLimits(c) {
		// Lists this long are a mistake or an attack; checking every item (and every pair
		// of networks) would only cost time.
		return c.Errs
	}
	if b.APIVersion != APIVersion {
		c.Add("apiVersion", fmt.Sprintf("must be %s", APIVersion), "")
	}
	if b.Kind != Kind {
		c.Add("kind", fmt.Sprintf("must be %s", Kind), "")
	}
	b.validateMetadata(c)
	s := &b.Spec
	c.oneOf("spec.target.type", string(s.Target.Type), string(oskind.OpenShift), string(oskind.CoreOS))
	if s.Target.IgnitionVersion != "" {
		c.oneOf("spec.target.ignitionVersion", s.Target.IgnitionVersion, "3.3.0", "3.4.0", "3.5.0")
	}
	b.validateSource(c)
	b.validateLiveISO(c)
	b.validateOpenShift(c)
	b.validateButane(c)
	seen := map[string]int{}
	for i, img := range s.ExtraImages {
		p := fmt.Sprintf("spec.extraImages[%d]", i)
		c.image(p, img, true)
		if j, ok := seen[img]; ok {
			c.Add(p, fmt.Sprintf("duplicate of spec.extraImages[%d]", j), "")
		}
		seen[img] = i
	}
	for i, m := range s.RegistryMirrors {
		p := fmt.Sprintf("spec.registryMirrors[%d]", i)
		c.repository(p+".source", m.Source)
		if len(m.Mirrors) == 0 {
			c.Add(p+".mirrors", "at least one mirror is required", "")
		}
		for j, mirror := range m.Mirrors {
			c.repository(fmt.Sprintf("%s.mirrors[%d]", p, j), mirror)
		}
	}
	b.validateVM(c)
	b.validateDisk(c)
	ids := map[string]bool{}
	for i, id := range s.Validation.Skip {
		p := fmt.Sprintf("spec.validation.skip[%d]", i)
		if !checkID.MatchString(id) {
			c.Add(p, fmt.Sprintf("invalid check id %q", suggest.Clip(id)), "check ids are lowercase letters, digits, '.' and '-', as listed in the validation report")
		}
		if ids[id] {
			c.Add(p, fmt.Sprintf("check %q listed twice", suggest.Clip(id)), "")
		}
		ids[id] = true
		c.knownCheck(p, id)
	}
	for _, id := range slices.Sorted(maps.Keys(s.Validation.SkipReasons)) {
		if !ids[id] {
			c.Add("spec.validation.skipReasons."+id, fmt.Sprintf("reason for check %q, which skip does not list", suggest.Clip(id)), "add it to spec.validation.skip, or drop the reason")
		}
	}
	b.validateRelocation(c)
	b.validateOutputs(c)
	return c.Errs
}

func (b *Blueprint) validateMetadata(c *checker) {
	m := b.Metadata
	switch {
	case m.Name == "":
		c.Add("metadata.name", "required", "a DNS-1123 label such as du-site-a")
	case len(m.Name) > 63 || !dns1123Label.MatchString(m.Name):
		c.Add("metadata.name", fmt.Sprintf("%q is not a DNS-1123 label", suggest.Clip(m.Name)),
			labelHint(m.Name))
	}
	for k, v := range m.Labels {
		p := "metadata.labels." + k
		name := k
		if i := strings.LastIndex(k, "/"); i >= 0 {
			prefix := k[:i]
			name = k[i+1:]
			if !isDNSSubdomain(prefix) {
				c.Add(p, fmt.Sprintf("label key prefix %q is not a DNS subdomain", suggest.Clip(prefix)), "")
			}
		}
		if len(name) == 0 || len(name) > 63 || !labelName.MatchString(name) {
			c.Add(p, fmt.Sprintf("invalid label key %q", suggest.Clip(k)), "keys are [prefix/]name, name at most 63 letters, digits, '-', '_' or '.'")
		}
		if len(v) > 63 || !labelValue.MatchString(v) {
			c.Add(p, fmt.Sprintf("invalid label value %q", suggest.Clip(v)), "values are at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric")
		}
	}
}

func labelHint(s string) string {
	fixed := strings.Trim(notLabelChars.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(fixed) > 63 {
		fixed = strings.Trim(fixed[:63], "-")
	}
	if fixed != "" && fixed != s {
		return fmt.Sprintf("lowercase letters, digits and '-', at most 63 characters, e.g. %q", fixed)
	}
	return "lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit"
}

func isDNSSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if len(part) > 63 || !dns1123Label.MatchString(part) {
			return false
		}
	}
	return true
}

func (b *Blueprint) validateSource(c *checker) {
	s := b.Spec.Source
	if s == nil {
		if b.Spec.Target.Type == oskind.CoreOS {
			c.Add("spec.source", "required for a coreos target", "give the live ISO as source.url (with sha256) or source.path")
		}
		return
	}
	switch {
	case s.URL == "" && s.Path == "":
		c.Add("spec.source", "one of url and path is required", "")
	case s.URL != "" && s.Path != "":
		c.Add("spec.source.path", "url and path are mutually exclusive", "keep one of them")
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.Add("spec.source.url", fmt.Sprintf("%q is not an http(s) URL", suggest.Clip(s.URL)), "for a local file use source.path")
		}
		if s.SHA256 == "" {
			c.Add("spec.source.sha256", "required with url", "pin the download: sha256sum ISO")
		}
	}
	if s.SHA256 != "" && !sha256RE.MatchString(s.SHA256) {
		msg := "must be 64 lowercase hexadecimal digits"
		hint := ""
		if strings.HasPrefix(s.SHA256, "sha256:") {
			hint = "write the hex digits without the sha256: prefix"
		} else if sha256RE.MatchString(strings.ToLower(s.SHA256)) {
			hint = "use lowercase hex digits"
		} else {
			msg = fmt.Sprintf("must be 64 lowercase hexadecimal digits, got %d characters", len(s.SHA256))
		}
		c.Add("spec.source.sha256", msg, hint)
	}
	if s.GeneratedBy != "" && s.Path == "" {
		c.Add("spec.source.generatedBy", "only allowed with path", "")
	}
	if s.Path != "" && s.GeneratedBy == "" {
		c.file("spec.source.path", b.Resolved.ISO, "the ISO",
			"if the ISO is built by a command, name it in source.generatedBy")
	}
}

func (b *Blueprint) validateLiveISO(c *checker) {
	l := b.Spec.LiveISO
	for field, args := range map[string][]string{"append": l.KernelArguments.Append, "delete": l.KernelArguments.Delete} {
		for i, a := range args {
			p := fmt.Sprintf("spec.liveISO.kernelArguments.%s[%d]", field, i)
			switch {
			case a == "":
				c.Add(p, "empty kernel argument", "")
			case strings.ContainsAny(a, " \t\n\r#"):
				c.Add(p, fmt.Sprintf("%q is not one kernel argument: it holds white space or '#'", suggest.Clip(a)), "give each argument as its own list item")
			}
		}
	}
	seen := map[string]int{}
	for i, f := range l.NetworkKeyfiles {
		p := fmt.Sprintf("spec.liveISO.networkKeyfiles[%d]", i)
		if !strings.HasSuffix(f, ".nmconnection") {
			c.Add(p, fmt.Sprintf("%q is not a NetworkManager keyfile name", suggest.Clip(f)), "keyfiles are named NAME.nmconnection")
		}
		base := filepath.Base(f)
		if j, ok := seen[base]; ok {
			c.Add(p, fmt.Sprintf("same file name as spec.liveISO.networkKeyfiles[%d]", j), "keyfiles land in one directory: give them distinct names")
		}
		seen[base] = i
		c.file(p, b.Resolved.NetworkKeyfiles[i], "the keyfile", "")
	}
	if b.Spec.SignaturePolicyFile != "" {
		if data, ok := c.readFile("spec.signaturePolicyFile", b.Resolved.SignaturePolicyFile, "the signature policy", 1<<20); ok && !json.Valid(data) {
			c.Add("spec.signaturePolicyFile", "the signature policy is not valid JSON", "see containers-policy.json(5)")
		}
	}
}

func (b *Blueprint) validateOpenShift(c *checker) {
	o := b.Spec.OpenShift
	if b.Spec.Target.Type != oskind.OpenShift {
		if o != nil && b.Spec.Target.Type == oskind.CoreOS {
			c.Add("spec.openshift", "only allowed when target.type is openshift", "")
		}
		return
	}
	if o == nil {
		c.Add("spec.openshift", "required when target.type is openshift", "add releaseImage, baseDomain and pullSecretFile")
		return
	}
	const p = "spec.openshift"
	if o.ReleaseImage == "" {
		c.Add(p+".releaseImage", "required", "e.g. quay.io/openshift-release-dev/ocp-release:4.16.12-x86_64")
	} else {
		c.image(p+".releaseImage", o.ReleaseImage, true)
	}
	b.validateClusterDomain(c)
	b.validatePullSecret(c)
	b.validateSSHKey(c)
	b.validateNetworks(c)
	b.validateBootstrapAddress(c)
	if !strings.HasPrefix(o.InstallDisk, "/dev/") {
		c.Add(p+".installDisk", fmt.Sprintf("%q is not a device path", suggest.Clip(o.InstallDisk)), "e.g. /dev/vda or /dev/disk/by-path/...")
	}
	if o.ExtraManifests != "" {
		c.dir(p+".extraManifests", b.Resolved.ExtraManifests)
	}
	validateOperators(c, o.Operators)
	validateProxy(c, o.Proxy)
	if r := o.ControlPlane.Replicas; r != nil && *r != 1 {
		c.Add(p+".controlPlane.replicas", fmt.Sprintf("must be 1, got %d", *r), "a seed is a single-node cluster")
	}
	if o.Compute.Replicas != 0 {
		c.Add(p+".compute.replicas", fmt.Sprintf("must be 0, got %d", o.Compute.Replicas),
			"a seed is a single-node cluster; add workers at day 2 (set workerIgnition: true to get their Ignition)")
	}
}

// validateClusterDomain checks the cluster's name and base domain, which together make its
// DNS domain.
func (b *Blueprint) validateClusterDomain(c *checker) {
	o := b.Spec.OpenShift
	const p = "spec.openshift"
	// A cluster name defaulted from an invalid metadata.name is reported there, once.
	if o.ClusterName != "" && o.ClusterName != b.Metadata.Name && (len(o.ClusterName) > 63 || !dns1123Label.MatchString(o.ClusterName)) {
		c.Add(p+".clusterName", fmt.Sprintf("%q is not a DNS-1123 label", suggest.Clip(o.ClusterName)), labelHint(o.ClusterName))
	}
	switch {
	case o.BaseDomain == "":
		c.Add(p+".baseDomain", "required", "e.g. edge.example.com")
	case !isDNSSubdomain(o.BaseDomain):
		c.Add(p+".baseDomain", fmt.Sprintf("%q is not a DNS subdomain", suggest.Clip(o.BaseDomain)), "lowercase labels separated by dots, e.g. edge.example.com")
	case len(o.ClusterName)+1+len(o.BaseDomain) > 253:
		c.Add(p+".baseDomain", "clusterName.baseDomain is longer than 253 characters", "")
	}
}

// validatePullSecret checks the pull secret file; messages never quote its content.
func (b *Blueprint) validatePullSecret(c *checker) {
	const p = "spec.openshift.pullSecretFile"
	switch f := b.Spec.OpenShift.PullSecretFile; {
	case f == "":
		c.Add(p, "required", "a file with the JSON pull secret, relative to the blueprint")
	case strings.ContainsAny(f, "{}\"\n") || len(f) > 4096:
		// That is the secret itself pasted in: say so without echoing it.
		c.Add(p, "must name a file, not hold the pull secret itself", "save the secret to a file (mode 0600) and give its path; remove it from the blueprint")
	default:
		if data, ok := c.readFile(p, b.Resolved.PullSecretFile, "the pull secret", maxPullSecretSize); ok {
			if msg := checks.PullSecret(data); msg != "" {
				c.Add(p, msg, "the file must hold {\"auths\": {\"REGISTRY\": {\"auth\": \"...\"}}}")
			}
		}
	}
}

// validateSSHKey checks the SSH public key, given inline or as a file (at most one).
func (b *Blueprint) validateSSHKey(c *checker) {
	o := b.Spec.OpenShift
	const p = "spec.openshift"
	if o.SSHPublicKey != "" && o.SSHPublicKeyFile != "" {
		c.Add(p+".sshPublicKeyFile", "sshPublicKey and sshPublicKeyFile are mutually exclusive", "keep one of them")
	}
	if o.SSHPublicKey != "" {
		if err := checks.SSHKey([]byte(o.SSHPublicKey)); err != nil {
			c.Add(p+".sshPublicKey", err.Error(), "one line of authorized_keys format, e.g. ssh-ed25519 AAAA... user@host")
		}
	}
	if o.SSHPublicKeyFile != "" {
		if data, ok := c.readFile(p+".sshPublicKeyFile", b.Resolved.SSHPublicKeyFile, "the SSH public key", maxSSHKeySize); ok {
			if err := checks.SSHKey(data); err != nil {
				c.Add(p+".sshPublicKeyFile", err.Error(), "the file must hold a public key (the .pub file), in authorized_keys format")
			}
		}
	}
}

// validateOperators checks the day-2 operators: each named once, from a catalog or a bundle.
func validateOperators(c *checker, ops []Operator) {
	names := map[string]int{}
	for i, op := range ops {
		q := fmt.Sprintf("spec.openshift.operators[%d]", i)
		switch {
		case op.Name == "":
			c.Add(q+".name", "required", "the operator's package name, e.g. ptp-operator")
		case !operatorName.MatchString(op.Name):
			c.Add(q+".name", fmt.Sprintf("%q is not a valid package name", suggest.Clip(op.Name)), "lowercase letters, digits, '-' and '.'")
		}
		if j, ok := names[op.Name]; ok && op.Name != "" {
			c.Add(q+".name", fmt.Sprintf("operator %q listed twice (also operators[%d])", suggest.Clip(op.Name), j), "")
		}
		names[op.Name] = i
		switch {
		case op.Catalog == "" && op.Bundle == "":
			c.Add(q, "one of catalog and bundle is required", "e.g. catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16")
		case op.Catalog != "" && op.Bundle != "":
			c.Add(q+".bundle", "catalog and bundle are mutually exclusive", "keep one of them")
		}
		if op.Catalog != "" {
			c.image(q+".catalog", op.Catalog, true)
		}
		if op.Bundle != "" {
			c.image(q+".bundle", op.Bundle, true)
			if op.Channel != "" {
				c.Add(q+".channel", "only allowed with catalog", "a bundle is one version of one channel already")
			}
		}
	}
}

type namedPrefix struct {
	path   string
	prefix netip.Prefix
}

func (b *Blueprint) validateNetworks(c *checker) {
	o := b.Spec.OpenShift
	const p = "spec.openshift"
	var nets []namedPrefix
	if len(o.ClusterNetwork) == 0 {
		c.Add(p+".clusterNetwork", "at least one cluster network is required", "")
	}
	for i, n := range o.ClusterNetwork {
		q := fmt.Sprintf("%s.clusterNetwork[%d]", p, i)
		pfx, ok := c.network(q+".cidr", n.CIDR)
		if !ok {
			continue
		}
		nets = append(nets, namedPrefix{q + ".cidr", pfx})
		if n.HostPrefix <= pfx.Bits() || n.HostPrefix > pfx.Addr().BitLen() {
			c.Add(q+".hostPrefix", fmt.Sprintf("must be between %d and %d for %s, got %d", pfx.Bits()+1, pfx.Addr().BitLen(), pfx, n.HostPrefix),
				"the per-node subnet must fit inside cidr; 23 is usual for a /14")
		}
	}
	if len(o.ServiceNetwork) == 0 {
		c.Add(p+".serviceNetwork", "at least one service network is required", "")
	}
	for i, n := range o.ServiceNetwork {
		q := fmt.Sprintf("%s.serviceNetwork[%d]", p, i)
		if pfx, ok := c.network(q, n); ok {
			nets = append(nets, namedPrefix{q, pfx})
		}
	}
	if len(o.MachineNetwork) == 0 {
		c.Add(p+".machineNetwork", "at least one machine network is required", "")
	}
	for i, n := range o.MachineNetwork {
		q := fmt.Sprintf("%s.machineNetwork[%d].cidr", p, i)
		if pfx, ok := c.network(q, n.CIDR); ok {
			nets = append(nets, namedPrefix{q, pfx})
		}
	}
	for i := range nets {
		for j := 0; j < i; j++ {
			if nets[i].prefix.Overlaps(nets[j].prefix) {
				c.Add(nets[i].path, fmt.Sprintf("%s overlaps %s (%s)", nets[i].prefix, nets[j].path, nets[j].prefix),
					"cluster, service and machine networks must be disjoint")
			}
		}
	}
	// The cluster is installed on the internal node IP (it stays when the site network
	// changes), so it must lie in a machine network and outside the pod and service networks.
	if ip, err := netip.ParsePrefix(b.Spec.Relocation.NodeIP); err == nil {
		inMachine := false
		for _, n := range nets {
			if !n.prefix.Contains(ip.Addr()) {
				continue
			}
			if strings.Contains(n.path, ".machineNetwork[") {
				inMachine = true
				continue
			}
			if b.Spec.Relocation.NodeIP == DefaultNodeIP {
				// Most likely nobody chose the node IP: point at the network that was chosen.
				c.Add(n.path, fmt.Sprintf("%s contains the internal node IP %s (spec.relocation.nodeIP, default %s)", n.prefix, ip.Addr(), DefaultNodeIP),
					"set spec.relocation.nodeIP to an address outside the cluster and service networks")
				continue
			}
			c.Add("spec.relocation.nodeIP", fmt.Sprintf("%s lies inside %s (%s)", ip.Addr(), n.path, n.prefix),
				"the internal node IP must be outside the cluster and service networks")
		}
		parsed := 0
		for _, n := range nets {
			if strings.Contains(n.path, ".machineNetwork[") {
				parsed++
			}
		}
		// Only when every machine network parsed: a typo is already reported on its own.
		if !inMachine && len(o.MachineNetwork) > 0 && parsed == len(o.MachineNetwork) {
			c.Add(p+".machineNetwork", fmt.Sprintf("no machine network contains the internal node IP %s (spec.relocation.nodeIP)", ip.Addr()),
				fmt.Sprintf("the seed's cluster runs on that address: add %s, or leave machineNetwork out to default to it", ip.Masked()))
		}
	}
}

// validateBootstrapAddress reports the networks with which the bootstrap etcd would not
// take the internal node IP (BootstrapAddress), at the field to change. Unparsable inputs,
// and a node IP outside every machine network, are reported by the checks above.
func (b *Blueprint) validateBootstrapAddress(c *checker) {
	o := b.Spec.OpenShift
	var machine []string
	inMachine := false
	ip, ipErr := netip.ParsePrefix(b.Spec.Relocation.NodeIP)
	for _, n := range o.MachineNetwork {
		machine = append(machine, n.CIDR)
		if pfx, err := netip.ParsePrefix(n.CIDR); err == nil && ipErr == nil && pfx.Contains(ip.Addr()) {
			inMachine = true
		}
	}
	_, err := BootstrapAddress(machine, o.ServiceNetwork, b.Spec.Relocation.NodeIP)
	var e *BootstrapAddressError
	if !errors.As(err, &e) || e.Parse {
		return
	}
	switch e.Field {
	case FieldNodeIP:
		c.Add("spec.relocation.nodeIP", e.Msg, e.Hint)
	case FieldMachineNetwork:
		// A node IP outside every machine network is reported once, by validateNetworks.
		if inMachine || !e.Outside {
			c.Add(fmt.Sprintf("spec.openshift.machineNetwork[%d].cidr", e.Index), e.Msg, e.Hint)
		}
	}
}

func (b *Blueprint) validateButane(c *checker) {
	for i, f := range b.Spec.Butane {
		p := fmt.Sprintf("spec.butane[%d]", i)
		switch {
		case f.File == "" && f.Inline == "":
			c.Add(p, "one of file and inline is required", "")
		case f.File != "" && f.Inline != "":
			c.Add(p+".inline", "file and inline are mutually exclusive", "keep one of them")
		case f.File != "":
			c.file(p+".file", b.Resolved.Butane[i], "the Butane file", "")
		}
	}
}

func (b *Blueprint) validateVM(c *checker) {
	vm := b.Spec.VM
	const p = "spec.vm"
	if vm.CPUs < 1 || vm.CPUs > 256 {
		c.Add(p+".cpus", fmt.Sprintf("must be between 1 and 256, got %d", vm.CPUs), "")
	}
	if vm.Memory < minMemory {
		c.Add(p+".memory", fmt.Sprintf("must be at least %s, got %s", minMemory, vm.Memory), "a bare number is MiB; write units for other sizes, e.g. 2GiB")
	}
	if vm.DiskSize < minDisk {
		c.Add(p+".diskSize", fmt.Sprintf("must be at least %s, got %s", minDisk, vm.DiskSize), "a bare number is MiB; write units for other sizes, e.g. 20GiB")
	}
	c.oneOf(p+".firmware", vm.Firmware, "bios", "uefi")
	c.oneOf(p+".accelerator", vm.Accelerator, "auto", "kvm", "tcg")
}

func (b *Blueprint) validateRelocation(c *checker) {
	r := b.Spec.Relocation
	const p = "spec.relocation"
	if pfx, err := netip.ParsePrefix(r.NodeIP); err != nil {
		hint := "an address with a prefix length, e.g. 192.168.127.10/24"
		if _, aerr := netip.ParseAddr(r.NodeIP); aerr == nil {
			hint = fmt.Sprintf("add the prefix length, e.g. %s/24", r.NodeIP)
		}
		c.Add(p+".nodeIP", fmt.Sprintf("%q is not an IP address in CIDR notation", suggest.Clip(r.NodeIP)), hint)
	} else if pfx.Bits() < pfx.Addr().BitLen() && pfx.Addr() == pfx.Masked().Addr() {
		c.Add(p+".nodeIP", fmt.Sprintf("%s is the network address, not a host address", pfx), "e.g. 192.168.127.10/24")
	}
	if r.RecertImage != "" {
		c.image(p+".recertImage", r.RecertImage, false)
	}
	if r.SiteConfigTimeout < MinSiteConfigTimeout || r.SiteConfigTimeout > MaxSiteConfigTimeout {
		c.Add(p+".siteConfigTimeout", fmt.Sprintf("must be between 10s and 24h, got %s", r.SiteConfigTimeout),
			"how long the seed waits for the technician to insert the site-config medium, e.g. 10m")
	}
	switch {
	case r.KubeletCertValidity > MaxKubeletCertValidity:
		// No signer can give more: kube-controller-manager signs kubelet certificates with
		// cluster-signing-duration 720h, and its own signer lives 30 days.
		c.Add(p+".kubeletCertValidity", fmt.Sprintf("%s is more than any OpenShift signer issues: kube-controller-manager signs kubelet certificates for 720h (30 days) at most, and the kube-apiserver's serving certificates last 30 days too", r.KubeletCertValidity),
			"the shelf life of a seed is not bounded by certificates (the seal's recert ends them, the site's recert re-signs them from the site's first boot): ask only what the factory run needs, e.g. 24h")
	case r.KubeletCertValidity < MinKubeletCertValidity:
		c.Add(p+".kubeletCertValidity", fmt.Sprintf("must be at least 1h, got %s", r.KubeletCertValidity), "e.g. 24h")
	}
	b.validateSiteConfigKeys(c)
	b.validateSiteConfigIdentity(c)
}

// validateSiteConfigIdentity checks spec.relocation.siteConfigIdentity, a secret: no
// message quotes it.
func (b *Blueprint) validateSiteConfigIdentity(c *checker) {
	const p = "spec.relocation.siteConfigIdentity"
	if b.Spec.Relocation.SiteConfigIdentity == "" {
		return
	}
	if data, ok := c.readFile(p, b.Resolved.SiteConfigIdentity, "the site-config identity", maxSSHKeySize); ok {
		if _, err := age.ParseIdentities(bytes.NewReader(data)); err != nil {
			c.Add(p, "not an age identity file", "make one with age-keygen -o FILE (AGE-SECRET-KEY-1... lines); keep it 0600")
		}
	}
}

// validateSiteConfigKeys checks spec.relocation.siteConfigKeys: each a public key as the
// reconfiguration hook loads it, no key twice.
func (b *Blueprint) validateSiteConfigKeys(c *checker) {
	seen := map[string]int{}
	for i, k := range b.Spec.Relocation.SiteConfigKeys {
		q := fmt.Sprintf("spec.relocation.siteConfigKeys[%d]", i)
		data, ok := c.readFile(q, b.Resolved.SiteConfigKeys[i], "the site-config key", maxSSHKeySize)
		if !ok {
			continue
		}
		key, err := pubkey.Parse(k, data)
		if err != nil {
			c.Add(q, err.Error(), "name the .pub file of a pair from snofactory keys generate (or cosign generate-key-pair)")
			continue
		}
		if j, dup := seen[key.Fingerprint]; dup {
			c.Add(q, fmt.Sprintf("the same key as spec.relocation.siteConfigKeys[%d]", j), "list each key once")
		}
		seen[key.Fingerprint] = i
	}
}

func (b *Blueprint) validateOutputs(c *checker) {
	o := b.Spec.Outputs
	const p = "spec.outputs"
	seen := map[string]bool{}
	for i, f := range o.Formats {
		q := fmt.Sprintf("%s.formats[%d]", p, i)
		c.oneOf(q, f, "chunked", "qcow2", "raw")
		if seen[f] {
			c.Add(q, fmt.Sprintf("format %q listed twice", suggest.Clip(f)), "")
		}
		seen[f] = true
	}
	c.oneOf(p+".compression", o.Compression, "none", "zstd", "xz", "gzip")
	if o.Push != "" {
		if ref, ok := c.image(p+".push", o.Push, false); ok {
			if _, digested := ref.(reference.Digested); digested {
				c.Add(p+".push", "a push target cannot carry a digest", "name a tag, e.g. registry.example:5000/seeds/du:v1")
			} else if reference.IsNameOnly(ref) {
				c.Add(p+".push", "a push target needs a tag", "e.g. "+ref.Name()+":v1")
			}
		}
	}
	if sg := o.Signing; sg != nil {
		b.validateSigning(c, sg)
	}
	for i, r := range o.CredentialsRecipients {
		if !strings.HasPrefix(r, "age1") && !strings.HasPrefix(r, "ssh-ed25519 ") && !strings.HasPrefix(r, "ssh-rsa ") {
			c.Add(fmt.Sprintf("%s.credentialsRecipients[%d]", p, i), fmt.Sprintf("%q is not an age or SSH public key", suggest.Clip(r)),
				"give an age recipient (age1..., from age-keygen -y) or an SSH public key line (ssh-ed25519 AAAA...)")
		}
	}
}

// validateSigning checks spec.outputs.signing: a push to sign, and an encrypted sigstore
// private key (never a public key or a clear one, which the hint says how to make).
func (b *Blueprint) validateSigning(c *checker, sg *Signing) {
	const p = "spec.outputs.signing"
	if b.Spec.Outputs.Push == "" {
		c.Add(p, "signing needs spec.outputs.push: signatures are attached in a registry", "name the registry to push to in spec.outputs.push")
	}
	if sg.Key == "" {
		c.Add(p+".key", "required: the private key to sign with", "make a pair with: snofactory keys generate keys/depot")
	} else if data, ok := c.readFile(p+".key", b.Resolved.SigningKey, "the signing key", 64<<10); ok &&
		!bytes.Contains(data, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) &&
		!bytes.Contains(data, []byte("-----BEGIN ENCRYPTED COSIGN PRIVATE KEY-----")) {
		c.Add(p+".key", "not an encrypted sigstore private key", "name the PREFIX.key that snofactory keys generate (or cosign generate-key-pair) wrote, not the .pub")
	}
	if sg.PassphraseFile != "" {
		c.file(p+".passphraseFile", b.Resolved.SigningPassphraseFile, "the passphrase file", "")
	}
}

// oneOf reports v unless it is one of allowed, with a did-you-mean hint.
func (c *checker) oneOf(path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	msg := fmt.Sprintf("%q is not one of %s", suggest.Clip(v), strings.Join(allowed, ", "))
	if v == "" {
		msg = "required: one of " + strings.Join(allowed, ", ")
	}
	hint := ""
	if s := Suggest(v, allowed); s != "" {
		hint = fmt.Sprintf("did you mean %q?", suggest.Clip(s))
	}
	c.Add(path, msg, hint)
}

// image checks a fully qualified image reference; requireVersion asks for a tag or digest.
func (c *checker) image(path, s string, requireVersion bool) (reference.Named, bool) {
	if len(s) > checks.MaxReferenceLen {
		c.Add(path, fmt.Sprintf("image reference is %d bytes long, more than %d", len(s), checks.MaxReferenceLen), "")
		return nil, false
	}
	ref, err := reference.ParseNamed(s)
	if err != nil {
		hint := ""
		if n, nerr := reference.ParseNormalizedNamed(s); nerr == nil {
			hint = fmt.Sprintf("write the registry explicitly: %s", n.String())
		}
		c.Add(path, fmt.Sprintf("invalid image reference %q: %v", suggest.Clip(s), err), hint)
		return nil, false
	}
	if requireVersion && reference.IsNameOnly(ref) {
		c.Add(path, fmt.Sprintf("image reference %q has neither tag nor digest", suggest.Clip(s)), "add a tag (:v1.2) or better a digest (@sha256:...) so builds are reproducible")
		return ref, false
	}
	return ref, true
}

// repository checks a mirror source or mirror: a repository or a registry host, without
// tag or digest.
func (c *checker) repository(path, s string) {
	if msg, hint := checks.Repository(s); msg != "" {
		c.Add(path, msg, hint)
	}
}

// network checks a CIDR that names a network (no host bits set).
func (c *checker) network(path, s string) (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		hint := "e.g. 10.128.0.0/14"
		if _, aerr := netip.ParseAddr(s); aerr == nil {
			hint = "add the prefix length, e.g. " + s + "/24"
		}
		c.Add(path, fmt.Sprintf("%q is not a CIDR", suggest.Clip(s)), hint)
		return pfx, false
	}
	if pfx.Masked() != pfx {
		c.Add(path, fmt.Sprintf("%s has host bits set", s), fmt.Sprintf("did you mean %s?", pfx.Masked()))
		return pfx.Masked(), true
	}
	return pfx, true
}

func (c *checker) file(path, abs, what, hint string) {
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Add(path, fmt.Sprintf("%s %s does not exist", what, abs), hint)
	case err != nil:
		c.Add(path, fmt.Sprintf("cannot read %s: %v", what, err), hint)
	case !fi.Mode().IsRegular():
		c.Add(path, fmt.Sprintf("%s %s is not a regular file", what, abs), hint)
	}
}

func (c *checker) dir(path, abs string) {
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Add(path, fmt.Sprintf("directory %s does not exist", abs), "")
	case err != nil:
		c.Add(path, fmt.Sprintf("cannot read directory: %v", err), "")
	case !fi.IsDir():
		c.Add(path, fmt.Sprintf("%s is not a directory", abs), "")
	}
}

// readFile reads a small referenced file. Errors never quote the content.
func (c *checker) readFile(path, abs, what string, limit int64) ([]byte, bool) {
	c0 := c.Len()
	c.file(path, abs, what, "")
	if c.Len() > c0 {
		return nil, false
	}
	data, err := smallfile.Read(abs, limit)
	switch {
	case errors.Is(err, smallfile.ErrTooLarge):
		c.Add(path, fmt.Sprintf("%s %s is larger than %d bytes", what, abs, limit), "")
		return nil, false
	case err != nil:
		c.Add(path, fmt.Sprintf("cannot read %s: %v", what, err), "")
		return nil, false
	}
	return data, true
}

// Upper bounds on list lengths, far above any real seed.
const (
	MaxLabels          = 200
	MaxExtraImages     = 2000
	MaxRegistryMirrors = 200
	MaxMirrors         = 32
	MaxButane          = 100
	MaxSkip            = 200
	MaxNetworks        = 32
	MaxOperators       = 200
	MaxSiteConfigKeys  = 32
)

func (b *Blueprint) withinLimits(c *checker) bool {
	s := &b.Spec
	type limit struct {
		path   string
		n, max int
	}
	limits := []limit{
		{"metadata.labels", len(b.Metadata.Labels), MaxLabels},
		{"spec.extraImages", len(s.ExtraImages), MaxExtraImages},
		{"spec.registryMirrors", len(s.RegistryMirrors), MaxRegistryMirrors},
		{"spec.butane", len(s.Butane), MaxButane},
		{"spec.validation.skip", len(s.Validation.Skip), MaxSkip},
		{"spec.relocation.siteConfigKeys", len(s.Relocation.SiteConfigKeys), MaxSiteConfigKeys},
	}
	for i, m := range s.RegistryMirrors {
		if i < MaxRegistryMirrors {
			limits = append(limits, limit{fmt.Sprintf("spec.registryMirrors[%d].mirrors", i), len(m.Mirrors), MaxMirrors})
		}
	}
	if o := s.OpenShift; o != nil {
		limits = append(limits,
			limit{"spec.openshift.clusterNetwork", len(o.ClusterNetwork), MaxNetworks},
			limit{"spec.openshift.serviceNetwork", len(o.ServiceNetwork), MaxNetworks},
			limit{"spec.openshift.machineNetwork", len(o.MachineNetwork), MaxNetworks},
			limit{"spec.openshift.operators", len(o.Operators), MaxOperators})
	}
	ok := true
	for _, l := range limits {
		if l.n > l.max {
			c.Add(l.path, fmt.Sprintf("%d items, more than the limit of %d", l.n, l.max), "")
			ok = false
		}
	}
	return ok
}

// Suggest returns the allowed value closest to v, for did-you-mean hints, or "".
func Suggest(v string, allowed []string) string { return suggest.Closest(v, allowed) }

// knownCheck reports a skip id that names no check of the validation gate, with the
// closest known id as a hint.
func (c *checker) knownCheck(path, id string) {
	if !checkID.MatchString(id) || slices.Contains(KnownCheckIDs(), id) {
		return
	}
	hint := "known checks: " + strings.Join(KnownCheckIDs(), ", ")
	if near := suggest.Closest(id, KnownCheckIDs()); near != "" {
		hint = fmt.Sprintf("did you mean %q?", near)
	}
	c.Add(path, fmt.Sprintf("unknown check %q", suggest.Clip(id)), hint)
}

// validateProxy holds the factory proxy to the site's rule (seeds/checks Report.Proxy, the
// installer's validateProxy) and refuses credentials in its URLs: the blueprint is hashed
// into cache keys and printed in plans, and the site gives its own proxy anyway.
func validateProxy(c *checker, p *Proxy) {
	if p == nil {
		return
	}
	const path = "spec.openshift.proxy"
	c.Report.Proxy(path, p.HTTPProxy, p.HTTPSProxy, p.NoProxy)
	for _, u := range []struct{ field, v string }{{"httpProxy", p.HTTPProxy}, {"httpsProxy", p.HTTPSProxy}} {
		if checks.RedactURL(u.v) != u.v {
			c.Add(path+"."+u.field, fmt.Sprintf("%q carries credentials", checks.RedactURL(u.v)),
				"a blueprint is not a secret: use a factory proxy that needs none (the site config gives the site's proxy, credentials and all)")
		}
	}
}
