package v1alpha1

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/seeds/contract/oskind"
)

// Defaults that do not depend on the target.
const (
	DefaultIgnitionVersionCoreOS = "3.3.0"
	DefaultFirmware              = "bios"
	DefaultAccelerator           = "auto"
	DefaultInstallDisk           = "/dev/vda"
	DefaultNodeIP                = "192.168.127.10/24"
	DefaultKubeletCertValidity   = Duration(24 * time.Hour)
	MinKubeletCertValidity       = Duration(time.Hour)
	MaxKubeletCertValidity       = Duration(30 * 24 * time.Hour) // the longest an OpenShift signer issues kubelet and serving certificates
	DefaultSiteConfigTimeout     = Duration(10 * time.Minute)
	DefaultRecertImage           = "quay.io/edge-infrastructure/recert:v0"
	MinSiteConfigTimeout         = Duration(10 * time.Second)
	MaxSiteConfigTimeout         = Duration(24 * time.Hour)
	DefaultCompression           = "zstd"
	DefaultFormat                = "chunked"
	DefaultClusterNetworkCIDR    = "10.128.0.0/14"
	DefaultClusterHostPrefix     = 23
	DefaultServiceNetwork        = "172.30.0.0/16"
)

// Default fills every unset field with its documented default. It is idempotent, and the
// only place defaults are applied; call it before Validate.
func (b *Blueprint) Default() {
	s := &b.Spec
	openshift := s.Target.Type == oskind.OpenShift

	if s.Target.Type == oskind.CoreOS && s.Target.IgnitionVersion == "" {
		s.Target.IgnitionVersion = DefaultIgnitionVersionCoreOS
	}

	if o := s.OpenShift; o != nil {
		if o.ClusterName == "" {
			o.ClusterName = b.Metadata.Name
		}
		if len(o.ClusterNetwork) == 0 {
			o.ClusterNetwork = []ClusterNetwork{{CIDR: DefaultClusterNetworkCIDR, HostPrefix: DefaultClusterHostPrefix}}
		}
		if len(o.ServiceNetwork) == 0 {
			o.ServiceNetwork = []string{DefaultServiceNetwork}
		}
		if len(o.MachineNetwork) == 0 {
			o.MachineNetwork = []MachineNetwork{{CIDR: defaultMachineNetwork(s.Relocation.NodeIP)}}
		}
		if o.InstallDisk == "" {
			o.InstallDisk = DefaultInstallDisk
		}
		if o.ControlPlane.Replicas == nil {
			one := 1
			o.ControlPlane.Replicas = &one
		}
	}

	vm := &s.VM
	if vm.CPUs == 0 {
		vm.CPUs = pick(openshift, 8, 2)
	}
	if vm.Memory == 0 {
		vm.Memory = pick(openshift, 16*GiB, 1*GiB)
	}
	if vm.DiskSize == 0 {
		vm.DiskSize = pick(openshift, 120*GiB, 8*GiB)
	}
	if vm.Firmware == "" {
		vm.Firmware = DefaultFirmware
	}
	if vm.Accelerator == "" {
		vm.Accelerator = DefaultAccelerator
	}
	t := &vm.Timeouts
	setDuration(&t.Boot, 10*time.Minute)
	setDuration(&t.Install, 30*time.Minute)
	setDuration(&t.Cluster, 2*time.Hour)
	setDuration(&t.Shutdown, 5*time.Minute)

	s.Disk.defaultDisk()

	if s.Relocation.NodeIP == "" {
		s.Relocation.NodeIP = DefaultNodeIP
	}
	if openshift && s.Relocation.RecertImage == "" {
		s.Relocation.RecertImage = DefaultRecertImage
	}
	if s.Relocation.SiteConfigTimeout == 0 {
		s.Relocation.SiteConfigTimeout = DefaultSiteConfigTimeout
	}
	if s.Relocation.KubeletCertValidity == 0 {
		s.Relocation.KubeletCertValidity = DefaultKubeletCertValidity
	}

	if len(s.Outputs.Formats) == 0 {
		s.Outputs.Formats = []string{DefaultFormat}
	}
	if s.Outputs.Compression == "" {
		s.Outputs.Compression = DefaultCompression
	}
}

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func setDuration(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}

// Dir is the directory of the blueprint file; relative paths in the blueprint are resolved
// against it. Empty for a blueprint not loaded from a file.
func (b *Blueprint) Dir() string { return b.dir }

// SetDir records the blueprint's directory (made absolute) and fills Resolved with the
// absolute forms of every path the blueprint references.
func (b *Blueprint) SetDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	b.dir = abs
	s := &b.Spec
	r := ResolvedPaths{
		OCILayout: b.Path(s.Outputs.OCILayout),
	}
	if s.Source != nil {
		r.ISO = b.Path(s.Source.Path)
	}
	if o := s.OpenShift; o != nil {
		r.PullSecretFile = b.Path(o.PullSecretFile)
		r.SSHPublicKeyFile = b.Path(o.SSHPublicKeyFile)
		r.ExtraManifests = b.Path(o.ExtraManifests)
	}
	for _, f := range s.Butane {
		r.Butane = append(r.Butane, b.Path(f.File))
	}
	for _, f := range s.LiveISO.NetworkKeyfiles {
		r.NetworkKeyfiles = append(r.NetworkKeyfiles, b.Path(f))
	}
	for _, k := range s.Relocation.SiteConfigKeys {
		r.SiteConfigKeys = append(r.SiteConfigKeys, b.Path(k))
	}
	r.SiteConfigIdentity = b.Path(s.Relocation.SiteConfigIdentity)
	r.SignaturePolicyFile = b.Path(s.SignaturePolicyFile)
	if sg := s.Outputs.Signing; sg != nil {
		r.SigningKey = b.Path(sg.Key)
		r.SigningPassphraseFile = b.Path(sg.PassphraseFile)
	}
	b.Resolved = r
	return nil
}

// Path resolves p against the blueprint's directory; empty stays empty and absolute stays
// as it is.
func (b *Blueprint) Path(p string) string {
	if p == "" {
		return ""
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(b.dir, p)
}

// CheckISO tells whether a local live ISO (source.path) is there to read. When it is
// missing and source.generatedBy names the command that builds it, the error says to run
// that command: validation accepts such a blueprint before the ISO exists, so the stage
// that reads the ISO calls this first.
func (b *Blueprint) CheckISO() error {
	s := b.Spec.Source
	if s == nil || s.Path == "" {
		return nil
	}
	fi, err := os.Stat(b.Resolved.ISO)
	switch {
	case errors.Is(err, os.ErrNotExist) && s.GeneratedBy != "":
		return fmt.Errorf("live ISO %s does not exist yet: build it first with `%s`: %w", b.Resolved.ISO, s.GeneratedBy, err)
	case err != nil:
		return fmt.Errorf("live ISO %s: %w", b.Resolved.ISO, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("live ISO %s is not a regular file", b.Resolved.ISO)
	}
	return nil
}

// defaultMachineNetwork is the subnet of the internal node IP: the seed's cluster is installed
// on that address, so its machine network must contain it, whatever the site network is.
func defaultMachineNetwork(nodeIP string) string {
	if nodeIP == "" {
		nodeIP = DefaultNodeIP
	}
	p, err := netip.ParsePrefix(nodeIP)
	if err != nil {
		p = netip.MustParsePrefix(DefaultNodeIP)
	}
	return p.Masked().String()
}
