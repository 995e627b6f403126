package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/snofactory/snofactory/seeds/contract/wire"
)

// butane is the part of the Butane schema render writes its own configs in. They are built
// as values and handed to Butane like a user's fragment, so the same translator and the same
// MCO-support checks apply to ours and theirs.
type butane struct {
	Variant  string          `yaml:"variant"`
	Version  string          `yaml:"version"`
	Metadata *butaneMetadata `yaml:"metadata,omitempty"`
	Storage  *butaneStorage  `yaml:"storage,omitempty"`
	Systemd  *butaneSystemd  `yaml:"systemd,omitempty"`
	Passwd   *butanePasswd   `yaml:"passwd,omitempty"`
}

type butaneMetadata struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type butaneStorage struct {
	Disks       []butaneDisk       `yaml:"disks,omitempty"`
	Filesystems []butaneFilesystem `yaml:"filesystems,omitempty"`
	Files       []butaneFile       `yaml:"files,omitempty"`
}

type butaneFile struct {
	Path      string         `yaml:"path"`
	Mode      int            `yaml:"mode"`
	Overwrite bool           `yaml:"overwrite"`
	Contents  butaneContents `yaml:"contents"`
}

type butaneContents struct {
	Inline string `yaml:"inline"`
}

type butaneSystemd struct {
	Units []butaneUnit `yaml:"units"`
}

type butaneUnit struct {
	Name     string         `yaml:"name"`
	Enabled  *bool          `yaml:"enabled,omitempty"`
	Contents string         `yaml:"contents,omitempty"`
	Dropins  []butaneDropin `yaml:"dropins,omitempty"`
}

type butaneDropin struct {
	Name     string `yaml:"name"`
	Contents string `yaml:"contents"`
}

type butanePasswd struct {
	Users []butaneUser `yaml:"users"`
}

type butaneUser struct {
	Name              string   `yaml:"name"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
}

const roleLabel = "machineconfiguration.openshift.io/role"

// masterMC starts an openshift-variant Butane config for a master MachineConfig.
func masterMC(variantVersion, name string) butane {
	return butane{
		Variant:  "openshift",
		Version:  variantVersion,
		Metadata: &butaneMetadata{Name: name, Labels: map[string]string{roleLabel: "master"}},
	}
}

// Unit and file names other stages rely on.
const (
	// ReconfigureUnit applies the site configuration at the site; the seal installs and
	// enables it, outside every MachineConfig.
	ReconfigureUnit = wire.ReconfigureUnitName
	// SealUnit and SealScript seal the node when the seal stage boots it with its request
	// disk (node/snofactory-seal.sh).
	SealUnit   = "snofactory-seal.service"
	SealScript = "/usr/local/bin/snofactory-seal"
	// AgentUnit reports install phases from a CoreOS-style target.
	AgentUnit = "snofactory-agent.service"
	// AgentBinary is where the on-node snofactory binary lives.
	AgentBinary = "/usr/local/bin/snofactory"
	// ShipmentFile tells the seal stage (and the agent on the node) how long the kubelet
	// client certificate must remain valid when the seed is sealed.
	ShipmentFile = "/etc/snofactory/shipment.json"
	// NodeIPHintFile is read by the MCO's nodeip-configuration.service.
	NodeIPHintFile = "/etc/default/nodeip-configuration"
)

// Shipment is the content of ShipmentFile.
type Shipment struct {
	// KubeletClientCertMinValidity: at validation, the kubelet client certificate must not
	// expire sooner than this (Go duration); the site's recert renews it.
	KubeletClientCertMinValidity string `json:"kubeletClientCertMinValidity"`
	// KubeletClientCert is the certificate to check.
	KubeletClientCert string `json:"kubeletClientCert"`
}

// RelocationFiles are the files the relocation MachineConfigs put on an OpenShift node: the
// seal checks they are in place before it seals (the MCO applied the configs).
func RelocationFiles() []string {
	return []string{
		"/etc/NetworkManager/dispatcher.d/pre-up.d/30-snofactory-internal-ip",
		"/etc/NetworkManager/dispatcher.d/30-snofactory-internal-ip",
		NodeIPHintFile,
		"/etc/systemd/system/kubelet.service.d/30-snofactory-node-ip.conf",
		"/etc/systemd/system/crio.service.d/30-snofactory-node-ip.conf",
		ShipmentFile,
	}
}

// relocationMC is one generated MachineConfig and what it is for.
type relocationMC struct {
	Concern string
	Config  butane
}

// relocationConfigs returns the relocatable-seed MachineConfigs, one per concern, and the
// settings they carry. The names sort before the usual 99- of user configs so a user's
// MachineConfig can override a file.
func relocationConfigs(variantVersion string, r Relocation) ([]relocationMC, *RelocationReport, error) {
	p, err := netip.ParsePrefix(r.InternalIP)
	if err != nil {
		return nil, nil, fmt.Errorf("relocation.internalIP: %w", err)
	}
	window, err := r.window()
	if err != nil {
		return nil, nil, fmt.Errorf("relocation.shipmentWindow: %w", err)
	}
	shipment, err := shipmentConfig(variantVersion, window)
	if err != nil {
		return nil, nil, err
	}
	mcs := []relocationMC{
		{"internal-ip", internalIPConfig(variantVersion, p)},
		{"node-ip", nodeIPConfig(variantVersion, p)},
		{"seal-service", sealConfig(variantVersion)},
		{"kubelet-cert-window", shipment},
	}
	rep := &RelocationReport{
		InternalIP:                   r.InternalIP,
		NodeIPHint:                   p.Masked().Addr().String(),
		ReconfigureUnit:              ReconfigureUnit,
		ShipmentFile:                 ShipmentFile,
		KubeletClientCertMinValidity: window.String(),
	}
	for _, mc := range mcs {
		rep.MachineConfigs = append(rep.MachineConfigs, mc.Config.Metadata.Name)
	}
	return mcs, rep, nil
}

// internalIPConfig puts the internal address p on br-ex. br-ex only exists once
// ovs-configuration.service has moved the uplink into OVS, so a NetworkManager dispatcher
// script adds the address when br-ex comes up (pre-up, so it is there before anything binds)
// and again on up (NM may re-activate br-ex and flush runtime addresses). The same script
// puts it on the live system (liveAddressConfig).
func internalIPConfig(variantVersion string, p netip.Prefix) butane {
	script := internalIPScript(p)
	mc := masterMC(variantVersion, "90-master-snofactory-internal-ip")
	mc.Storage = &butaneStorage{Files: []butaneFile{
		{Path: RelocationFiles()[0], Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: script}},
		{Path: RelocationFiles()[1], Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: script}},
	}}
	return mc
}

// internalIPScript adds the relocation address p, idempotently (a run that loses a race with
// another adds nothing and still succeeds). As a NetworkManager dispatcher script (arguments:
// interface, action) it acts on br-ex's pre-up and up only; run without arguments, as the
// live system's unit does, it acts on the interface of the default route: the first "dev"
// that `ip route show default` prints (iproute2 ip/iproute.c print_route; a multipath route
// names its devices on the nexthop lines below it).
func internalIPScript(p netip.Prefix) string {
	family, name := "-4", "IPv4"
	if p.Addr().Is6() {
		family, name = "-6", "IPv6"
	}
	return fmt.Sprintf(`#!/bin/sh
# Generated by snofactory: keep the relocation address %[1]s on the node, so the cluster's
# node address survives any change of the site-facing address.
set -u
addr=%[1]s
if [ $# -gt 0 ]; then
	[ "$1" = br-ex ] || exit 0
	case "${2:-}" in pre-up|up) ;; *) exit 0 ;; esac
	dev=br-ex
