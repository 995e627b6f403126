package reconfigure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/snofactory/snofactory/pipeline/clock"
	"github.com/snofactory/snofactory/seeds/contract/oskind"
	"github.com/snofactory/snofactory/seeds/contract/seedfit"
	"github.com/snofactory/snofactory/seeds/contract/wire"
	"github.com/snofactory/snofactory/seeds/node/steps"
	"github.com/snofactory/snofactory/seeds/site/siteconfig"
)

// Paths under the installed root.
const (
	// DefaultStateDir holds the progress of a reconfiguration. It must survive a reboot.
	DefaultStateDir = "/var/lib/snofactory/reconfigure"
	// DoneFile marks a finished reconfiguration and holds the site config's digest; the
	// OpenShift unit does not start again once it exists (ConditionPathExists=!).
	DoneFile = "/var/lib/snofactory/reconfigured"
	// ImagesFile names the pinned recert and etcd images on an OpenShift seed, when
	// OpenShiftOptions does not (JSON: {"recertImage": REF, "etcdImage": REF}).
	ImagesFile = wire.ReconfigureImagesFile
)

// Defaults of Options.
const (
	DefaultMediumTimeout  = 10 * time.Minute
	DefaultPollInterval   = 2 * time.Second
	DefaultStatusInterval = 10 * time.Second
	DefaultAPITimeout     = 20 * time.Minute
	// DefaultKubeConfig is the SNO control plane's localhost admin kubeconfig.
	DefaultKubeConfig = "/etc/kubernetes/static-pod-resources/kube-apiserver-certs/secrets/node-kubeconfigs/localhost.kubeconfig"
	// MediumHelp is where the waiting message sends the technician.
	MediumHelp = "`snofactory site-config create --help`"
)

// DefaultMediumGlobs are where the medium is looked for, in order: the udev label links (our
// medium, then the image-based installer's), then CD-ROMs and virtio disks (a minimal
// initramfs has no udev).
func DefaultMediumGlobs() []string {
	var globs []string
	for _, label := range siteconfig.MediumLabels() {
		globs = append(globs, "/dev/disk/by-label/"+label)
	}
	return append(globs, "/dev/sr*", "/dev/vd*")
}

// Reporter sends one agent message; agent.Reporter is one, tests record the messages.
type Reporter interface {
	Report(ctx context.Context, phase string, status wire.Status, details map[string]string) (wire.Message, error)
}

// Runner runs a command on the node (steps.Runner); tests record the calls.
type Runner = steps.Runner

// Clock is the time source of the waits (clock.Clock).
type Clock = clock.Clock

// RealClock is the wall clock.
type RealClock = clock.Real

// Options say where and how to reconfigure.
type Options struct {
	// Root is the installed system's root: "/" on a node, a mount point when the running
	// system is an initramfs (the conformance OS).
	Root string
	// Target is oskind.CoreOS or oskind.OpenShift.
	Target oskind.Kind
	// Medium is the medium's path; empty means look for it (MediumGlobs).
	Medium string
	// MediumGlobs are the candidate devices, tried in order (default DefaultMediumGlobs).
	MediumGlobs []string
	// MediumTimeout bounds the wait for the medium (default DefaultMediumTimeout).
	MediumTimeout time.Duration
	// PollInterval is how often the medium and the API are looked for.
	PollInterval time.Duration
	// StatusInterval is how often the console hears that the medium is still awaited.
	StatusInterval time.Duration
	// Console receives the status lines a technician reads (default io.Discard).
	Console io.Writer
	// Reporter sends the agent messages; nil sends none. A failing reporter does not stop
	// the reconfiguration: at a site there is no factory host listening.
	Reporter Reporter
	// StateDir is the progress directory as seen by the running system (default
	// Root+DefaultStateDir).
	StateDir string
	// SiteKeysDir holds the public keys a medium must be signed by, as seen by the running
	// system (default Root+siteconfig.NodeKeysDir); with none there, unsigned media are
	// accepted.
	SiteKeysDir string
	// SiteIdentityFile is the age identity that opens the secrets a medium carries sealed,
	// as seen by the running system (default Root+siteconfig.NodeIdentityFile).
	SiteIdentityFile string
	// SeedName is the seed's name, which a medium's binding may name (sealed.json's seed).
	SeedName string
	// Fit is what a site must match (sealed.json's fit); nil: a seed sealed before the
	// record, which every site fits.
	Fit *seedfit.Record
	// MachineSerialFile holds the machine's serial number, which a medium's binding may
	// name, as seen by the running system (default DefaultMachineSerialFile).
	MachineSerialFile string
	// ResolvConf is the running system's resolv.conf, written besides Root's (default
	// /etc/resolv.conf).
	ResolvConf string
	// Run runs commands (default ExecRunner).
	Run Runner
	// ResizePartition tells the kernel a mounted partition grew (default BLKPGResize).
	ResizePartition PartitionResizer
	// Clock is the time source (default RealClock).
	Clock     Clock
	OpenShift OpenShiftOptions
}

// OpenShiftOptions are the OpenShift target's settings.
type OpenShiftOptions struct {
	// RecertImage and EtcdImage are the pinned images recert and its standalone etcd run
	// from; empty means read them from Root+ImagesFile.
	RecertImage, EtcdImage string
	// KubeConfig reaches the local API (default DefaultKubeConfig), under Root.
	KubeConfig string
	// APITimeout bounds the wait for the API after kubelet starts (default DefaultAPITimeout).
	APITimeout time.Duration
	// ReadyTimeout bounds each readiness wait (default DefaultReadyTimeout), ReadyPoll paces
	// them (default DefaultReadyPoll); SettleWindow is how long every ClusterOperator must
	// have stopped progressing (default DefaultSettleWindow).
	ReadyTimeout, ReadyPoll, SettleWindow time.Duration
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Root == "":
		return o, errors.New("reconfigure: no root given")
	case o.Target != oskind.CoreOS && o.Target != oskind.OpenShift:
		return o, fmt.Errorf("reconfigure: target %q, want %s or %s", o.Target, oskind.CoreOS, oskind.OpenShift)
	}
	if o.ResizePartition == nil {
		o.ResizePartition = BLKPGResize
	}
	if o.MediumGlobs == nil {
		o.MediumGlobs = DefaultMediumGlobs()
	}
	if o.MediumTimeout <= 0 {
		o.MediumTimeout = DefaultMediumTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.Console == nil {
		o.Console = io.Discard
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join(o.Root, DefaultStateDir)
	}
	if o.SiteKeysDir == "" {
		o.SiteKeysDir = filepath.Join(o.Root, siteconfig.NodeKeysDir)
	}
	if o.SiteIdentityFile == "" {
		o.SiteIdentityFile = filepath.Join(o.Root, siteconfig.NodeIdentityFile)
	}
	if o.MachineSerialFile == "" {
		o.MachineSerialFile = DefaultMachineSerialFile
	}
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if o.Run == nil {
		o.Run = steps.ExecRunner
	}
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.OpenShift.KubeConfig == "" {
		o.OpenShift.KubeConfig = DefaultKubeConfig
	}
	if o.OpenShift.APITimeout <= 0 {
		o.OpenShift.APITimeout = DefaultAPITimeout
	}
	if o.OpenShift.ReadyTimeout <= 0 {
		o.OpenShift.ReadyTimeout = DefaultReadyTimeout
	}
	if o.OpenShift.ReadyPoll <= 0 {
		o.OpenShift.ReadyPoll = DefaultReadyPoll
	}
	if o.OpenShift.SettleWindow <= 0 {
		o.OpenShift.SettleWindow = DefaultSettleWindow
	}
	return o, nil
}