else
	dev=$(ip %[2]s route show default | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
	if [ -z "$dev" ]; then
		echo "snofactory-internal-ip: no %[3]s default route: nowhere to add $addr" >&2
		exit 1
	fi
fi
present() { ip -o addr show dev "$dev" | grep -q " $addr "; }
present || ip addr add "$addr" dev "$dev" || present
`, p.String(), family, name)
}

// nodeIPConfig makes the internal address the node IP. The hint makes the MCO's
// nodeip-configuration.service choose the address in the internal subnet (upstream writes
// the subnet's network address, as here). On the very first boot that service runs before
// br-ex exists, so explicit drop-ins that sort after its 20-nodenet.conf pin kubelet's and
// CRI-O's node IP as well.
func nodeIPConfig(variantVersion string, p netip.Prefix) butane {
	ip := p.Addr().String()
	mc := masterMC(variantVersion, "90-master-snofactory-node-ip")
	mc.Storage = &butaneStorage{Files: []butaneFile{
		{Path: NodeIPHintFile, Mode: 0o644, Overwrite: true, Contents: butaneContents{Inline: "KUBELET_NODEIP_HINT=" + p.Masked().Addr().String() + "\n"}},
	}}
	mc.Systemd = &butaneSystemd{Units: []butaneUnit{
		{Name: "kubelet.service", Dropins: []butaneDropin{{Name: "30-snofactory-node-ip.conf",
			Contents: fmt.Sprintf("[Service]\nEnvironment=\"KUBELET_NODE_IP=%[1]s\" \"KUBELET_NODE_IPS=%[1]s\"\n", ip)}}},
		{Name: "crio.service", Dropins: []butaneDropin{{Name: "30-snofactory-node-ip.conf",
			Contents: fmt.Sprintf("[Service]\nEnvironment=\"CONTAINER_STREAM_ADDRESS=%s\"\n", ip)}}},
	}}
	return mc
}

// sealConfig installs the seal service, which runs only on the boot the seal stage attaches
// its request disk to. The site's reconfiguration service is not here: the seal writes it
// under /etc/systemd/system itself (wire.ReconfigureUnitName), as lifecycle-agent installs its
// own, so the machine-config daemon never sees a unit it does not own change state.
func sealConfig(variantVersion string) butane {
	t := true
	mc := masterMC(variantVersion, "90-master-snofactory-seal")
	mc.Storage = &butaneStorage{Files: []butaneFile{{Path: SealScript, Mode: 0o755, Overwrite: true, Contents: butaneContents{Inline: sealScript}}}}
	mc.Systemd = &butaneSystemd{Units: []butaneUnit{{
		Name:    SealUnit,
		Enabled: &t,
		Contents: `[Unit]
Description=snofactory: seal this node for relocation, as the factory's seal disk asks
ConditionPathExists=/dev/disk/by-id/virtio-snofactory-seal
After=kubelet.service crio.service

[Service]
Type=oneshot
ExecStart=` + SealScript + `

[Install]
WantedBy=multi-user.target
`,
	}}}
	return mc
}

// shipmentConfig writes down the kubelet client certificate validity the seed needs. No
// KubeletConfig knob sets it (the signer's duration belongs to kube-controller-manager, 30
// days upstream), so render records the window the seed must survive and validate checks it.
// Nothing renews the certificate at the seal: the seed-time recert ends every certificate's
// life and the site's recert (--extend-expiration) starts it again on the site's first boot.
func shipmentConfig(variantVersion string, window time.Duration) (butane, error) {
	ship, err := stableJSON(Shipment{KubeletClientCertMinValidity: window.String(), KubeletClientCert: "/var/lib/kubelet/pki/kubelet-client-current.pem"})
	if err != nil {
		return butane{}, err
	}
	mc := masterMC(variantVersion, "90-master-snofactory-shipment")
	mc.Storage = &butaneStorage{Files: []butaneFile{
		{Path: ShipmentFile, Mode: 0o644, Overwrite: true, Contents: butaneContents{Inline: string(ship)}},
	}}
	return mc, nil
}

// translateOwn runs one of render's own Butane configs through Butane.
func translateOwn(name string, b butane, raw bool) ([]byte, error) {
	src, err := marshalYAML(b)
	if err != nil {
		return nil, err
	}
	return translate(name, src, raw)
}

// machineConfig is the envelope of a MachineConfig, for checking and writing.
type machineConfig struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Config map[string]any `yaml:"config"`
	} `yaml:"spec"`
}

const mcAPIVersion = "machineconfiguration.openshift.io/v1"

// checkMachineConfig parses doc as a MachineConfig for role master and validates its
// spec.config with the Ignition spec package of the version it declares. It returns the
// MachineConfig's name and that version.
func checkMachineConfig(what string, doc []byte) (name, ignVersion string, err error) {
	var mc machineConfig
	if err := yaml.Unmarshal(doc, &mc); err != nil {
		return "", "", fmt.Errorf("%s: not a MachineConfig: %w", what, err)
	}
	var errs []error
	if mc.APIVersion != mcAPIVersion {
		errs = append(errs, fmt.Errorf("apiVersion %q, want %s", mc.APIVersion, mcAPIVersion))
	}
	if mc.Kind != "MachineConfig" {
		errs = append(errs, fmt.Errorf("kind %q, want MachineConfig", mc.Kind))
	}
	if mc.Metadata.Name == "" {
		errs = append(errs, errors.New("metadata.name is empty"))
	}
	if mc.Metadata.Labels[roleLabel] == "" {
		errs = append(errs, fmt.Errorf("label %s is missing", roleLabel))
	}
	if mc.Spec.Config == nil {
		errs = append(errs, errors.New("spec.config is missing"))
	}
	if len(errs) > 0 {
		return "", "", fmt.Errorf("%s: not a valid MachineConfig: %w", what, errors.Join(errs...))
	}
	raw, err := json.Marshal(mc.Spec.Config)
	if err != nil {
		return "", "", fmt.Errorf("%s: spec.config: %w", what, err)
	}
	v, _, err := validateIgnition(what+" spec.config", raw, true)
	if err != nil {
		return "", "", err
	}
	return mc.Metadata.Name, v, nil
}

// wrapMachineConfig puts a raw Ignition config into a master MachineConfig as YAML.
func wrapMachineConfig(name string, ign []byte) ([]byte, error) {
	cfg, err := jsonToYAMLValue(ign)
	if err != nil {
		return nil, fmt.Errorf("MachineConfig %s: %w", name, err)
	}
	type meta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	doc := struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   meta   `yaml:"metadata"`
		Spec       struct {
			Config any `yaml:"config"`
		} `yaml:"spec"`
	}{APIVersion: mcAPIVersion, Kind: "MachineConfig", Metadata: meta{Name: name, Labels: map[string]string{roleLabel: "master"}}}
	doc.Spec.Config = cfg
	return marshalYAML(doc)
}

// withPlaceholderMetadata appends openshift metadata to a fragment that has none, so Butane
// will translate it; only its Ignition config is used. Appending keeps the user's line
// numbers in errors.
func withPlaceholderMetadata(src []byte) []byte {
	s := strings.TrimRight(string(src), "\n")
	return []byte(s + "\nmetadata: {name: snofactory-fragment, labels: {" + roleLabel + ": master}}\n")
}
